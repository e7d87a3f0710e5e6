/**
 * The bound on what an agent's draft links (tools, documents, MCP servers): every version copies its
 * links, and every conversation resolves them, so their number is bounded per kind. Checked by the
 * linking domain in the agent's write transaction (under its row lock, so two attaches cannot both
 * pass), after its insert: over the limit, the error rolls the write back.
 */
import type { Knex } from 'knex';
import { unprocessable } from '../errors/api-error.js';

/** 422 `agent_link_limit_reached` when the draft links more than `limit` rows of `table` (a detached document does not count). */
export async function refuseOverLimit(
  trx: Knex,
  table: 'agent_tools' | 'agent_documents' | 'agent_mcp_servers',
  agentId: string,
  limit: number,
  what: string,
  param: string,
): Promise<void> {
  const q = trx(table).where({ agent_id: agentId });
  if (table === 'agent_documents') q.whereNull('detached_at');
  const [{ n }] = await q.count<Array<{ n: string }>>({ n: '*' });
  if (Number(n) > limit) throw unprocessable('agent_link_limit_reached', `An agent may link at most ${limit} ${what}; detach one first.`, param);
}
