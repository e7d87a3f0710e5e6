/**
 * One agent: every field of it, provider credentials write-only (left empty, a stored credential stays),
 * inbound calls per provider, the SIP trunk number it answers, the realtime toggles, what post-call analysis extracts (a JSON Schema of
 * data and success criteria) and with which model, how its conversations flow (interruptions, turn
 * silence, the idle ladder, the longest conversation), and the agent tried live with the web widget.
 * Saving sends only what changed (PATCH merges provider configs field by field).
 */
import { useState } from 'preact/hooks';
import type { Schemas } from '../api-types.js';
import { api, ok } from '../api.js';
import { ACCOUNT_CARRIERS, fieldLabel, type AccountCarrier } from '../carriers.js';
import { navigate } from '../router.js';
import { canWrite, type SignedIn } from '../session.js';
import { ActionForm, ErrorNote, Field, Loading, useAction, useLoad } from '../ui.js';
import { TryAgent } from './try-agent.js';

type Agent = Schemas['Agent'];
type AgentPatch = Schemas['AgentUpdateRequest'];
type Voicemail = NonNullable<AgentPatch['voicemail_config']>;
type Conversation = NonNullable<Agent['conversation']>;
type Provider = AccountCarrier['provider'];

const TEXTS = ['name', 'description', 'instruction', 'first_message'] as const;
const NULLABLE_TEXTS = ['model', 'voice_id', 'analysis_model', 'language', 'language_code', 'accent', 'transfer_phone_number', 'transfer_criteria'] as const;

class FormProblem extends Error {}

function placeholdersText(map: Record<string, string>): string {
  return Object.entries(map)
    .map(([k, v]) => `${k}=${v}`)
    .join('\n');
}

function parsePlaceholders(text: string): Record<string, string> {
  const map: Record<string, string> = {};
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    const eq = line.indexOf('=');
    if (eq < 1) throw new FormProblem(`Placeholders, line ${i + 1}: write name=default value.`);
    map[line.slice(0, eq).trim()] = line.slice(eq + 1);
  });
  return map;
}

const sameMap = (a: Record<string, string>, b: Record<string, string>) => JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());

/** The fields of a carrier account that were typed (credentials are never shown, so empty means unchanged). */
function typed(f: FormData, carrier: AccountCarrier): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { name } of carrier.account) {
    const v = String(f.get(`${carrier.provider}.${name}`) ?? '').trim();
    if (v) out[name] = v;
  }
  return out;
}

/** The analysis setting the form describes: a JSON Schema typed as text, and success criteria; null when both are empty. */
function analysisOf(schemaText: string, criteriaText: string): Agent['analysis'] {
  const criteria = criteriaText.trim() || null;
  let schema: Record<string, unknown> | null = null;
  if (schemaText.trim()) {
    try {
      schema = JSON.parse(schemaText) as Record<string, unknown>;
    } catch (err) {
      throw new FormProblem(`Data schema: not JSON (${(err as Error).message}).`);
    }
    if (!schema || typeof schema !== 'object' || Array.isArray(schema))
      throw new FormProblem('Data schema: write a JSON Schema object, e.g. {"type": "object", "properties": {...}}.');
  }
  return schema === null && criteria === null ? null : { schema, success_criteria: criteria };
}

/** The same JSON value whatever the order of object keys (the service stores settings as jsonb, which orders them its own way). */
function sameValue(a: unknown, b: unknown): boolean {
  const sorted = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sorted)
      : v && typeof v === 'object'
        ? Object.fromEntries(
            Object.entries(v)
              .sort(([x], [y]) => (x < y ? -1 : 1))
              .map(([k, x]) => [k, sorted(x)]),
          )
        : v;
  return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
}

const DEFAULT_CONVERSATION: Conversation = { turn_detection: null, interruptions: 'always', idle: null, max_duration_seconds: null };

/**
 * The conversation settings the form describes, every field filled as the service shows them; the
 * sensitivities and padding the form does not show are kept as stored. The service checks the ranges.
 */
