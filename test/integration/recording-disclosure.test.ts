/**
 * The agent's recording disclosure (issue 36): spoken first, before the first message, on a phone call
 * that is recorded, and never on one that is not; as the agent shows it, and reset with null.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';

const DISCLOSURE = 'This call is recorded for quality and training.';
const FIRST = 'Hello! This is Acme Dental.';

let t: TestService;
let tn: Tenant;
let agentId: string;

before(async () => {
  t = await startTestService(FAST_CALLS);
  tn = await tenant(t);
  agentId = await createPhoneAgent(t, tn, 'provider_a', { first_message: FIRST, recording: { enabled: true }, recording_disclosure: DISCLOSURE });
});
after(() => t.close());

/** What the agent said first on a call placed with `body`. */
async function firstWords(body: Record<string, unknown> = {}): Promise<{ said: string; call: Record<string, any> }> {
  const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber(), ...body });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const call = await waitForCall(t, tn, res.body.call_id);
  assert.equal(call.status, 'completed', JSON.stringify(call));
  const first = call.transcript.find((e: { role: string }) => e.role === 'model');
  return { said: first.text.trim(), call };
}

describe('recording disclosure', () => {
  it('a recorded call begins with the disclosure, then the first message', async () => {
    const { said, call } = await firstWords();
    assert.equal(said, `${DISCLOSURE} ${FIRST}`);
    assert.ok(call.recording, 'the call was recorded');
    assert.equal(call.first_message, FIRST, "the call's first message is its own");
    assert.equal(call.first_message_delivered, true);
  });

  it('a call that is not recorded never hears it', async () => {
    const { said, call } = await firstWords({ recording: { enabled: false } });
    assert.equal(said, FIRST);
    assert.equal(call.recording, null);
  });

  it('the agent shows it; null removes it; an empty or over-long one is 422 and changes nothing', async () => {
    const shown = await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey));
    assert.equal(shown.body.recording_disclosure, DISCLOSURE);
    for (const bad of ['', 'x'.repeat(501)]) {
      const res = await t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send({ recording_disclosure: bad });
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.equal(res.body.error.param, 'recording_disclosure');
    }
    assert.equal((await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey))).body.recording_disclosure, DISCLOSURE);
    const cleared = await t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send({ recording_disclosure: null });
    assert.equal(cleared.body.recording_disclosure, null);
    const { said } = await firstWords();
    assert.equal(said, FIRST);
  });
});
