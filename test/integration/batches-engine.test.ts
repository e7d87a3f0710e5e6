/**
 * The batch engine end to end through the real carrier adapters and the sandbox carriers: 100
 * recipients with mixed outcomes and the right counts, one `batch.completed` per target; the batch's
 * concurrency and the workspace's slots respected (a full workspace makes a batch wait, never fail);
 * a scheduled start that is not early; cancel mid-run with live calls finishing; pause and resume;
 * the retry policy (never more attempts than set) and the agent's voicemail retry; `retryBatch`; the
 * calling window.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { bearer, setWorkspace, waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent } from '../helpers/calls.js';
import { batchCalls, createBatch, getBatch, sandboxNumbers, waitForBatch } from '../helpers/batches.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';

let t: TestService;
let tn: Tenant;
let sandbox: SandboxCarriers;
let own: Receiver;
let registered: Receiver;

before(async () => {
  t = await startTestService({ ...FAST_CALLS, BATCH_CAPACITY_RETRY_MS: '100' });
  tn = await tenant(t);
  await setWorkspace(t, tn.workspaceId, { concurrent_session_limit: 40 });
  sandbox = t.service.sandbox.carriers!.server;
  own = await startReceiver();
  registered = await startReceiver();
  const res = await t.http
    .post('/api/v1/webhooks')
    .set(bearer(tn.apiKey))
    .send({ url: registered.url, events: ['batch.completed'] });
  assert.equal(res.status, 201, JSON.stringify(res.body));
});

after(async () => {
  await t.close();
  await own.close();
  await registered.close();
});

const eventsOf = (r: Receiver, batchId: string) => r.requests.map((q) => JSON.parse(q.rawBody.toString())).filter((e) => e.batch_id === batchId);

/** The most calls of the batch live at one time, sampled until `stop` resolves. */
function sampleLive(batchId: string, stop: Promise<unknown>): Promise<number> {
  let most = 0;
  let done = false;
  void stop.finally(() => (done = true));
  return (async () => {
    while (!done) {
      const [{ count }] = await t.service.db
        .knex('calls')
        .where({ batch_id: batchId })
        .whereIn('status', ['queued', 'initiated', 'ringing', 'in_progress'])
        .count<{ count: string }[]>('* as count');
      most = Math.max(most, Number(count));
      await new Promise((r) => setTimeout(r, 25));
    }
    return most;
  })();
}

describe('a batch of 100 recipients with mixed outcomes', () => {
  it('calls each once, counts every outcome, respects its concurrency, and reports once per target', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { voicemail_config: { enabled: true, message: null, retry_on_voicemail: false } });
    const people = sandboxNumbers('5000', 40, 100);
    for (const to of people) sandbox.setScript(to, [{ waitForAgent: true }, { hangup: true }]);
    const voicemail = sandboxNumbers('0001', 15, 200);
    const busy = sandboxNumbers('0002', 15, 300);
    const noAnswer = sandboxNumbers('0003', 15, 400);
    const refused = sandboxNumbers('0004', 15, 500);
    const numbers = [...people, ...voicemail, ...busy, ...noAnswer, ...refused].sort(() => Math.random() - 0.5);
    const res = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Hundred',
      recipients: numbers.map((to_number) => ({ to_number })),
      concurrency: 25,
      webhook_url: own.url,
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const batchId = res.body.batch_id as string;
    const finished = waitForBatch(t, tn, batchId, undefined, 120_000);
    const most = await sampleLive(batchId, finished);
    const batch = await finished;
    assert.equal(batch.status, 'completed');
    assert.ok(most <= 25, `at most 25 live calls (saw ${most})`);
    assert.deepEqual([batch.completed_count, batch.voicemail_count, batch.failed_count], [40, 15, 45]);
    const byStatus = (s: string) => batch.recipients.filter((r: { status: string }) => r.status === s).length;
    assert.deepEqual([byStatus('completed'), byStatus('voicemail'), byStatus('busy'), byStatus('no_answer'), byStatus('failed')], [40, 15, 15, 15, 15]);
    assert.ok(
      batch.recipients.every((r: Record<string, any>) => r.attempts === 1 && r.call_ids.length === 1 && r.call_id === r.call_ids[0] && r.outcome !== null),
    );
    const calls = await batchCalls(t, tn, batchId);
    assert.equal(calls.length, 100, 'one call per recipient');
    assert.equal(new Set(calls.map((c) => c.to_number)).size, 100, 'nobody called twice');
    assert.deepEqual(
      new Set(
        sandbox
          .calls()
          .filter((c) => numbers.includes(c.to))
          .map((c) => c.to),
      ).size,
      100,
      'the carrier dialed each once',
    );
    for (const r of [own, registered]) await waitFor(async () => eventsOf(r, batchId).length >= 1, 10_000, 'batch.completed');
    await new Promise((r) => setTimeout(r, 300));
    for (const r of [own, registered]) {
      const events = eventsOf(r, batchId);
      assert.equal(events.length, 1, 'once per target');
      assert.deepEqual(
        [events[0].status, events[0].total, events[0].completed_count, events[0].voicemail_count, events[0].failed_count],
        ['completed', 100, 40, 15, 45],
      );
    }
    const deliveries = await t.http.get(`/api/v1/batches/${batchId}/webhook-deliveries`).set(bearer(tn.apiKey));
    assert.equal(deliveries.status, 200);
    assert.equal(deliveries.body.data.length, 2);
  });
});