function conversationOf(text: (n: string) => string, stored: Agent['conversation']): Conversation {
  const whole = (name: string, label: string): number | null => {
    const v = text(name).trim();
    if (!v) return null;
    const n = Number(v);
    if (!Number.isInteger(n)) throw new FormProblem(`${label}: write a whole number, or leave it empty.`);
    return n;
  };
  const silence = whole('cv_silence', 'Silence that ends a turn');
  const td = stored?.turn_detection ?? null;
  const turn = {
    start_sensitivity: td?.start_sensitivity ?? null,
    end_sensitivity: td?.end_sensitivity ?? null,
    silence_ms: silence,
    prefix_padding_ms: td?.prefix_padding_ms ?? null,
  };
  const idleMs = whole('cv_idle', 'Idle time');
  const reminders = text('cv_reminders')
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);
  return {
    turn_detection: Object.values(turn).every((v) => v === null) ? null : turn,
    interruptions: (text('cv_interruptions') || 'always') as Conversation['interruptions'],
    idle:
      idleMs === null
        ? null
        : {
            idle_ms: idleMs,
            reminders,
            max_reminders: whole('cv_max_reminders', 'Reminders in a row') ?? reminders.length,
            goodbye_message: text('cv_goodbye').trim() || null,
          },
    max_duration_seconds: whole('cv_max_duration', 'Longest conversation'),
  };
}

/** What the form changes on the agent. */
export function agentPatch(form: HTMLFormElement, agent: Agent): AgentPatch {
  const f = new FormData(form);
  const text = (n: string) => String(f.get(n) ?? '');
  const patch: AgentPatch = {};
  for (const k of TEXTS) if (text(k) !== agent[k]) patch[k] = text(k);
  for (const k of NULLABLE_TEXTS) {
    const v = text(k).trim();
    if (v !== (agent[k] ?? '')) patch[k] = v === '' ? null : v;
  }
  const canEnd = f.has('can_end_conversation');
  if (canEnd !== (agent.can_end_conversation ?? false)) patch.can_end_conversation = canEnd;
  const placeholders = parsePlaceholders(text('variable_placeholders'));
  if (!sameMap(placeholders, agent.variable_placeholders ?? {})) patch.variable_placeholders = placeholders;

  const timeout = text('vm_timeout').trim();
  const voicemail: Voicemail | null =
    text('vm_mode') === 'configured'
      ? {
          enabled: f.has('vm_enabled'),
          message: text('vm_message').trim() || null,
          detection_timeout_seconds: timeout ? Number(timeout) : null,
          retry_on_voicemail: f.has('vm_retry'),
        }
      : null;
  const stored = agent.voicemail_config ?? null;
  const sameVoicemail =
    voicemail === null || stored === null
      ? voicemail === stored
      : voicemail.enabled === stored.enabled &&
        voicemail.message === (stored.message ?? null) &&
        voicemail.detection_timeout_seconds === (stored.detection_timeout_seconds ?? null) &&
        voicemail.retry_on_voicemail === stored.retry_on_voicemail;
  if (!sameVoicemail) patch.voicemail_config = voicemail;

  const conversation = conversationOf(text, agent.conversation ?? null);
  if (!sameValue(conversation, agent.conversation ?? DEFAULT_CONVERSATION))
    patch.conversation = sameValue(conversation, DEFAULT_CONVERSATION) ? null : conversation;

  const realtime = { enable_webcam: f.has('rt_webcam'), enable_screen_share: f.has('rt_screen') };
  if (realtime.enable_webcam !== agent.realtime.enable_webcam || realtime.enable_screen_share !== agent.realtime.enable_screen_share) patch.realtime = realtime;

  // Each carrier account: only what was typed, and its number only when it changed (PATCH merges field by field).
  for (const carrier of ACCOUNT_CARRIERS) {
    const typedFields = typed(f, carrier);
    if (typedFields.phone_number === (agent.telephony[carrier.provider].phone_number ?? undefined)) delete typedFields.phone_number;
    if (Object.keys(typedFields).length) Object.assign(patch, { [carrier.config]: typedFields });
  }
  const analysis = analysisOf(text('an_schema'), text('an_criteria'));
  // The service checks the schema (422 names the field); the form only makes sure it is JSON.
  if (JSON.stringify(analysis) !== JSON.stringify(agent.analysis ?? null)) patch.analysis = analysis as AgentPatch['analysis'];

  // The select is there once the workspace's trunks have loaded: `trunk_id number`, or empty for none.
  if (f.has('sip_binding')) {
    const binding = text('sip_binding');
    if (binding !== sipBinding(agent)) {
      const [trunk_id, phone_number] = binding.split(' ');
      patch.sip_config = binding ? { trunk_id, phone_number } : null;
    }
  }
  return patch;
}

