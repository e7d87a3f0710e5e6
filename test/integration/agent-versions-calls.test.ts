/**
 * Phone calls run the published version of their agent (issue 35): a draft does not reach calls until
 * it is published; each call keeps the version it was created with (`Call.agent_version`, migration
 * 044's `calls.agent_version`) whatever is published later, and its runtime agent is that version's.
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';

let t: TestService;
let tn: Tenant;
before(async () => {
  t = await startTestService(FAST_CALLS);
  tn = await tenant(t);
});
after(() => t.close());

const api = (method: 'post' | 'patch', path: string, body: object) =>
  t.http[method](path)
    .set({ Authorization: `Bearer ${tn.apiKey}` })
    .send(body);

async function call(agentId: string) {
  const placed = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber() });
  assert.equal(placed.status, 201, JSON.stringify(placed.body));
  return placed.body.call_id as string;
}
const storedInstruction = async (callId: string) => (await t.service.db.knex('calls').where({ id: callId }).first('instruction')).instruction;

it('a draft does not reach calls until published; a call keeps the version it was created with', async () => {
  const agentId = await createPhoneAgent(t, tn, 'provider_a', { instruction: 'Version one.', auto_publish: false });
  assert.equal((await api('patch', `/api/v1/agents/${agentId}`, { instruction: 'Version two.' })).body.published_version, 1);

  const first = await call(agentId);
  assert.equal((await waitForCall(t, tn, first)).agent_version, 1);
  assert.equal(await storedInstruction(first), 'Version one.');

  assert.equal((await api('post', `/api/v1/agents/${agentId}/publish`, {})).status, 200);
  const second = await call(agentId);
  // Rolled back before the second call ends: it still runs the version it was created with.
  assert.equal((await api('post', `/api/v1/agents/${agentId}/publish`, { version: 1 })).body.published_version, 1);
  const done = await waitForCall(t, tn, second);
  assert.equal(done.status, 'completed');
  assert.equal(done.agent_version, 2);
  assert.equal(await storedInstruction(second), 'Version two.');

  const pinned = await t.service.agents.findForRuntime(tn.workspaceId, agentId, 2);
  assert.equal(pinned?.instruction, 'Version two.');
  assert.equal(pinned?.version, 2);
  const published = await t.service.agents.findForRuntime(tn.workspaceId, agentId);
  assert.equal(published?.instruction, 'Version one.');
});