describe('capacity', () => {
  it('a workspace with no free slot makes the batch wait; it completes once slots free up', async () => {
    const ws = await tenant(t, 'Tiny');
    await setWorkspace(t, ws.workspaceId, { concurrent_session_limit: 1 });
    const agentId = await createPhoneAgent(t, ws, 'provider_b');
    const res = await createBatch(t, ws, {
      agent_id: agentId,
      name: 'Narrow',
      recipients: sandboxNumbers('0002', 4, 600).map((to_number) => ({ to_number })),
      concurrency: 4,
    });
    const finished = waitForBatch(t, ws, res.body.batch_id);
    const most = await sampleLive(res.body.batch_id, finished);
    const batch = await finished;
    assert.equal(most, 1, 'one slot, one call at a time');
    assert.equal(batch.failed_count, 4);
    assert.ok(batch.recipients.every((r: Record<string, unknown>) => r.status === 'busy' && r.attempts === 1));
  });
});

describe('scheduling', () => {
  it('starts at scheduled_at, not before', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    // Room for the request on a loaded machine before the batch is due, and for polls of the job queue after.
    const at = new Date(Date.now() + 3000);
    const onTimeMs = 25 * Number(FAST_CALLS.JOBS_POLL_INTERVAL_MS);
    const res = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Soon',
      recipients: [{ to_number: sandboxNumbers('0002', 1, 700)[0] }],
      scheduled_at: at.toISOString(),
    });
    assert.equal(res.body.status, 'scheduled');
    const batch = await waitForBatch(t, tn, res.body.batch_id);
    const [call] = await batchCalls(t, tn, res.body.batch_id);
    const lag = new Date(call.created_at).getTime() - at.getTime();
    assert.ok(lag >= 0, `not early (${lag} ms)`);
    assert.ok(lag < onTimeMs, `on time (${lag} ms late)`);
    assert.equal(batch.status, 'completed');
  });

  it('waits outside its calling window, in the recipient’s time zone', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const now = new Date();
    const hh = (h: number) => String((now.getUTCHours() + h) % 24).padStart(2, '0');
    // A window two hours from now in UTC (unless that wraps past midnight: then one from 01:00 to 02:00).
    const window = now.getUTCHours() < 21 ? { start: `${hh(2)}:00`, end: `${hh(3)}:00`, timezone: 'UTC' } : { start: '01:00', end: '02:00', timezone: 'UTC' };
    const [a, b] = sandboxNumbers('0002', 2, 710);
    const res = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Daytime',
      recipients: [{ to_number: a }, { to_number: b, timezone: 'Etc/GMT-14' }],
      calling_window: window,
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const batch = await waitForBatch(t, tn, res.body.batch_id, (x) => x.recipients[0].status === 'scheduled');
    const first = batch.recipients[0];
    assert.equal(new Date(first.next_attempt_at).getUTCHours(), Number(window.start.slice(0, 2)), 'waits for the window to open');
    assert.ok(new Date(first.next_attempt_at) > now);
    assert.notEqual(batch.recipients[1].next_attempt_at, first.next_attempt_at, 'the other recipient keeps its own zone');
    assert.deepEqual(await batchCalls(t, tn, res.body.batch_id), [], 'nobody is called outside the window');
    await t.http.post(`/api/v1/batches/${res.body.batch_id}/cancel`).set(bearer(tn.apiKey));
  });
});

