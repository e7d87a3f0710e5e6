/** The spec's real 10-second delivery timeout (default WEBHOOK_TIMEOUT_MS), against a receiver that hangs. */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant } from '../helpers/fixtures.js';
import { bearer, callFacts, settledDeliveries, startReceiver, type Receiver } from '../helpers/webhooks.js';

let t: TestService;
let hanging: Receiver;
before(async () => {
  t = await startTestService();
  hanging = await startReceiver(() => undefined);
});
after(async () => {
  await hanging.close();
  await t.close();
});

describe('webhook delivery timeout', () => {
  it('gives a hanging receiver 10 seconds, then records a timeout and does not retry', async () => {
    const tn = await tenant(t);
    const hook = await t.http.post('/api/v1/webhooks').set(bearer(tn.apiKey)).send({ url: hanging.url });
    assert.equal(hook.status, 201);
    const raised = await t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: null, webhookUrl: null, payload: callFacts() });
    await hanging.waitFor(1, 3000);
    const [row] = await settledDeliveries(t.service.db.knex, raised.eventId, 15_000);
    assert.equal(row.status, 'failed');
    assert.equal(row.error, 'timeout');
    assert.equal(row.status_code, null);
    assert.ok(row.duration_ms >= 10_000 && row.duration_ms < 11_000, `duration ${row.duration_ms} ms`);
    assert.equal(hanging.requests.length, 1);
    const log = await t.http.get(`/api/v1/webhooks/${hook.body.webhook_id}/deliveries`).set(bearer(tn.apiKey));
    assert.equal(log.body.data[0].error, 'timeout');
    assert.equal(log.body.data[0].duration_ms, row.duration_ms);
  });
});
