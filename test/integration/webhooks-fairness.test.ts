/**
 * Webhook deliveries are shared fairly between workspaces: receivers that never answer, holding every
 * request of one workspace (or of two) open, do not hold back another workspace's deliveries, while a
 * workspace alone still gets most of the slots. The receivers here answer only when the test lets
 * them, so the tests say what is sent while they hang, not how long anything takes.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type http from 'node:http';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, callFacts, startReceiver, type Receiver } from '../helpers/webhooks.js';
import { waitFor } from '../helpers/realtime.js';

const CONCURRENCY = 8;
/** A quarter of the slots is kept for workspaces with nothing in flight. */
const RESERVE = 2;

let t: TestService;
const held: http.ServerResponse[] = [];
let hanging = true;
const receivers: Receiver[] = [];

before(async () => {
  t = await startTestService({ WEBHOOK_CONCURRENCY: String(CONCURRENCY), WEBHOOK_TIMEOUT_MS: '60000', WEBHOOK_POLL_INTERVAL_MS: '100' });
});
after(async () => {
  release();
  for (const r of receivers) await r.close();
  await t.close();
});

/** The hanging receivers answer what they hold, and from now on at once. */
function release(): void {
  hanging = false;
  for (const res of held.splice(0)) res.writeHead(200).end('ok');
}

/** A receiver that answers nothing until release(). */
async function hangingReceiver(): Promise<Receiver> {
  hanging = true;
  const r = await startReceiver((_req, res) => (hanging ? held.push(res) : res.writeHead(200).end('ok')));
  receivers.push(r);
  return r;
}

async function answeringReceiver(): Promise<Receiver> {
  const r = await startReceiver();
  receivers.push(r);
  return r;
}

async function withWebhook(url: string): Promise<Tenant> {
  const tn = await tenant(t);
  const res = await t.http
    .post('/api/v1/webhooks')
    .set(bearer(tn.apiKey))
    .send({ url, events: ['call.completed'] });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return tn;
}

async function raise(tn: Tenant, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const facts = callFacts();
    await t.service.events.callCompleted({ workspaceId: tn.workspaceId, callId: facts.conversation_id, webhookUrl: null, payload: facts });
  }
}

async function pendingOf(tn: Tenant): Promise<number> {
  const [{ count }] = await t.service.db.knex('webhook_deliveries').where({ workspace_id: tn.workspaceId, state: 'pending' }).count();
  return Number(count);
}

describe('fair webhook delivery', () => {
  it("one workspace's hanging receivers take at most the shared slots; another workspace's deliveries still go out", async () => {
    const slow = await hangingReceiver();
    const a = await withWebhook(slow.url);
    await raise(a, 30);
    // A alone: it gets every slot but the reserve, and no more while they hang.
    await slow.waitFor(CONCURRENCY - RESERVE, 10_000);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(slow.requests.length, CONCURRENCY - RESERVE, 'the reserve is not taken by a workspace already sending');
    assert.equal(await pendingOf(a), 30 - (CONCURRENCY - RESERVE));

    const fast = await answeringReceiver();
    const b = await withWebhook(fast.url);
    await raise(b, 20);
    // Every one of B's deliveries goes out while A's receivers still hang.
    await fast.waitFor(20, 20_000);
    assert.equal(slow.requests.length, CONCURRENCY - RESERVE, "A's requests are still the ones hanging");
    assert.equal(await pendingOf(b), 0);

    release();
    await slow.waitFor(30, 20_000);
    await waitFor(async () => (await pendingOf(a)) === 0, 10_000, "A's deliveries to finish");
  });

  it('with two workspaces hanging, a third still gets its delivery out', async () => {
    const slowA = await hangingReceiver();
    const slowB = await hangingReceiver();
    const a = await withWebhook(slowA.url);
    const b = await withWebhook(slowB.url);
    await raise(a, 15);
    await raise(b, 15);
    await waitFor(async () => slowA.requests.length + slowB.requests.length >= CONCURRENCY - 1, 10_000, 'the slots to fill');
    assert.ok(slowB.requests.length >= 1, 'B got a slot while A was sending');

    const fast = await answeringReceiver();
    const c = await withWebhook(fast.url);
    await raise(c, 3);
    await fast.waitFor(3, 20_000);
    assert.equal(await pendingOf(c), 0);

    release();
    await slowA.waitFor(15, 20_000);
    await slowB.waitFor(15, 20_000);
  });
});
