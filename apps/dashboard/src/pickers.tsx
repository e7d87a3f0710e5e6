/** Choices forms share: an agent of the workspace, and a carrier (the contract's list, generated/carriers.ts). */
import type { Schemas } from './api-types.js';
import { CARRIERS } from './carriers.js';
import { Field } from './ui.js';

/** `agent_id`: one of `agents` (the workspace's, loaded by the page). */
export function AgentSelect({ agents }: { agents: ReadonlyArray<Schemas['Agent']> | undefined }) {
  return (
    <Field label="Agent">
      <select name="agent_id" required>
        {(agents ?? []).map((a) => (
          <option key={a.agent_id} value={a.agent_id}>
            {a.name}
          </option>
        ))}
      </select>
    </Field>
  );
}

/** `provider`: every carrier, or none (the service takes the agent's one configured carrier). */
export function ProviderSelect({ label, hint }: { label: string; hint: string }) {
  return (
    <Field label={label} hint={hint}>
      <select name="provider">
        <option value="">the agent's one configured carrier</option>
        {CARRIERS.map((c) => (
          <option key={c.provider} value={c.provider}>
            {c.provider}
          </option>
        ))}
      </select>
    </Field>
  );
}
