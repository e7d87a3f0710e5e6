/**
 * Webhook delivery end to end: events raised through the EventPublisher (the function the calls,
 * batches and realtime code use) reach real receivers on 127.0.0.1, signed, once per target, and every
 * attempt is recorded. The example receiver (examples/webhook-receiver.mjs) and the `standardwebhooks`
 * library verify the signatures independently of the service's code.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { createWebhookReceiver, type ReceivedEvent } from '../../examples/webhook-receiver.mjs';
import { SHARED_MACHINE_ENV, startTestService, type TestService } from '../helpers/service.js';
import { SecretBox } from '../../src/crypto/secrets.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { batchFacts, bearer, callFacts, settledDeliveries, startReceiver, type Receiver } from '../helpers/webhooks.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startService, type RunningService } from '../../src/service.js';
import { generatedDir, makeAjv } from '../../src/contract/documents.js';
import { InvalidEventPayloadError } from '../../src/webhooks/payloads.js';
import { newId } from '../../src/lib/ids.js';

const SECRETS_KEY = randomBytes(32).toString('base64');
const TIMEOUT_MS = 400;

let t: TestService;
const cleanup: Array<() => Promise<void>> = [];
before(async () => {
  t = await startTestService({ SECRETS_KEY, WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS), WEBHOOK_POLL_INTERVAL_MS: '100', WEBHOOK_CONCURRENCY: '4' });
});
after(async () => {
  for (const c of cleanup.reverse()) await c();
  await t.close();
});

async function receiver(respond?: Parameters<typeof startReceiver>[0]): Promise<Receiver> {
  const r = await startReceiver(respond);
  cleanup.push(() => r.close());
  return r;
}

async function exampleReceiver(secrets: string[]) {
  const events: ReceivedEvent[] = [];
  const rejected: string[] = [];
  const server = createWebhookReceiver({ secrets, onEvent: (e) => events.push(e), onRejected: (r) => rejected.push(r.reason) });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(() => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`, events, rejected };
}

async function registerWebhook(tn: Tenant, url: string, events?: string[]) {
  const res = await t.http
    .post('/api/v1/webhooks')
    .set(bearer(tn.apiKey))
    .send(events ? { url, events } : { url });
  assert.ok(res.status === 201 || res.status === 200, JSON.stringify(res.body));
  return res.body as { webhook_id: string };
}

const secretOf = async (tn: Tenant) => (await t.http.get('/api/v1/webhooks/secret').set(bearer(tn.apiKey))).body.webhook_secret as string;

/** Another instance of the service on a database (a restart, or another replica). */
async function startOn(databaseUrl: string, env: Record<string, string> = {}): Promise<RunningService> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-sibling-'));
  const config = loadConfig({
    NODE_ENV: 'test',
    DATABASE_URL: databaseUrl,
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    CONTRACT_CHECK: 'enforce',
    SECRETS_KEY,
    WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
    WEBHOOK_POLL_INTERVAL_MS: '100',
    SHUTDOWN_GRACE_MS: '500',
    ...SHARED_MACHINE_ENV,
    ...env,
  });
  const s = await startService(config, createLogger('silent'));
  cleanup.push(async () => {
    await s.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  return s;
}

const asyncapi = JSON.parse(fs.readFileSync(path.join(generatedDir, 'asyncapi.json'), 'utf8'));
const ajv = makeAjv();
ajv.addSchema(asyncapi, 'asyncapi.json');
const validCallEvent = ajv.compile({ $ref: 'asyncapi.json#/components/messages/callCompleted/payload' });
const validBatchEvent = ajv.compile({ $ref: 'asyncapi.json#/components/messages/batchCompleted/payload' });
const validHeaders = ajv.compile({ $ref: 'asyncapi.json#/components/messages/callCompleted/headers' });

describe('webhook delivery', () => {
  it('signs every delivery so the example receiver and the standardwebhooks library both verify it', async () => {
    const tn = await tenant(t);
    const secret = await secretOf(tn);
    const example = await exampleReceiver([secret]);
    const raw = await receiver();
    const hookA = await registerWebhook(tn, example.url);
    await registerWebhook(tn, raw.url);

    const facts = callFacts();
    const raised = await t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: facts.conversation_id, webhookUrl: null, payload: facts });
    assert.equal(raised.targets, 2);
    const rows = await settledDeliveries(t.service.db.knex, raised.eventId);
    assert.deepEqual(
      rows.map((r) => r.status),
      ['succeeded', 'succeeded'],
    );

    // The example receiver accepted it with both schemes.
    assert.equal(example.events.length, 1);
    assert.deepEqual(example.events[0].verified, { spec: true, standard: true });
    assert.equal(example.events[0].id, raised.eventId);
    assert.deepEqual(example.rejected, []);

    // Independent checks on the raw request.
    const [req] = await raw.waitFor(1);
    const body = req.rawBody.toString('utf8');
    assert.equal(req.method, 'POST');
    assert.equal(req.headers['content-type'], 'application/json');
    assert.equal(req.headers['x-webhook-signature'], createHmac('sha256', secret).update(req.rawBody).digest('hex'));
    assert.equal(req.headers['webhook-id'], raised.eventId, 'every target gets the same event id');
    assert.ok(Math.abs(Number(req.headers['webhook-timestamp']) - Date.now() / 1000) < 60);
    const verified = new Webhook(secret).verify(body, req.headers as Record<string, string>);
    assert.deepEqual(verified, JSON.parse(body));
    assert.ok(
      validHeaders(
        Object.fromEntries(
          Object.entries(req.headers).map(([k, v]) => [
            k === 'content-type' ? 'Content-Type' : k === 'user-agent' ? 'User-Agent' : k === 'x-webhook-signature' ? 'X-Webhook-Signature' : k,
            v,
          ]),
        ),
      ),
      JSON.stringify(validHeaders.errors),
    );
    assert.throws(() => new Webhook(secret).verify(body.replace('completed', 'c0mpleted'), req.headers as Record<string, string>), /No matching signature/);

    // The delivery log, through the API (the contract check validates the records).
    const log = await t.http.get(`/api/v1/webhooks/${hookA.webhook_id}/deliveries`).set(bearer(tn.apiKey));
    assert.equal(log.status, 200);
    assert.equal(log.body.data.length, 1);
    const d = log.body.data[0];
    assert.equal(d.webhook_id, hookA.webhook_id);
    assert.equal(d.event, 'call.completed');
    assert.equal(d.event_id, raised.eventId);
    assert.equal(d.target_url, example.url);
    assert.equal(d.call_id, facts.conversation_id);
    assert.equal(d.status, 'succeeded');
    assert.equal(d.status_code, 200);
    assert.equal(d.error, null);
    assert.equal(d.signed, true);
    assert.ok(Number.isInteger(d.duration_ms) && d.duration_ms >= 0);
  });

  it('runs the example receiver as its README says (node examples/webhook-receiver.mjs) and it accepts a real delivery', async () => {
    const tn = await tenant(t);
    const secret = await secretOf(tn);
    const child = spawn(process.execPath, [path.join(import.meta.dirname, '../../examples/webhook-receiver.mjs')], {
      env: { ...process.env, WEBHOOK_SECRET: secret, PORT: '0', HOST: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanup.push(async () => {
      child.kill();
    });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    const deadline = Date.now() + 5000;
    while (!/listening on (http:\/\/\S+)/.test(out)) {
      assert.ok(Date.now() < deadline, `receiver did not start: ${out}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const url = `${/listening on (http:\/\/\S+)/.exec(out)![1]}/hook`;
    await registerWebhook(tn, url);
    const facts = callFacts();
    const raised = await t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: facts.conversation_id, webhookUrl: null, payload: facts });
    const [row] = await settledDeliveries(t.service.db.knex, raised.eventId);
    assert.equal(row.status, 'succeeded');
    while (!out.includes(raised.eventId)) {
      assert.ok(Date.now() < deadline + 5000, out);
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.match(out, new RegExp(`${raised.eventId} call.completed ${facts.conversation_id}`));
  });

  it('example receiver refuses a missing or wrong signature', async () => {
    const tn = await tenant(t);
    const example = await exampleReceiver([await secretOf(tn)]);
    const missing = await fetch(example.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"event":"call.completed"}' });
    assert.equal(missing.status, 401);
    const now = String(Math.floor(Date.now() / 1000));
    const wrong = await fetch(example.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-webhook-signature': createHmac('sha256', 'whsec_other').update('{}').digest('hex'),
        'webhook-id': 'evt_01JD5ZD7E8F9G0H1J2K3M4N5P6',
        'webhook-timestamp': now,
        'webhook-signature': 'v1,AAAA',
      },
      body: '{}',
    });
    assert.equal(wrong.status, 401);
    // A replay that strips the Standard Webhooks headers (which carry the timestamp and event id) is refused
    // even though its X-Webhook-Signature is genuine.
    const body = '{"event":"call.completed"}';
    const stripped = await fetch(example.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-webhook-signature': createHmac('sha256', await secretOf(tn))
          .update(body)
          .digest('hex'),
      },
      body,
    });
    assert.equal(stripped.status, 401);
    assert.deepEqual(example.rejected, ['missing_signature', 'bad_signature', 'missing_signature']);
    assert.equal(example.events.length, 0);
  });

  it('sends a URL both registered and given as webhook_url exactly one request', async () => {
    const tn = await tenant(t);
    const r = await receiver();
    const hook = await registerWebhook(tn, r.url);
    const facts = callFacts();
    // Same target written differently (host case, explicit default port does not apply to :port, so case only).
    const raised = await t.service.events.callCompleted({
      workspaceId: tn.workspaceId,
      callId: facts.conversation_id,
      webhookUrl: r.url.replace('http://', 'HTTP://'),
      payload: facts,
    });
    assert.equal(raised.targets, 1);
    const rows = await settledDeliveries(t.service.db.knex, raised.eventId);
    assert.equal(rows.length, 1);
    assert.equal(rows[0].webhook_id, hook.webhook_id, 'attributed to the registered webhook');
    assert.equal(r.requests.length, 1);

    // The per-call URL alone (not registered, another receiver) gets its own event; the registered one too.
    const own = await receiver();
    const second = await t.service.events.callCompleted({
      workspaceId: tn.workspaceId,
      callId: facts.conversation_id,
      webhookUrl: own.url,
      payload: callFacts(),
    });
    assert.equal(second.targets, 2);
    const rows2 = await settledDeliveries(t.service.db.knex, second.eventId);
    assert.deepEqual(rows2.map((x) => x.webhook_id).sort(), [hook.webhook_id, null].sort());
    assert.equal(own.requests.length, 1);
    assert.equal(r.requests.length, 2);
    assert.equal(own.requests[0].headers['webhook-id'], r.requests[1].headers['webhook-id']);
  });

  it('delivers each event kind only to webhooks subscribed to it, and never to another workspace', async () => {
    const tn = await tenant(t);
    const other = await tenant(t);
    const calls = await receiver();
    const batches = await receiver();
    const foreign = await receiver();
    await registerWebhook(tn, calls.url, ['call.completed']);
    await registerWebhook(tn, batches.url, ['batch.completed']);
    await registerWebhook(other, foreign.url);

    const facts = batchFacts();
    const bat = await t.service.events.batchCompleted({ workspaceId: tn.workspaceId, batchId: facts.batch_id, webhookUrl: null, payload: facts });
    const call = await t.service.events.callCompleted({
      workspaceId: tn.workspaceId,
      callId: null,
      webhookUrl: null,
      payload: callFacts({ conversation_id: 'conv_01JD5ZB3M4N5P6Q7R8S9T0V1W2', call_sid: null, to_number: null, provider: 'web' }),
    });
    await settledDeliveries(t.service.db.knex, bat.eventId);
    await settledDeliveries(t.service.db.knex, call.eventId);
    assert.equal(batches.requests.length, 1);
    assert.equal(JSON.parse(batches.requests[0].rawBody.toString()).event, 'batch.completed');
    assert.equal(calls.requests.length, 1);
    assert.equal(JSON.parse(calls.requests[0].rawBody.toString()).provider, 'web');
    assert.equal(foreign.requests.length, 0);

    const [batchRow] = await t.service.db.knex('webhook_deliveries').where({ event_id: bat.eventId });
    assert.equal(batchRow.batch_id, facts.batch_id);
    assert.equal(batchRow.call_id, null);
  });

  it('sends payloads that match the contract: tool_calls only when tools were called', async () => {
    const tn = await tenant(t);
    const r = await receiver();
    await registerWebhook(tn, r.url);
    const withTools = callFacts({
      tool_calls: [
        {
          name: 'lookup_appointment',
          source: 'http',
          arguments: { date: '2026-11-22' },
          result: { found: true },
          ok: true,
          error: null,
          duration_ms: 412,
          started_at: 1795305113.51,
        },
      ],
    });
    const withoutTools = callFacts({ tool_calls: [] });
    const batch = batchFacts({ status: 'canceled' });
    for (const raised of [
      await t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: withTools.conversation_id, webhookUrl: null, payload: withTools }),
      await t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: withoutTools.conversation_id, webhookUrl: null, payload: withoutTools }),
      await t.service.events.batchCompleted({ workspaceId: tn.workspaceId, batchId: batch.batch_id, webhookUrl: null, payload: batch }),
    ]) {
      await settledDeliveries(t.service.db.knex, raised.eventId);
    }
    // Deliveries run concurrently: find each body by its ids, not by arrival order.
    const bodies: Array<Record<string, any>> = r.requests.map((x) => JSON.parse(x.rawBody.toString()));
    const a = bodies.find((x) => x.conversation_id === withTools.conversation_id)!;
    const b = bodies.find((x) => x.conversation_id === withoutTools.conversation_id)!;
    const c = bodies.find((x) => x.batch_id === batch.batch_id)!;
    assert.ok(validCallEvent(a), JSON.stringify(validCallEvent.errors));
    assert.ok(validCallEvent(b), JSON.stringify(validCallEvent.errors));
    assert.ok(validBatchEvent(c), JSON.stringify(validBatchEvent.errors));
    assert.equal(a.tool_calls.length, 1);
    assert.equal(a.tool_calls[0].name, 'lookup_appointment');
    assert.ok(!('tool_calls' in b), 'absent when no tool was called');
    assert.equal(a.message_count, a.transcript.length);
    assert.equal(a.created_at, '2026-11-21T23:51:18.000Z');
    assert.equal(a.conversation_id, withTools.conversation_id);
    assert.ok(!('call_id' in a), 'exactly the fields of the spec');
    // The spec's fields in its order, with the batch's agent version (issue 35) after its agent.
    assert.deepEqual(Object.keys(c), [
      'event',
      'batch_id',
      'agent_id',
      'agent_version',
      'name',
      'status',
      'total',
      'completed_count',
      'failed_count',
      'voicemail_count',
      'created_at',
      'completed_at',
    ]);
    assert.equal(c.status, 'canceled');
  });

  it('refuses a payload that does not match the contract and records nothing', async () => {
    const tn = await tenant(t);
    await registerWebhook(tn, 'http://127.0.0.1:9/never');
    const count = async () => Number((await t.service.db.knex('webhook_events').where({ workspace_id: tn.workspaceId }).count('* as n'))[0].n);
    const bad = [
      callFacts({ status: 'exploded' as never }),
      callFacts({ transcript: [{ role: 'agent' as never, text: 'hi', timestamp: 1 }] }),
      callFacts({ agent_id: 'not-an-agent' }),
    ];
    for (const payload of bad) {
      await assert.rejects(t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: null, webhookUrl: null, payload }), InvalidEventPayloadError);
    }
    await assert.rejects(
      t.service.events.batchCompleted({ workspaceId: tn.workspaceId, batchId: 'bat_x', webhookUrl: null, payload: batchFacts({ total: -1 }) }),
      InvalidEventPayloadError,
    );
    assert.equal(await count(), 0);
    assert.equal((await t.service.db.knex('webhook_deliveries').where({ workspace_id: tn.workspaceId })).length, 0);
  });

  it('publishes any kind of the contract by one typed call: validated against its message, an opt-in kind never to an own webhook_url', async () => {
    const tn = await tenant(t);
    const listed = await receiver();
    const own = await receiver();
    await registerWebhook(tn, listed.url, ['call.status_changed']);
    const callId = newId('call');
    const payload = {
      event: 'call.status_changed' as const,
      call_id: callId,
      agent_id: newId('agent'),
      batch_id: null,
      status: 'ringing' as const,
      call_status: 'ringing' as const,
      end_reason: null,
      reason: null,
      timestamp: new Date().toISOString(),
    };
    const target = { workspaceId: tn.workspaceId, callId, batchId: null, webhookUrl: own.url };
    const raised = await t.service.events.publish('call.status_changed', target, payload);
    assert.equal(raised.targets, 1, 'the listing webhook only');
    const [delivery] = await settledDeliveries(t.service.db.knex, raised.eventId);
    assert.equal(delivery.target_url, listed.url);
    assert.deepEqual(JSON.parse(listed.requests[0].rawBody.toString()), payload);
    assert.equal(own.requests.length, 0);
    const before = await t.service.db.knex('webhook_events').where({ workspace_id: tn.workspaceId }).count('* as n');
    await assert.rejects(t.service.events.publish('call.status_changed', target, { ...payload, status: 'exploded' as never }), InvalidEventPayloadError);
    assert.deepEqual(await t.service.db.knex('webhook_events').where({ workspace_id: tn.workspaceId }).count('* as n'), before);
  });

  it('stores a kind the database has never heard of (kinds come from the contract, not a migration), and nothing shaped otherwise', async () => {
    const tn = await tenant(t);
    const row = (kind: string) => ({ id: newId('event'), workspace_id: tn.workspaceId, kind, body: '{}' });
    await t.service.db.knex('webhook_events').insert(row('agent.version_published'));
    await assert.rejects(t.service.db.knex('webhook_events').insert(row('Call Completed; drop table x')), /webhook_events_kind_check/);
    await assert.rejects(t.service.db.knex('webhook_events').insert(row(`call.${'x'.repeat(80)}`)), /webhook_events_kind_check/);
  });

  it('gives up after the timeout on a receiver that hangs, without blocking the code that raised the event', async () => {
    const tn = await tenant(t);
    const hanging = await receiver(() => undefined);
    await registerWebhook(tn, hanging.url);
    const facts = callFacts();
    const raised = await t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: facts.conversation_id, webhookUrl: null, payload: facts });
    // Raised while the receiver still hangs: its delivery has not given up yet.
    const pending = await t.service.db.knex('webhook_deliveries').where({ event_id: raised.eventId });
    assert.ok(
      pending.every((r) => r.state !== 'done'),
      `raising an event does not wait for its delivery: ${JSON.stringify(pending.map((r) => r.state))}`,
    );
    const [row] = await settledDeliveries(t.service.db.knex, raised.eventId);
    assert.equal(row.status, 'failed');
    assert.equal(row.error, 'timeout');
    assert.equal(row.status_code, null);
    assert.ok(row.duration_ms >= TIMEOUT_MS - 5, `gave up after ${row.duration_ms} ms, before the timeout`);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(hanging.requests.length, 1, 'not retried');
  });

  it('does not follow 301/302 redirects and records them as failed', async () => {
    const tn = await tenant(t);
    const target = await receiver();
    for (const status of [301, 302, 307]) {
      const redirecting = await receiver((_r, res) => res.writeHead(status, { Location: target.url }).end());
      await registerWebhook(tn, redirecting.url);
    }
    const raised = await t.service.events.batchCompleted({
      workspaceId: tn.workspaceId,
      batchId: batchFacts().batch_id,
      webhookUrl: null,
      payload: batchFacts(),
    });
    const rows = await settledDeliveries(t.service.db.knex, raised.eventId);
    assert.deepEqual(
      rows.map((r) => [r.status, r.status_code, r.error]),
      [
        ['failed', 301, 'redirect_not_followed'],
        ['failed', 302, 'redirect_not_followed'],
        ['failed', 307, 'redirect_not_followed'],
      ],
    );
    assert.equal(target.requests.length, 0, 'the Location was never requested');
  });

  it('records a 500 and a refused connection as failed and never retries', async () => {
    const tn = await tenant(t);
    const failing = await receiver((_r, res) => res.writeHead(500).end('boom'));
    const closed = await receiver();
    await closed.close();
    const hook = await registerWebhook(tn, failing.url);
    await registerWebhook(tn, closed.url);
    const raised = await t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: null, webhookUrl: null, payload: callFacts() });
    const rows = await settledDeliveries(t.service.db.knex, raised.eventId);
    const byUrl = Object.fromEntries(rows.map((r) => [r.target_url, r]));
    assert.equal(byUrl[failing.url].status_code, 500);
    assert.equal(byUrl[failing.url].error, 'http_error');
    assert.equal(byUrl[closed.url].error, 'connection_refused');
    assert.equal(byUrl[closed.url].status_code, null);
    // Several poll intervals later, still one request.
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(failing.requests.length, 1);
    assert.equal((await t.service.db.knex('webhook_deliveries').where({ event_id: raised.eventId })).length, 2);
    const log = await t.http.get(`/api/v1/webhooks/${hook.webhook_id}/deliveries`).set(bearer(tn.apiKey));
    assert.equal(log.body.data[0].status, 'failed');
    assert.equal(log.body.data[0].error, 'http_error');
  });

  it('bounds the deliveries in flight by WEBHOOK_CONCURRENCY', async () => {
    const tn = await tenant(t);
    let open = 0;
    let peak = 0;
    const slow = await receiver((_r, res) => {
      open++;
      peak = Math.max(peak, open);
      setTimeout(() => {
        open--;
        res.writeHead(204).end();
      }, 100);
    });
    await registerWebhook(tn, slow.url);
    const raised = await Promise.all(
      Array.from({ length: 12 }, () => t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: null, webhookUrl: null, payload: callFacts() })),
    );
    for (const e of raised) await settledDeliveries(t.service.db.knex, e.eventId);
    assert.equal(slow.requests.length, 12);
    assert.ok(peak <= 4 && peak >= 2, `peak ${peak}`);
    assert.equal(new Set(slow.requests.map((r) => r.headers['webhook-id'])).size, 12);
  });

  it('signs with both secrets during a rotation overlap, and with the new one only after it', async () => {
    const tn = await tenant(t);
    const oldSecret = await secretOf(tn);
    const oldOnly = await exampleReceiver([oldSecret]);
    const raw = await receiver();
    await registerWebhook(tn, oldOnly.url);
    await registerWebhook(tn, raw.url);
    const newSecret = (await t.http.post('/api/v1/webhooks/secret/rotate').set(bearer(tn.apiKey))).body.webhook_secret;

    const during = await t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: null, webhookUrl: null, payload: callFacts() });
    await settledDeliveries(t.service.db.knex, during.eventId);
    const [req] = raw.requests;
    const body = req.rawBody.toString();
    assert.equal((req.headers['webhook-signature'] as string).split(' ').length, 2);
    assert.ok(new Webhook(newSecret).verify(body, req.headers as Record<string, string>));
    assert.ok(new Webhook(oldSecret).verify(body, req.headers as Record<string, string>));
    assert.equal(
      req.headers['x-webhook-signature'],
      createHmac('sha256', newSecret).update(req.rawBody).digest('hex'),
      'X-Webhook-Signature uses the new secret',
    );
    assert.equal(oldOnly.events.length, 1, 'a receiver still on the old secret keeps accepting during the overlap');
    assert.deepEqual(oldOnly.events[0].verified, { spec: false, standard: true });

    // The overlap ends (24 h later): only the new secret signs.
    await t.service.db
      .knex('webhook_secrets')
      .where({ workspace_id: tn.workspaceId })
      .update({ previous_expires_at: new Date(Date.now() - 1000) });
    const later = await t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: null, webhookUrl: null, payload: callFacts() });
    await settledDeliveries(t.service.db.knex, later.eventId);
    const after = raw.requests[1];
    assert.equal((after.headers['webhook-signature'] as string).split(' ').length, 1);
    assert.ok(new Webhook(newSecret).verify(after.rawBody.toString(), after.headers as Record<string, string>));
    assert.throws(() => new Webhook(oldSecret).verify(after.rawBody.toString(), after.headers as Record<string, string>));
    assert.equal(oldOnly.events.length, 1);
    assert.deepEqual(oldOnly.rejected, ['bad_signature']);
  });
});

describe('webhook delivery after an instance died mid-attempt', () => {
  it('records a delivery claimed by a dead instance as failed (interrupted) and never resends it', async () => {
    const tn = await tenant(t);
    const r = await receiver();
    const hook = await registerWebhook(tn, r.url);
    // What a crashed instance leaves behind: the event, and its delivery claimed two minutes ago.
    const knex = t.service.db.knex;
    const eventId = newId('event');
    await knex('webhook_events').insert({ id: eventId, workspace_id: tn.workspaceId, kind: 'call.completed', body: '{}' });
    await knex('webhook_deliveries').insert({
      id: newId('webhookDelivery'),
      event_id: eventId,
      workspace_id: tn.workspaceId,
      webhook_id: hook.webhook_id,
      kind: 'call.completed',
      target_url: r.url,
      url_key: r.url,
      state: 'sending',
      claimed_at: new Date(Date.now() - 120_000),
    });
    const [row] = await settledDeliveries(knex, eventId, 5000);
    assert.equal(row.status, 'failed');
    assert.equal(row.error, 'interrupted');
    assert.equal(r.requests.length, 0, 'not resent: the receiver may have had it');
    const log = await t.http.get(`/api/v1/webhooks/${hook.webhook_id}/deliveries`).set(bearer(tn.apiKey));
    assert.equal(log.status, 200);
    assert.equal(log.body.data[0].error, 'interrupted');
  });
});

describe('webhook delivery when the secret cannot be loaded', () => {
  it('sends unsigned, and records signed: false', async () => {
    const tn = await tenant(t);
    const secret = await secretOf(tn);
    const example = await exampleReceiver([secret]);
    const raw = await receiver();
    await registerWebhook(tn, example.url);
    await registerWebhook(tn, raw.url);
    // The stored secret was sealed with a key this instance does not have (a SECRETS_KEY mix-up):
    // decryption fails at delivery time.
    const foreignBox = new SecretBox(randomBytes(32));
    await t.service.db
      .knex('webhook_secrets')
      .where({ workspace_id: tn.workspaceId })
      .update({ secret_sealed: foreignBox.seal(secret, `webhook_secrets/${tn.workspaceId}`) });

    const raised = await t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: null, webhookUrl: null, payload: callFacts() });
    const rows = await settledDeliveries(t.service.db.knex, raised.eventId);
    const byUrl = Object.fromEntries(rows.map((r) => [r.target_url, r]));
    assert.equal(byUrl[raw.url].signed, false);
    assert.equal(byUrl[raw.url].status, 'succeeded');
    const [req] = raw.requests;
    assert.equal(req.headers['x-webhook-signature'], undefined);
    assert.equal(req.headers['webhook-signature'], undefined);
    assert.equal(req.headers['webhook-id'], raised.eventId);
    assert.equal(byUrl[example.url].signed, false);
    assert.equal(byUrl[example.url].status, 'failed');
    assert.equal(byUrl[example.url].status_code, 401, 'the example receiver rejects an unsigned delivery');
    assert.deepEqual(example.rejected, ['missing_signature']);
    assert.equal(example.events.length, 0);
    assert.ok(t.logs.some((l) => l.includes('webhook secret could not be loaded')));
    assert.ok(!t.logs.join('').includes(secret.slice(6)), 'the secret is not logged');
  });
});

describe('webhook delivery across instances and restarts', () => {
  let sibling: RunningService;
  before(async () => {
    sibling = await startOn(t.service.db.url, { WEBHOOK_CONCURRENCY: '4' });
  });

  it('keeps the secret across a restart (same database, same SECRETS_KEY) and signs with it', async () => {
    const tn = await tenant(t);
    const secret = await secretOf(tn);
    const res = await fetch(`${sibling.url}/api/v1/webhooks/secret`, { headers: bearer(tn.apiKey) });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { webhook_secret: string }).webhook_secret, secret);
    const example = await exampleReceiver([secret]);
    await registerWebhook(tn, example.url);
    const raised = await sibling.events.callCompleted({ workspaceId: tn.workspaceId, callId: null, webhookUrl: null, payload: callFacts() });
    await settledDeliveries(t.service.db.knex, raised.eventId);
    assert.equal(example.events.length, 1);
    assert.deepEqual(example.events[0].verified, { spec: true, standard: true });
  });

  it('two instances on one database deliver every event exactly once, and shutdown finishes deliveries in flight', async () => {
    const tn = await tenant(t);
    const r = await receiver((_req, res) => setTimeout(() => res.writeHead(200).end(), 20));
    await registerWebhook(tn, r.url);
    const raised = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        (i % 2 ? sibling : t.service).events.callCompleted({ workspaceId: tn.workspaceId, callId: null, webhookUrl: null, payload: callFacts() }),
      ),
    );
    // Stop the sibling part-way: what it claimed finishes (a row left claimed would never settle),
    // what it did not claim is left to the other instance.
    await new Promise((res) => setTimeout(res, 50));
    await sibling.close();
    for (const e of raised) await settledDeliveries(t.service.db.knex, e.eventId, 10_000);
    const ids = r.requests.map((x) => x.headers['webhook-id']);
    assert.equal(ids.length, 60, 'every event delivered');
    assert.equal(new Set(ids).size, 60, 'none twice');
    const rows = await t.service.db.knex('webhook_deliveries').whereIn(
      'event_id',
      raised.map((e) => e.eventId),
    );
    assert.ok(rows.every((x) => x.state === 'done' && x.status === 'succeeded'));
  });

  it('re-opens its LISTEN connection when the database drops it', async () => {
    const dbName = new URL(t.service.db.url).pathname.slice(1);
    const listeners = () =>
      t.service.db
        .knex('pg_stat_activity')
        .where({ datname: dbName, application_name: 'vas-listen' })
        .whereILike('query', '%listen webhook_deliveries%')
        .pluck('pid') as Promise<number[]>;
    const [before] = await listeners();
    assert.ok(before, 'the dispatcher listens');
    await t.service.db.knex.raw('select pg_terminate_backend(?)', [before]);
    let after: number[] = [];
    for (let i = 0; i < 100 && !(after.length && !after.includes(before)); i++) {
      await new Promise((r) => setTimeout(r, 50));
      after = await listeners();
    }
    assert.equal(after.length, 1, 'one new LISTEN connection');
    assert.notEqual(after[0], before);
  });
});
