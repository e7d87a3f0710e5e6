/**
 * SIP trunks: the workspace's carriers and PBXs that send calls to its agents (sources, digest
 * credentials, the numbers they deliver) and take its outbound calls (termination host): added,
 * listed, edited (only what changed is sent, and the service merges it; a password left empty stays)
 * and deleted. Passwords are write-only; an agent answers a trunk's number from its own page.
 */
import { useState } from 'preact/hooks';
import type { Schemas } from '../api-types.js';
import { api, ok } from '../api.js';
import { canWrite, type SignedIn } from '../session.js';
import { ActionForm, ErrorNote, Field, Loading, When, formValue, useAction, useLoad } from '../ui.js';

type Trunk = Schemas['SipTrunk'];
type CreateRequest = Schemas['SipTrunkCreateRequest'];
type UpdateRequest = Schemas['SipTrunkUpdateRequest'];

/** One entry per line or comma. */
const listOf = (text: string) =>
  text
    .split(/[\n,]/)
    .map((s) => s.trim())
    .filter(Boolean);

/** The trunk the form describes; a side with nothing typed is left out. */
export function trunkRequest(form: HTMLFormElement): CreateRequest {
  const v = (name: string) => formValue(form, name).trim();
  const body: CreateRequest = { name: v('name') };
  const sources = listOf(v('in_sources'));
  const numbers = listOf(v('in_numbers'));
  if (sources.length || numbers.length || v('in_username')) {
    body.inbound = { allowed_sources: sources, numbers };
    if (v('in_username') || v('in_password')) body.inbound.auth = { username: v('in_username'), password: v('in_password') };
  }
  if (v('out_host')) {
    body.outbound = { host: v('out_host'), transport: v('out_transport') as Schemas['SipTransport'], caller_id_numbers: listOf(v('out_caller_ids')) };
    if (v('out_username') || v('out_password')) body.outbound.auth = { username: v('out_username'), password: v('out_password') };
  }
  return body;
}

const sameSet = (a: readonly string[], b: readonly string[]) => JSON.stringify([...a].sort()) === JSON.stringify([...b].sort());

/** Digest credentials as changed: removed when the username is emptied, sent when it changed or a password was typed. */
function authChange(username: string, password: string, stored: { username: string } | null | undefined) {
  if (!username) return stored ? { auth: null } : {};
  if (username === stored?.username && !password) return {};
  return { auth: { username, ...(password ? { password } : {}) } };
}

/**
 * What the edit form changes on `trunk`: each field that differs from the stored one (lists compared as
 * sets; a side with nothing left is removed, `null`). The service merges it and checks the merged trunk.
 */
export function trunkPatch(form: HTMLFormElement, trunk: Trunk): UpdateRequest {
  const v = (name: string) => formValue(form, name).trim();
  const patch: UpdateRequest = {};
  if (v('name') !== trunk.name) patch.name = v('name');

  const [sources, numbers, i] = [listOf(v('in_sources')), listOf(v('in_numbers')), trunk.inbound];
  if (!sources.length && !numbers.length && !v('in_username')) {
    if (i) patch.inbound = null;
  } else {
    const inbound = {
      ...(!i || !sameSet(sources, i.allowed_sources) ? { allowed_sources: sources } : {}),
      ...(!i || !sameSet(numbers, i.numbers) ? { numbers } : {}),
      ...authChange(v('in_username'), v('in_password'), i?.auth),
    };
    if (Object.keys(inbound).length) patch.inbound = inbound;
  }

  const o = trunk.outbound;
  if (!v('out_host')) {
    if (o) patch.outbound = null;
  } else {
    const [callerIds, transport] = [listOf(v('out_caller_ids')), v('out_transport') as Schemas['SipTransport']];
    const outbound = {
      ...(v('out_host') !== o?.host ? { host: v('out_host') } : {}),
      ...(transport !== o?.transport ? { transport } : {}),
      ...(!o || !sameSet(callerIds, o.caller_id_numbers) ? { caller_id_numbers: callerIds } : {}),
      ...authChange(v('out_username'), v('out_password'), o?.auth),
    };
    if (Object.keys(outbound).length) patch.outbound = outbound;
  }
  return patch;
}

