/**
 * A web session whose agent's live model the voice service refuses at setup (the sandbox refuses
 * `sandbox-refused-model` as the Live API refuses a model it does not serve) ends with a clear reason,
 * as a phone call does with `model_refused`: the socket closes with 4022 `Model refused` before
 * `session_started`, the session is recorded `failed` with `end_reason` `model_refused` (nothing
 * said, nothing billed), its call.completed is sent, and its slot goes back.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { startReceiver, subscribeCallCompleted, type Receiver } from '../helpers/webhooks.js';
import { bearer, connect, createAgent, mintSession, operator, setWorkspace, waitFor } from '../helpers/realtime.js';
import { REFUSED_MODEL } from '../../src/sandbox/voice/connection.js';

let t: TestService;
let tn: Tenant;
let receiver: Receiver;

before(async () => {
  [t, receiver] = await Promise.all([
    startTestService({ VOICE_MODELS: `gemini-live-2.5-flash-preview,${REFUSED_MODEL}`, VOICE_SANDBOX_SPEED: '4' }),
    startReceiver(),
  ]);
  tn = await tenant(t);
  await subscribeCallCompleted(t, tn.apiKey, receiver.url);
});

after(async () => {
  await t.close();
  await receiver.close();
});

const credit = async () => (await t.http.get(`/admin/v1/workspaces/${tn.workspaceId}`).set(operator)).body.credit_balance_cents as number;

describe('a web session whose model the voice service refuses (issue 34)', () => {
  for (const source of ['voice', 'text']) {
    it(`${source}: closes with 4022 Model refused before session_started; recorded failed, model_refused; call.completed sent; nothing billed`, async () => {
      const agentId = await createAgent(t, tn, { model: REFUSED_MODEL, first_message: 'Hello {{who|there}}!' });
      const creditBefore = await credit();
      const setupsBefore = t.service.sandbox.voice!.setups.length;
      const c = connect((await mintSession(t, tn, agentId, source)).ws_url);
      assert.deepEqual(await c.closed, { code: 4022, reason: 'Model refused' });
      assert.deepEqual(c.messages, [], 'no message precedes the close');
      assert.equal(t.service.sandbox.voice!.setups.length, setupsBefore, 'refused, never set up');

      // The record exists once the socket has closed.
      const list = await t.http.get(`/api/v1/realtime/conversations?agent_id=${agentId}`).set(bearer(tn.apiKey));
      assert.equal(list.status, 200, JSON.stringify(list.body));
      assert.equal(list.body.data.length, 1, JSON.stringify(list.body));
      const record = list.body.data[0];
      assert.deepEqual(
        [record.status, record.end_reason, record.source, record.duration, record.transcript, record.first_message, record.first_message_delivered],
        ['failed', 'model_refused', source, 0, [], 'Hello there!', false],
      );
      const read = await t.http.get(`/api/v1/realtime/conversations/${record.conversation_id}`).set(bearer(tn.apiKey));
      assert.deepEqual(read.body, record);

      const event = await waitFor(
        async () => receiver.requests.map((r) => JSON.parse(r.rawBody.toString())).find((e) => e.conversation_id === record.conversation_id),
        8000,
        'call.completed',
      );
      assert.deepEqual([event.event, event.provider, event.status, event.duration], ['call.completed', 'web', 'failed', 0]);
      assert.equal(await credit(), creditBefore, 'nothing billed');
    });
  }

  it("gives its slot back: with a limit of one session, the next session (another agent's model) starts", async () => {
    const own = await tenant(t);
    await setWorkspace(t, own.workspaceId, { concurrent_session_limit: 1 });
    const refused = await createAgent(t, own, { model: REFUSED_MODEL });
    const fine = await createAgent(t, own);
    for (let i = 0; i < 2; i++) {
      const c = connect((await mintSession(t, own, refused, 'text')).ws_url);
      assert.equal((await c.closed).code, 4022);
    }
    const ok = connect((await mintSession(t, own, fine, 'text')).ws_url);
    await ok.next('session_started');
    await ok.close();
  });
});
