/**
 * Webhook targets in production mode: internal addresses are refused at registration and again at
 * delivery, on the address resolved when the request connects, unless OUTBOUND_ALLOW_LIST names them.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant } from '../helpers/fixtures.js';
import { bearer, callFacts, settledDeliveries, startReceiver, type Receiver } from '../helpers/webhooks.js';
import { guardedLookup } from '../../src/net/outbound-guard.js';

let t: TestService;
let r: Receiver;
before(async () => {
  t = await startTestService({
    NODE_ENV: 'production',
    VOICE_SERVICE_URL: 'ws://127.0.0.1:9',
    PROVIDER_A_API_URL: 'http://127.0.0.1:9',
    PROVIDER_B_API_URL: 'http://127.0.0.1:9/v2',
    SECRETS_KEY: randomBytes(32).toString('base64'),
    PUBLIC_BASE_URL: 'https://voice.example.com',
    OUTBOUND_ALLOW_LIST: 'localhost',
    WEBHOOK_POLL_INTERVAL_MS: '100',
    WEBHOOK_TIMEOUT_MS: '2000',
  });
  r = await startReceiver();
});
after(async () => {
  await r.close();
  await t.close();
});

describe('webhook targets in production', () => {
  it('refuses loopback, private, link-local, metadata and mapped addresses at registration, and stores nothing', async () => {
    const tn = await tenant(t);
    for (const url of [
      `http://127.0.0.1:${r.port}/hooks`,
      'http://[::1]/hooks',
      'http://10.0.0.5/hooks',
      'http://192.168.1.10:8080/hooks',
      'http://172.16.3.4/hooks',
      'http://169.254.169.254/latest/meta-data/',
      'http://100.64.0.1/hooks',
      'http://[fd00::1]/hooks',
      'http://[::ffff:127.0.0.1]/hooks',
    ]) {
      const res = await t.http.post('/api/v1/webhooks').set(bearer(tn.apiKey)).send({ url });
      assert.equal(res.status, 422, `${url}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'url_not_allowed');
      assert.equal(res.body.error.param, 'url');
    }
    assert.deepEqual(await t.service.db.knex('webhooks').where({ workspace_id: tn.workspaceId }), []);
  });

  it('refuses every address that is not public unicast: IPv4-compatible IPv6, site-local, discard, segment routing, NAT64, documentation', async () => {
    const tn = await tenant(t);
    for (const url of [
      'http://[::7f00:1]/hooks',
      'http://[::a9fe:a9fe]/latest/meta-data/',
      'http://[::a00:5]/hooks',
      'http://[fec0::1]/hooks',
      'http://[5f00::1]/hooks',
      'http://[100::1]/hooks',
      'http://[64:ff9b::a9fe:a9fe]/hooks',
      'http://[2001:db8::1]/hooks',
      'http://[2002:7f00:1::1]/hooks',
      'http://0.1.2.3/hooks',
      'http://192.0.0.8/hooks',
      'http://198.18.0.1/hooks',
      'http://240.0.0.1/hooks',
    ]) {
      const res = await t.http.post('/api/v1/webhooks').set(bearer(tn.apiKey)).send({ url });
      assert.equal(res.status, 422, `${url}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'url_not_allowed', url);
    }
    assert.deepEqual(await t.service.db.knex('webhooks').where({ workspace_id: tn.workspaceId }), []);
  });

  it('accepts a host named in OUTBOUND_ALLOW_LIST and delivers to it', async () => {
    const tn = await tenant(t);
    const url = `http://localhost:${r.port}/allowed`;
    assert.equal((await t.http.post('/api/v1/webhooks').set(bearer(tn.apiKey)).send({ url })).status, 201);
    const raised = await t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: null, webhookUrl: null, payload: callFacts() });
    const [row] = await settledDeliveries(t.service.db.knex, raised.eventId);
    assert.equal(row.status, 'succeeded', JSON.stringify(row));
    assert.ok(r.requests.some((x) => x.path === '/allowed'));
  });

  it("refuses at delivery a call's own webhook_url on an internal address, without sending anything", async () => {
    const tn = await tenant(t);
    const before = r.requests.length;
    const facts = callFacts();
    const raised = await t.service.events.callCompleted({
      workspaceId: tn.workspaceId,
      callId: facts.conversation_id,
      webhookUrl: `http://127.0.0.1:${r.port}/own`,
      payload: facts,
    });
    const [row] = await settledDeliveries(t.service.db.knex, raised.eventId);
    assert.equal(row.status, 'failed');
    assert.equal(row.error, 'blocked_address');
    assert.equal(row.status_code, null);
    assert.equal(r.requests.length, before, 'no request reached the internal address');
  });

  it('checks the address again at delivery: a name approved at registration that now leads to a blocked address is refused', async () => {
    // We cannot make the machine's resolver answer differently over time without changing it for
    // everyone, so the "rebinding" is played by the policy instead: the name passes at registration
    // (allow-listed), then the address it resolves to at delivery (127.0.0.1) is no longer allowed.
    // What matters is that delivery judges the address it resolves and connects to, not the verdict
    // given at registration.
    const tn = await tenant(t);
    const url = `http://localhost:${r.port}/rebound`;
    const hook = await t.http.post('/api/v1/webhooks').set(bearer(tn.apiKey)).send({ url });
    assert.equal(hook.status, 201);
    const saved = t.service.outbound.allowList.splice(0);
    try {
      const raised = await t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: null, webhookUrl: null, payload: callFacts() });
      const [row] = await settledDeliveries(t.service.db.knex, raised.eventId);
      assert.equal(row.status, 'failed');
      assert.equal(row.error, 'blocked_address');
      assert.ok(!r.requests.some((x) => x.path === '/rebound'));
      const log = await t.http.get(`/api/v1/webhooks/${hook.body.webhook_id}/deliveries`).set(bearer(tn.apiKey));
      assert.equal(log.body.data[0].error, 'blocked_address');
    } finally {
      t.service.outbound.allowList.push(...saved);
    }
  });

  it('refuses at connect time the address a name resolves to (the lookup every delivery uses)', async () => {
    const before = r.requests.length;
    const err = await new Promise<NodeJS.ErrnoException>((resolve) => {
      const req = http.request(`http://localhost:${r.port}/connect`, { method: 'POST', lookup: guardedLookup({ production: true, allowList: [] }) });
      req.on('error', resolve);
      req.on('response', () => resolve(new Error('connected') as NodeJS.ErrnoException));
      req.end('{}');
    });
    assert.equal(err.code, 'EBLOCKED');
    assert.equal(r.requests.length, before);
  });
});