/** A side's digest credentials: the username shown, the password never (left empty while editing, the stored one stays). */
function DigestFields(props: { side: 'in' | 'out'; stored: { username: string } | null | undefined; usernameHint?: string; editing: boolean }) {
  return (
    <div class="row">
      <Field label="Digest username" hint={props.usernameHint}>
        <input name={`${props.side}_username`} autoComplete="off" maxLength={128} defaultValue={props.stored?.username ?? ''} />
      </Field>
      <Field label="Digest password" hint={props.editing ? 'Write-only: never shown. Leave empty to keep the stored one.' : 'Write-only: never shown.'}>
        <input name={`${props.side}_password`} type="password" autoComplete="new-password" maxLength={128} />
      </Field>
    </div>
  );
}

/** The fields of a trunk, empty for a new one or holding `trunk`'s (never a password: left empty, a stored one stays). */
function TrunkFields({ trunk }: { trunk?: Trunk }) {
  const i = trunk?.inbound;
  const o = trunk?.outbound;
  const lines = (list: readonly string[] | undefined) => (list ?? []).join('\n');
  return (
    <>
      <Field label="Name">
        <input name="name" required maxLength={200} placeholder="Acme carrier" defaultValue={trunk?.name ?? ''} />
      </Field>
      <fieldset>
        <legend>Inbound: calls the trunk sends to your agents</legend>
        <div class="row">
          <Field label="Allowed sources" hint="Addresses or CIDR ranges, one per line. Empty: any source, with credentials.">
            <textarea name="in_sources" rows={3} placeholder="203.0.113.0/24" defaultValue={lines(i?.allowed_sources)} />
          </Field>
          <Field label="Numbers it delivers" hint="E.164, one per line.">
            <textarea name="in_numbers" rows={3} placeholder="+14155550140" defaultValue={lines(i?.numbers)} />
          </Field>
        </div>
        <DigestFields side="in" stored={i?.auth} usernameHint="Optional; with a password, the trunk must answer a 401 challenge." editing={!!trunk} />
      </fieldset>
      <fieldset>
        <legend>Outbound: where your agents' calls go</legend>
        <div class="row">
          <Field label="Host" hint="host[:port]; empty: no outbound side.">
            <input name="out_host" maxLength={262} placeholder="sip.carrier.example:5060" defaultValue={o?.host ?? ''} />
          </Field>
          <Field label="Transport">
            <select name="out_transport">
              {(['udp', 'tcp', 'tls'] as const).map((tr) => (
                <option key={tr} value={tr} selected={tr === (o?.transport ?? 'udp')}>
                  {tr}
                </option>
              ))}
            </select>
          </Field>
          <Field label="Caller ids" hint="E.164, one per line.">
            <textarea name="out_caller_ids" rows={2} defaultValue={lines(o?.caller_id_numbers)} />
          </Field>
        </div>
        <DigestFields side="out" stored={o?.auth} editing={!!trunk} />
      </fieldset>
    </>
  );
}

