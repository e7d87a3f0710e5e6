/** The workspace's agents: a list (with each carrier's number), and a new agent by name (everything else is set on its page). */
import type { Schemas } from '../api-types.js';
import { api, ok } from '../api.js';
import { CARRIERS } from '../carriers.js';
import { navigate } from '../router.js';
import { canWrite, type SignedIn } from '../session.js';
import { ActionForm, ErrorNote, Field, Loading, MoreButton, When, formValue, useAction, usePaged } from '../ui.js';

/** The agent's number at a carrier: an account's once it is complete, a binding's (SIP) once bound; null when not set up. */
function carrierNumber(telephony: Schemas['Agent']['telephony'], provider: keyof Schemas['Agent']['telephony']): string | null {
  const status: { configured?: boolean; phone_number?: string | null } | null = telephony[provider];
  if (!status || status.configured === false) return null;
  return status.phone_number ?? null;
}

export function AgentsPage({ session }: { session: SignedIn }) {
  const agents = usePaged((starting_after) => ok(api.GET('/api/v1/agents', { params: { query: { limit: 50, starting_after } } })), []);
  const create = useAction(async (form: HTMLFormElement) => {
    const agent = await ok(api.POST('/api/v1/agents', { body: { name: formValue(form, 'name') } }));
    navigate('agents', agent.agent_id);
  });
  return (
    <section>
      <h1>Agents</h1>
      {canWrite(session) && (
        <ActionForm action={create} inline>
          <Field label="New agent's name">
            <input name="name" required maxLength={200} placeholder="Appointment reminder" />
          </Field>
          <button type="submit" disabled={create.busy}>
            Create agent
          </button>
        </ActionForm>
      )}
      <ErrorNote error={create.error ?? agents.error} />
      <Loading when={agents.loading && agents.items.length === 0} />
      <table>
        <thead>
          <tr>
            <th>Name</th>
            {CARRIERS.map((c) => (
              <th key={c.provider}>{c.provider}</th>
            ))}
            <th>Web sessions</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {agents.items.map((a) => (
            <tr key={a.agent_id}>
              <td>
                <a href={`#/agents/${a.agent_id}`}>{a.name}</a>
                <br />
                <small class="muted">
                  <code>{a.agent_id}</code>
                </small>
              </td>
              {CARRIERS.map((c) => (
                <td key={c.provider}>{carrierNumber(a.telephony, c.provider) ?? <span class="muted">not set up</span>}</td>
              ))}
              <td>{[a.realtime.enable_webcam && 'camera', a.realtime.enable_screen_share && 'screen'].filter(Boolean).join(', ') || 'voice and text'}</td>
              <td>
                <When iso={a.created_at} />
              </td>
            </tr>
          ))}
          {!agents.loading && agents.items.length === 0 && (
            <tr>
              <td colSpan={CARRIERS.length + 3} class="muted">
                No agents yet.
              </td>
            </tr>
          )}
        </tbody>
      </table>
      <MoreButton list={agents} />
    </section>
  );
}