const sipBinding = (agent: Agent) => (agent.telephony.sip ? `${agent.telephony.sip.trunk_id} ${agent.telephony.sip.phone_number}` : '');

/** Which SIP trunk number the agent answers: every number of the workspace's trunks, or none. */
function SipFields({ agent }: { agent: Agent }) {
  const trunks = useLoad(async () => (await ok(api.GET('/api/v1/sip-trunks', { params: { query: { limit: 100 } } }))).data, []);
  const current = sipBinding(agent);
  return (
    <fieldset>
      <legend>
        SIP <span class={`status status-${current ? 'active' : 'idle'}`}>{current ? 'answers a trunk number' : 'not bound'}</span>
      </legend>
      <ErrorNote error={trunks.error} />
      <Loading when={trunks.loading && !trunks.data} />
      {trunks.data && (
        <Field label="Inbound number" hint="The agent answers calls a SIP trunk delivers to this number (add trunks under SIP trunks).">
          <select name="sip_binding">
            <option value="" selected={!current}>
              None
            </option>
            {trunks.data.flatMap((t) =>
              (t.inbound?.numbers ?? []).map((n) => (
                <option key={`${t.trunk_id} ${n}`} value={`${t.trunk_id} ${n}`} selected={current === `${t.trunk_id} ${n}`}>
                  {n} ({t.name})
                </option>
              )),
            )}
          </select>
        </Field>
      )}
    </fieldset>
  );
}

/** A carrier account's fields, from the contract (its number last); write-only ones are password inputs left empty. */
function ProviderFields({ carrier, agent }: { carrier: AccountCarrier; agent: Agent }) {
  const provider = carrier.provider;
  const status = agent.telephony[provider];
  const fields = [...carrier.account.filter((fd) => fd.name !== 'phone_number'), ...carrier.account.filter((fd) => fd.name === 'phone_number')];
  const inputProps = (name: string) => ({
    name: `${provider}.${name}`,
    autoComplete: 'off',
    defaultValue: name === 'phone_number' ? (status.phone_number ?? '') : '',
    placeholder: name === 'phone_number' ? '' : status.configured ? '•••••• stored' : '',
  });
  return (
    <fieldset>
      <legend>
        {provider} <span class={`status status-${status.configured ? 'active' : 'idle'}`}>{status.configured ? 'configured' : 'not configured'}</span>
      </legend>
      <div class="row">
        {fields.map((fd) => (
          <Field
            key={fd.name}
            label={fieldLabel(fd.name)}
            hint={
              fd.secret
                ? 'Write-only: never shown. Leave empty to keep the stored value.'
                : fd.name === 'phone_number'
                  ? 'E.164, e.g. +14155550100'
                  : 'Not shown once stored; leave empty to keep it.'
            }
          >
            {fd.secret ? <input type="password" {...inputProps(fd.name)} /> : <input type="text" {...inputProps(fd.name)} />}
          </Field>
        ))}
      </div>
    </fieldset>
  );
}

/**
 * A choice of the voice catalogue; empty: the deployment's default (named when the catalogue marks
 * one). A stored value the catalogue no longer lists stays choosable.
 */
function CatalogueSelect(props: { name: string; label: string; choices: Array<{ id: string; default?: boolean }>; current: string | null }) {
  const listed = props.choices.map((c) => c.id);
  const ids = props.current && !listed.includes(props.current) ? [props.current, ...listed] : listed;
  const fallback = props.choices.find((c) => c.default)?.id;
  return (
    <Field label={props.label}>
      <select name={props.name}>
        <option value="" selected={!props.current}>
          {fallback ? `Default (${fallback})` : 'Default'}
        </option>
        {ids.map((id) => (
          <option key={id} value={id} selected={id === props.current}>
            {id}
          </option>
        ))}
      </select>
    </Field>
  );
}