describe('cancel, pause and resume', () => {
  it('cancel mid-run: waiting recipients are never dialed, live calls finish, then one batch.completed', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_b');
    const numbers = sandboxNumbers('5000', 6, 800);
    for (const to of numbers) sandbox.setScript(to, [{ pause: 60_000 }]);
    const res = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Stop',
      recipients: numbers.map((to_number) => ({ to_number })),
      concurrency: 2,
      webhook_url: own.url,
    });
    const batchId = res.body.batch_id as string;
    await waitForBatch(t, tn, batchId, (b) => b.recipients.filter((r: { status: string }) => r.status === 'in_progress').length === 2);
    const canceled = await t.http.post(`/api/v1/batches/${batchId}/cancel`).set(bearer(tn.apiKey));
    assert.equal(canceled.status, 200, JSON.stringify(canceled.body));
    assert.equal(canceled.body.status, 'canceled');
    assert.equal(canceled.body.completed_at, null, 'not reported while calls are live');
    assert.equal(canceled.body.recipients.filter((r: { status: string }) => r.status === 'canceled').length, 4);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(eventsOf(own, batchId).length, 0);
    for (const call of await batchCalls(t, tn, batchId)) await t.http.post(`/api/v1/calls/${call.call_id}/hangup`).set(bearer(tn.apiKey));
    const batch = await waitForBatch(t, tn, batchId);
    assert.equal(batch.status, 'canceled');
    assert.equal(batch.completed_count, 2, 'the live calls ran to their end and count');
    assert.equal((await batchCalls(t, tn, batchId)).length, 2, 'nobody else was called');
    await waitFor(async () => eventsOf(own, batchId).length === 1, 10_000, 'batch.completed');
    assert.equal(eventsOf(own, batchId)[0].status, 'canceled');
  });

  it('pause holds further calls; resume goes on from where it was', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const numbers = sandboxNumbers('0002', 4, 900);
    const res = await createBatch(t, tn, { agent_id: agentId, name: 'Hold', recipients: numbers.map((to_number) => ({ to_number })), concurrency: 1 });
    const batchId = res.body.batch_id as string;
    const paused = await t.http.post(`/api/v1/batches/${batchId}/pause`).set(bearer(tn.apiKey));
    assert.equal(paused.status, 200);
    assert.equal(paused.body.status, 'paused');
    await new Promise((r) => setTimeout(r, 1500));
    const held = await getBatch(t, tn, batchId);
    assert.equal(held.status, 'paused');
    const placed = (await batchCalls(t, tn, batchId)).length;
    assert.ok(placed <= 1, `at most the call placed before the pause (${placed})`);
    assert.equal(held.recipients.filter((r: { status: string }) => r.status === 'pending').length, 4 - placed);
    assert.equal((await t.http.post(`/api/v1/batches/${batchId}/pause`).set(bearer(tn.apiKey))).body.status, 'paused', 'pausing twice changes nothing');
    const resumed = await t.http.post(`/api/v1/batches/${batchId}/resume`).set(bearer(tn.apiKey));
    assert.equal(resumed.status, 200);
    assert.ok(['queued', 'in_progress'].includes(resumed.body.status), resumed.body.status);
    const batch = await waitForBatch(t, tn, batchId);
    assert.equal(batch.status, 'completed');
    assert.equal((await batchCalls(t, tn, batchId)).length, 4);
    const late = await t.http.post(`/api/v1/batches/${batchId}/resume`).set(bearer(tn.apiKey));
    assert.equal(late.status, 409);
    assert.equal(late.body.error.code, 'batch_already_terminal');
  });
});