function TrunkRow({
  trunk,
  writable,
  onEdit,
  onRemove,
  busy,
}: {
  trunk: Trunk;
  writable: boolean;
  onEdit: (t: Trunk) => void;
  onRemove: (t: Trunk) => void;
  busy: boolean;
}) {
  const i = trunk.inbound;
  const o = trunk.outbound;
  return (
    <tr>
      <td>
        {trunk.name}
        <br />
        <code class="muted">{trunk.trunk_id}</code>
      </td>
      <td>
        {i ? (
          <>
            {i.allowed_sources.length ? i.allowed_sources.join(', ') : <span class="muted">any source</span>}
            {i.auth && <div class="muted">digest user {i.auth.username}</div>}
            <div>{i.numbers.length ? i.numbers.join(', ') : <span class="muted">no numbers</span>}</div>
          </>
        ) : (
          <span class="muted">—</span>
        )}
      </td>
      <td>
        {o ? (
          <>
            {o.host} ({o.transport}){o.auth && <div class="muted">digest user {o.auth.username}</div>}
          </>
        ) : (
          <span class="muted">—</span>
        )}
      </td>
      <td>
        <When iso={trunk.created_at} />
      </td>
      <td>
        {writable && (
          <>
            <button type="button" class="secondary" onClick={() => onEdit(trunk)}>
              Edit
            </button>{' '}
            <button type="button" class="danger" disabled={busy} onClick={() => onRemove(trunk)}>
              Delete
            </button>
          </>
        )}
      </td>
    </tr>
  );
}

export function SipTrunksPage({ session }: { session: SignedIn }) {
  const trunks = useLoad(async () => (await ok(api.GET('/api/v1/sip-trunks', { params: { query: { limit: 100 } } }))).data, []);
  const add = useAction(async (form: HTMLFormElement) => {
    await ok(api.POST('/api/v1/sip-trunks', { body: trunkRequest(form) }));
    form.reset();
    trunks.reload();
  });
  const remove = useAction(async (trunk: Trunk) => {
    if (!confirm(`Delete the SIP trunk "${trunk.name}"? Its numbers stop reaching the service.`)) return;
    await ok(api.DELETE('/api/v1/sip-trunks/{trunk_id}', { params: { path: { trunk_id: trunk.trunk_id } } }));
    trunks.reload();
  });
  const [editing, setEditing] = useState<Trunk | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const edit = useAction(async (form: HTMLFormElement) => {
    setSaved(null);
    const patch = trunkPatch(form, editing!);
    if (Object.keys(patch).length === 0) {
      setSaved('Nothing changed.');
      return;
    }
    const updated = await ok(api.PATCH('/api/v1/sip-trunks/{trunk_id}', { params: { path: { trunk_id: editing!.trunk_id } }, body: patch }));
    setEditing(null);
    setSaved(`Saved ${updated.name}: ${Object.keys(patch).join(', ')}.`);
    trunks.reload();
  });
  const writable = canWrite(session);
  return (
    <section>
      <h1>SIP trunks</h1>
      {writable && (
        <ActionForm action={add} label="New SIP trunk">
          <TrunkFields />
          <ErrorNote error={add.error} />
          <button type="submit" disabled={add.busy}>
            Add SIP trunk
          </button>
        </ActionForm>
      )}
      {saved && (
        <p class="notice" role="status">
          {saved}
        </p>
      )}
      {editing && (
        // Keyed by the trunk, so its fields start from what is stored each time it is opened.
        <ActionForm key={editing.trunk_id} action={edit} label={`Edit SIP trunk ${editing.name}`}>
          <h2>Edit {editing.name}</h2>
          <TrunkFields trunk={editing} />
          <ErrorNote error={edit.error} />
          <button type="submit" disabled={edit.busy}>
            Save trunk
          </button>{' '}
          <button type="button" class="secondary" onClick={() => setEditing(null)}>
            Cancel
          </button>
        </ActionForm>
      )}
      <ErrorNote error={trunks.error ?? remove.error} />
      <Loading when={trunks.loading && !trunks.data} />
      {trunks.data && (
        <table>
          <thead>
            <tr>
              <th>Trunk</th>
              <th>Inbound</th>
              <th>Outbound</th>
              <th>Created</th>
              <th>
                <span class="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {trunks.data.map((t) => (
              <TrunkRow
                key={t.trunk_id}
                trunk={t}
                writable={writable}
                busy={remove.busy}
                onEdit={(x) => {
                  // A refusal shown for the trunk edited before is not this one's.
                  edit.clearError();
                  setSaved(null);
                  setEditing(x);
                }}
                onRemove={(x) => void remove.run(x)}
              />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
