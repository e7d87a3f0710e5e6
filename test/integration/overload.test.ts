/**
 * An overloaded instance starts no new conversation (src/system/overload.ts): while its event loop is
 * delayed past OVERLOAD_LOOP_DELAY_MS for two windows running, `POST /calls` and `POST
 * /realtime/sessions` answer 503 `service_unavailable` with `Retry-After` and create nothing, and a
 * batch's rounds wait (the batch is accepted; its calls start once the instance is at ease). The
 * service runs in this process, so the test delays the event loop itself by holding it busy.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber } from '../helpers/calls.js';

let t: TestService;
let tn: Tenant;
let agentId: string;

before(async () => {
  t = await startTestService({ ...FAST_CALLS, OVERLOAD_LOOP_DELAY_MS: '100', OVERLOAD_SAMPLE_MS: '300', BATCH_CAPACITY_RETRY_MS: '200' });
  tn = await tenant(t);
  agentId = await createPhoneAgent(t, tn, 'provider_b');
});

after(async () => {
  await t?.close();
});

/** Holds the event loop busy 200 ms out of every 250 until stopped. */
function holdLoopBusy(): () => void {
  const timer = setInterval(() => {
    const until = Date.now() + 200;
    while (Date.now() < until);
  }, 50);
  return () => clearInterval(timer);
}

const callCount = async () => (await t.http.get('/api/v1/calls?limit=100').set(bearer(tn.apiKey))).body.data.length as number;

describe('an overloaded instance', () => {
  it('refuses new calls and sessions with a retryable 503 that creates nothing; batches wait; all goes on once at ease', async () => {
    const before = await callCount();
    const release = holdLoopBusy();
    let batchId: string;
    try {
      const refused = await waitFor(
        async () => {
          const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber() });
          return res.status === 503 ? res : null;
        },
        30_000,
        'a call refused for overload',
      );
      assert.equal(refused.body.error.code, 'service_unavailable');
      assert.equal(refused.body.error.type, 'api_error');
      assert.match(refused.body.error.message, /at capacity/);
      assert.equal(refused.headers['retry-after'], '2');
      assert.match(refused.body.error.request_id, /^req_/);
      const placedMeanwhile = (await callCount()) - before;

      const session = await t.http.post('/api/v1/realtime/sessions').set(bearer(tn.apiKey)).send({ agent_id: agentId, user_id: 'visitor-1', source: 'text' });
      assert.equal(session.status, 503, JSON.stringify(session.body));
      assert.equal(session.body.error.code, 'service_unavailable');

      const batch = await t.http
        .post('/api/v1/batches')
        .set(bearer(tn.apiKey))
        .send({ agent_id: agentId, name: 'While busy', recipients: [{ to_number: sandboxNumber() }, { to_number: sandboxNumber() }] });
      assert.equal(batch.status, 201, JSON.stringify(batch.body));
      batchId = batch.body.batch_id;
      await new Promise((r) => setTimeout(r, 1500));
      const waiting = await t.http.get(`/api/v1/batches/${batchId}`).set(bearer(tn.apiKey));
      assert.deepEqual(
        waiting.body.recipients.map((r: { call_ids: string[] }) => r.call_ids.length),
        [0, 0],
        'no batch call starts while the instance is overloaded',
      );
      assert.equal((await callCount()) - before, placedMeanwhile, 'the refused call created nothing');
    } finally {
      release();
    }
    const placed = await waitFor(
      async () => {
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber() });
        return res.status === 201 ? res : null;
      },
      30_000,
      'a call taken once at ease',
    );
    assert.match(placed.body.call_id, /^call_/);
    await waitFor(
      async () => {
        const b = await t.http.get(`/api/v1/batches/${batchId!}`).set(bearer(tn.apiKey));
        return b.body.recipients.every((r: { call_ids: string[] }) => r.call_ids.length === 1) ? b : null;
      },
      30_000,
      'the batch calls to start once at ease',
    );
  });
});