describe('retries', () => {
  it('busy is retried only as the policy asks, never beyond max_attempts; retryBatch starts a new round', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const [busy] = sandboxNumbers('0002', 1, 950);
    const [person] = sandboxNumbers('5000', 1, 951);
    sandbox.setScript(person, [{ waitForAgent: true }, { hangup: true }]);
    const res = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Again',
      recipients: [{ to_number: busy }, { to_number: person }],
      retry_policy: { max_attempts: 3, delay_seconds: 0, retry_on: ['busy'] },
      webhook_url: own.url,
    });
    const batchId = res.body.batch_id as string;
    const batch = await waitForBatch(t, tn, batchId);
    const [b, p] = batch.recipients;
    assert.deepEqual([b.status, b.attempts, b.call_ids.length, b.last_error], ['busy', 3, 3, 'busy']);
    assert.deepEqual([p.status, p.attempts], ['completed', 1], 'completed is never retried');
    assert.equal((await batchCalls(t, tn, batchId)).length, 4);

    const nothing = await createBatch(t, tn, { agent_id: agentId, name: 'x', recipients: [{ to_number: person }] });
    await waitForBatch(t, tn, nothing.body.batch_id);
    const refused = await t.http.post(`/api/v1/batches/${nothing.body.batch_id}/retry`).set(bearer(tn.apiKey));
    assert.equal(refused.status, 409);
    assert.equal(refused.body.error.code, 'nothing_to_retry');

    const again = await t.http.post(`/api/v1/batches/${batchId}/retry`).set(bearer(tn.apiKey));
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.equal(again.body.status, 'queued');
    assert.equal(again.body.completed_at, null);
    assert.equal(again.body.recipients[1].status, 'completed', 'completed recipients are left as they are');
    const second = await waitForBatch(t, tn, batchId);
    assert.deepEqual([second.recipients[0].attempts, second.recipients[0].status], [6, 'busy'], 'a fresh round of three');
    await waitFor(async () => eventsOf(own, batchId).length === 2, 10_000, 'batch.completed after each run');
  });

  it('voicemail is retried when the agent asks for it', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_b', { voicemail_config: { enabled: true, message: null, retry_on_voicemail: true } });
    const [machine] = sandboxNumbers('0001', 1, 960);
    const res = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Machine',
      recipients: [{ to_number: machine }],
      retry_policy: { max_attempts: 2, delay_seconds: 0 },
    });
    const batch = await waitForBatch(t, tn, res.body.batch_id);
    assert.deepEqual([batch.recipients[0].status, batch.recipients[0].attempts, batch.voicemail_count], ['voicemail', 2, 1]);
  });
});

describe('a batch that cannot go on', () => {
  it('fails when its provider configuration is removed: waiting recipients fail with the reason, one batch.completed', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    // Room for two requests on a loaded machine before the batch is due.
    const at = Date.now() + 5000;
    const res = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Orphaned',
      recipients: sandboxNumbers('0002', 3, 970).map((to_number) => ({ to_number })),
      scheduled_at: new Date(at).toISOString(),
      webhook_url: own.url,
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const patched = await t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send({ provider_a_config: null });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.ok(Date.now() < at, 'the configuration was removed before the batch was due');
    const batch = await waitForBatch(t, tn, res.body.batch_id);
    assert.equal(batch.status, 'failed');
    assert.ok(batch.recipients.every((r: Record<string, unknown>) => r.status === 'failed' && r.last_error === 'provider_not_configured' && r.attempts === 0));
    assert.equal(batch.failed_count, 3);
    await waitFor(async () => eventsOf(own, res.body.batch_id).length === 1, 10_000, 'batch.completed');
    assert.equal(eventsOf(own, res.body.batch_id)[0].status, 'failed');
  });
});
