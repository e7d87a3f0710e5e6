/**
 * SIP trunks: the workspace's carriers and PBXs that send calls to its agents (sources, digest
 * credentials, the numbers they deliver) and take its outbound calls (termination host). Passwords are
 * write-only; an agent answers a trunk's number from its own page.
 */
import type { Schemas } from '../api-types.js';
import { api, ok } from '../api.js';
import { canWrite, type SignedIn } from '../session.js';
import { ActionForm, ErrorNote, Field, Loading, When, formValue, useAction, useLoad } from '../ui.js';

type Trunk = Schemas['SipTrunk'];
type CreateRequest = Schemas['SipTrunkCreateRequest'];

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

function TrunkRow({ trunk, writable, onRemove, busy }: { trunk: Trunk; writable: boolean; onRemove: (t: Trunk) => void; busy: boolean }) {
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
          <button type="button" class="danger" disabled={busy} onClick={() => onRemove(trunk)}>
            Delete
          </button>
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
  const writable = canWrite(session);
  return (
    <section>
      <h1>SIP trunks</h1>
      {writable && (
        <ActionForm action={add} label="New SIP trunk">
          <Field label="Name">
            <input name="name" required maxLength={200} placeholder="Acme carrier" />
          </Field>
          <fieldset>
            <legend>Inbound: calls the trunk sends to your agents</legend>
            <div class="row">
              <Field label="Allowed sources" hint="Addresses or CIDR ranges, one per line. Empty: any source, with credentials.">
                <textarea name="in_sources" rows={3} placeholder="203.0.113.0/24" />
              </Field>
              <Field label="Numbers it delivers" hint="E.164, one per line.">
                <textarea name="in_numbers" rows={3} placeholder="+14155550140" />
              </Field>
            </div>
            <div class="row">
              <Field label="Digest username" hint="Optional; with a password, the trunk must answer a 401 challenge.">
                <input name="in_username" autoComplete="off" maxLength={128} />
              </Field>
              <Field label="Digest password" hint="Write-only: never shown.">
                <input name="in_password" type="password" autoComplete="new-password" maxLength={128} />
              </Field>
            </div>
          </fieldset>
          <fieldset>
            <legend>Outbound: where your agents' calls go</legend>
            <div class="row">
              <Field label="Host" hint="host[:port]; empty: no outbound side.">
                <input name="out_host" maxLength={262} placeholder="sip.carrier.example:5060" />
              </Field>
              <Field label="Transport">
                <select name="out_transport">
                  <option value="udp">udp</option>
                  <option value="tcp">tcp</option>
                  <option value="tls">tls</option>
                </select>
              </Field>
              <Field label="Caller ids" hint="E.164, one per line.">
                <textarea name="out_caller_ids" rows={2} />
              </Field>
            </div>
            <div class="row">
              <Field label="Digest username">
                <input name="out_username" autoComplete="off" maxLength={128} />
              </Field>
              <Field label="Digest password" hint="Write-only: never shown.">
                <input name="out_password" type="password" autoComplete="new-password" maxLength={128} />
              </Field>
            </div>
          </fieldset>
          <ErrorNote error={add.error} />
          <button type="submit" disabled={add.busy}>
            Add SIP trunk
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
              <TrunkRow key={t.trunk_id} trunk={t} writable={writable} busy={remove.busy} onRemove={(x) => void remove.run(x)} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