export function AgentPage({ session, agentId }: { session: SignedIn; agentId: string }) {
  const loaded = useLoad(() => ok(api.GET('/api/v1/agents/{agent_id}', { params: { path: { agent_id: agentId } } })), [agentId]);
  const catalogue = useLoad(() => ok(api.GET('/api/v1/voice-catalogue')), []);
  const models = catalogue.data?.models ?? [];
  const voices = catalogue.data?.voices ?? [];
  const analysisModels = catalogue.data?.analysis_models ?? [];
  const [version, setVersion] = useState(0);
  const [saved, setSaved] = useState<string | null>(null);
  const agent = loaded.data;
  const writable = canWrite(session);

  const save = useAction(async (form: HTMLFormElement) => {
    setSaved(null);
    const patch = agentPatch(form, agent!);
    if (Object.keys(patch).length === 0) {
      setSaved('Nothing changed.');
      return;
    }
    await ok(api.PATCH('/api/v1/agents/{agent_id}', { params: { path: { agent_id: agentId } }, body: patch }));
    loaded.reload();
    setVersion((v) => v + 1);
    setSaved(`Saved: ${Object.keys(patch).join(', ')}.`);
  });
  const clearProvider = useAction(async (provider: Provider) => {
    if (!confirm(`Remove ${provider}'s credentials and number from this agent?`)) return;
    const body: AgentPatch = { [`${provider}_config`]: null };
    await ok(api.PATCH('/api/v1/agents/{agent_id}', { params: { path: { agent_id: agentId } }, body }));
    loaded.reload();
    setVersion((v) => v + 1);
  });
  const inbound = useAction(async (provider: Provider, on: boolean) => {
    const params = { path: { agent_id: agentId, provider } };
    await ok(
      on
        ? api.POST('/api/v1/agents/{agent_id}/telephony/{provider}/inbound', { params })
        : api.DELETE('/api/v1/agents/{agent_id}/telephony/{provider}/inbound', { params }),
    );
    loaded.reload();
  });
  const remove = useAction(async () => {
    if (!confirm(`Delete the agent "${agent!.name}"? This cannot be undone.`)) return;
    await ok(api.DELETE('/api/v1/agents/{agent_id}', { params: { path: { agent_id: agentId } } }));
    navigate('agents');
  });

  if (!agent)
    return (
      <section>
        <ErrorNote error={loaded.error} />
        <Loading when={loaded.loading} />
      </section>
    );
  const vm = agent.voicemail_config ?? null;
  const cv = agent.conversation ?? DEFAULT_CONVERSATION;
  return (
    <section>
      <p>
        <a href="#/agents">← Agents</a>
      </p>
      <h1>{agent.name}</h1>
      <p class="muted">
        <code>{agent.agent_id}</code>
      </p>
      <ActionForm key={version} action={save} label="Agent settings">
        <fieldset disabled={!writable}>
          <legend>Persona</legend>
          <Field label="Name">
            <input name="name" required maxLength={200} defaultValue={agent.name} />
          </Field>
          <Field label="Description" hint="For people; the model does not see it.">
            <textarea name="description" maxLength={2000} rows={2} defaultValue={agent.description} />
          </Field>
          <Field label="Instruction" hint="The system instruction; {{name}} placeholders are filled per call, {{name|default}} when the call gives none.">
            <textarea name="instruction" maxLength={50000} rows={6} defaultValue={agent.instruction} />
          </Field>
          <Field label="First message" hint="Empty: the agent waits for the other side to speak.">
            <textarea name="first_message" maxLength={2000} rows={2} defaultValue={agent.first_message} />
          </Field>
          <Field label="Placeholders" hint="One per line: name=default value. A placeholder with no default here or in itself must be given by every call.">
            <textarea name="variable_placeholders" rows={3} defaultValue={placeholdersText(agent.variable_placeholders ?? {})} />
          </Field>
          <div class="row">
            <CatalogueSelect name="model" label="Model" choices={models} current={agent.model ?? null} />
            <CatalogueSelect name="voice_id" label="Voice" choices={voices} current={agent.voice_id ?? null} />
            <Field label="Language">
              <input name="language" maxLength={64} defaultValue={agent.language ?? ''} placeholder="English" />
            </Field>
            <Field label="Language code">
              <input name="language_code" maxLength={35} defaultValue={agent.language_code ?? ''} placeholder="en-US" />
            </Field>
            <Field label="Accent">
              <input name="accent" maxLength={64} defaultValue={agent.accent ?? ''} />
            </Field>
          </div>
          <label class="check">
            <input type="checkbox" name="can_end_conversation" defaultChecked={agent.can_end_conversation ?? false} /> The agent may end the conversation
          </label>
        </fieldset>
        <fieldset disabled={!writable}>
          <legend>Transfer</legend>
          <div class="row">
            <Field label="Transfer to" hint="E.164; empty turns transfer off.">
              <input name="transfer_phone_number" defaultValue={agent.transfer_phone_number ?? ''} />
            </Field>
            <Field label="When to transfer">
              <textarea name="transfer_criteria" maxLength={2000} rows={2} defaultValue={agent.transfer_criteria ?? ''} />
            </Field>
          </div>
        </fieldset>
        <fieldset disabled={!writable}>
          <legend>Answering machines</legend>
          <Field label="Voicemail handling">
            <select name="vm_mode">
              <option value="none" selected={!vm}>
                Not configured
              </option>
              <option value="configured" selected={!!vm}>
                Configured as below
              </option>
            </select>
          </Field>
          <label class="check">
            <input type="checkbox" name="vm_enabled" defaultChecked={vm?.enabled ?? false} /> Detect answering machines
          </label>
          <label class="check">
            <input type="checkbox" name="vm_retry" defaultChecked={vm?.retry_on_voicemail ?? true} /> Batches call again after voicemail
          </label>
          <div class="row">
            <Field label="Message after the beep" hint="Empty: hang up without a message.">
              <textarea name="vm_message" maxLength={2000} rows={2} defaultValue={vm?.message ?? ''} />
            </Field>
            <Field label="Detection timeout (s)">
              <input name="vm_timeout" type="number" min={3} max={60} defaultValue={vm?.detection_timeout_seconds?.toString() ?? ''} />
            </Field>
          </div>
        </fieldset>
        <fieldset disabled={!writable}>
          <legend>Conversation flow</legend>
          <div class="row">
            <Field label="Interruptions" hint="Whether the person may talk over the agent.">
              <select name="cv_interruptions">
                <option value="always" selected={cv.interruptions === 'always'}>
                  Always
                </option>
                <option value="after_first_message" selected={cv.interruptions === 'after_first_message'}>
                  Not during the opening line
                </option>
                <option value="never" selected={cv.interruptions === 'never'}>
                  Never
                </option>
              </select>
            </Field>
            <Field label="Silence that ends a turn (ms)" hint="100-5000; empty: the voice service's default.">
              <input name="cv_silence" type="number" min={100} max={5000} defaultValue={cv.turn_detection?.silence_ms?.toString() ?? ''} />
            </Field>
            <Field label="Longest conversation (s)" hint="10-14400; empty: the service's maximum.">
              <input name="cv_max_duration" type="number" min={10} max={14400} defaultValue={cv.max_duration_seconds?.toString() ?? ''} />
            </Field>
          </div>
          <div class="row">
            <Field
              label="Idle time (ms)"
              hint="1000-600000 of silence before each reminder; empty: no reminders (calls hang up after the service's silence timeout)."
            >
              <input name="cv_idle" type="number" min={1000} max={600000} defaultValue={cv.idle?.idle_ms.toString() ?? ''} />
            </Field>
            <Field label="Reminders in a row" hint="0-10; empty: one per line below.">
              <input name="cv_max_reminders" type="number" min={0} max={10} defaultValue={cv.idle ? cv.idle.max_reminders.toString() : ''} />
            </Field>
          </div>
          <Field label="Reminders" hint="One per line, said in order to a silent person.">
            <textarea name="cv_reminders" rows={2} defaultValue={(cv.idle?.reminders ?? []).join('\n')} />
          </Field>
          <Field label="Goodbye before hanging up" hint="Said after the last reminder; empty: hang up without a word.">
            <input name="cv_goodbye" maxLength={500} defaultValue={cv.idle?.goodbye_message ?? ''} />
          </Field>
        </fieldset>
        <fieldset disabled={!writable}>
          <legend>Web sessions</legend>
          <label class="check">
            <input type="checkbox" name="rt_webcam" defaultChecked={agent.realtime.enable_webcam} /> Camera
          </label>
          <label class="check">
            <input type="checkbox" name="rt_screen" defaultChecked={agent.realtime.enable_screen_share} /> Screen sharing
          </label>
        </fieldset>
        <fieldset disabled={!writable}>
          <legend>Results of every conversation</legend>
          <Field
            label="Data schema"
            hint='JSON Schema of the data post-call analysis extracts into each call&apos;s "data" (root "type": "object"; at most 16 KiB). Empty: no data.'
          >
            <textarea
              name="an_schema"
              rows={6}
              class="code"
              spellcheck={false}
              defaultValue={agent.analysis?.schema ? JSON.stringify(agent.analysis.schema, null, 2) : ''}
              placeholder='{"type": "object", "properties": {"booked_time": {"type": "string", "format": "date-time"}}}'
            />
          </Field>
          <Field label="Success criteria" hint="What makes a conversation a success, in plain words. Empty: no judgement.">
            <textarea name="an_criteria" maxLength={2000} rows={2} defaultValue={agent.analysis?.success_criteria ?? ''} />
          </Field>
          <CatalogueSelect name="analysis_model" label="Analysis model" choices={analysisModels} current={agent.analysis_model ?? null} />
        </fieldset>
        <fieldset disabled={!writable} class="providers">
          <legend>Telephony</legend>
          {ACCOUNT_CARRIERS.map((carrier) => (
            <ProviderFields key={carrier.provider} carrier={carrier} agent={agent} />
          ))}
          <SipFields agent={agent} />
        </fieldset>
        <ErrorNote error={save.error} />
        {saved && (
          <p class="notice" role="status">
            {saved}
          </p>
        )}
        {writable && (
          <button type="submit" disabled={save.busy}>
            Save changes
          </button>
        )}
      </ActionForm>

      <h2>Inbound calls</h2>
      <ErrorNote error={inbound.error ?? clearProvider.error} />
      <table>
        <thead>
          <tr>
            <th>Provider</th>
            <th>Number</th>
            <th>Inbound</th>
            <th>
              <span class="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {ACCOUNT_CARRIERS.map(({ provider: p }) => {
            const st = agent.telephony[p];
            return (
              <tr key={p}>
                <td>{p}</td>
                <td>{st.phone_number ?? <span class="muted">—</span>}</td>
                <td>{st.inbound_enabled ? 'answered by this agent' : 'off'}</td>
                <td>
                  {writable && st.configured && (
                    <button type="button" class="secondary" disabled={inbound.busy} onClick={() => void inbound.run(p, !st.inbound_enabled)}>
                      {st.inbound_enabled ? 'Turn inbound off' : 'Answer inbound calls'}
                    </button>
                  )}
                  {writable && st.configured && (
                    <button type="button" class="danger" disabled={clearProvider.busy} onClick={() => void clearProvider.run(p)}>
                      Remove {p}
                    </button>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>

      <h2>Try it</h2>
      <TryAgent agentId={agent.agent_id} key={`${agent.agent_id}:${agent.realtime.enable_webcam}:${agent.realtime.enable_screen_share}`} />

      {writable && (
        <>
          <h2>Danger zone</h2>
          <ErrorNote error={remove.error} />
          <button type="button" class="danger" disabled={remove.busy} onClick={() => void remove.run()}>
            Delete agent
          </button>
        </>
      )}
    </section>
  );
}
