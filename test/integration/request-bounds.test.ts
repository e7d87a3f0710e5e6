/**
 * Every array and string a request may hold is bounded in the contract (issue 32), so an oversized
 * one is refused in the envelope before its items are looked at, and nothing is stored.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';

let t: TestService;
let tn: Tenant;

before(async () => {
  t = await startTestService();
  tn = await tenant(t);
});

after(() => t.close());

const webhookCount = async () => (await t.http.get('/api/v1/webhooks').set('Authorization', `Bearer ${tn.apiKey}`)).body.data.length;

function createWebhook(events: unknown[]) {
  return t.http
    .post('/api/v1/webhooks')
    .set('Authorization', `Bearer ${tn.apiKey}`)
    .set('Content-Type', 'application/json')
    .send(JSON.stringify({ url: 'https://example.com/hooks/voice', events }));
}

describe('request bounds', () => {
  it('refuses a 0.9 MB webhook events array with 422 naming events, and stores nothing', async () => {
    const before = await webhookCount();
    const events = Array.from({ length: 60_000 }, () => 'call.completed');
    const res = await createWebhook(events);
    assert.ok(JSON.stringify(events).length > 900_000);
    assert.equal(res.status, 422, JSON.stringify(res.body).slice(0, 500));
    assert.equal(res.body.error.param, 'events');
    assert.match(res.body.error.message, /16/);
    assert.match(res.body.error.request_id, /^req_/);
    assert.equal(await webhookCount(), before);
  });

  it('refuses 80,000 integers in an array with 4xx in the envelope, never 500', async () => {
    const before = await webhookCount();
    const res = await createWebhook(Array.from({ length: 80_000 }, (_v, i) => i));
    assert.ok(res.status >= 400 && res.status < 500, `${res.status}: ${JSON.stringify(res.body).slice(0, 500)}`);
    assert.equal(typeof res.body.error.code, 'string');
    assert.match(res.body.error.request_id, /^req_/);
    assert.equal(await webhookCount(), before);
  });
});
