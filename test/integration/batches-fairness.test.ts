/**
 * Fair dispatch (issue 21): one workspace's waiting batches do not delay another workspace's calls.
 * A neighbour with no free slot has many batches waiting for one; they hold one
 * job of the queue between them (the workspace's), not one each, and a burst of the neighbour's new
 * batches (each with its first dispatch round due at once) does not stand between another
 * workspace's `POST /calls` and its dial: the call is dialed while the neighbour's rounds are still
 * queued. The per-workspace caps refuse with their codes and store nothing. One job runner
 * (JOBS_CONCURRENCY 1), so "ahead in the queue" means "runs first".
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, setWorkspace, waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, getCall, placeCall, sandboxNumber } from '../helpers/calls.js';
import { createBatch, getBatch, sandboxNumbers } from '../helpers/batches.js';

const WAITING = 40;
const BURST = 40;

let t: TestService;
let neighbour: Tenant;
let other: Tenant;
let neighbourAgent: string;
let otherAgent: string;

before(async () => {
  t = await startTestService({
    ...FAST_CALLS,
    JOBS_CONCURRENCY: '1',
    JOBS_POLL_INTERVAL_MS: '100',
    BATCH_WAKE_DELAY_MS: '0',
    BATCH_CAPACITY_RETRY_MS: '100',
    BATCH_MAX_OPEN_PER_WORKSPACE: String(WAITING + BURST),
    BATCH_MAX_WAITING_RECIPIENTS_PER_WORKSPACE: '100',
  });
  neighbour = await tenant(t, 'Neighbour');
  other = await tenant(t, 'Other');
  // No free slot: every round of the neighbour's batches comes up short and they keep waiting.
  await setWorkspace(t, neighbour.workspaceId, { concurrent_session_limit: 0, credit_balance_cents: 1_000_000 });
  await setWorkspace(t, other.workspaceId, { concurrent_session_limit: 5, credit_balance_cents: 1_000_000 });
  neighbourAgent = await createPhoneAgent(t, neighbour, 'provider_a');
  otherAgent = await createPhoneAgent(t, other, 'provider_a');
});

after(async () => {
  await t.close();
});

/** Pending jobs of the queue by task, due now or later. */
async function pendingJobs(task: string): Promise<number> {
  const { rows } = await t.service.db.knex.raw(`select count(*)::int as n from graphile_worker.jobs where task_identifier = ? and locked_at is null`, [task]);
  return rows[0].n;
}

async function batchJobs(): Promise<number> {
  return (await pendingJobs('batch_dispatch')) + (await pendingJobs('batch_slots'));
}

let next = 100;
const oneRecipient = (name: string) => ({ agent_id: neighbourAgent, name, recipients: [{ to_number: sandboxNumbers('0002', 1, next++)[0] }] });

describe('fair dispatch', () => {
  it("a neighbour's waiting batches hold one job between them, not one each", async () => {
    for (let i = 0; i < WAITING; i++) {
      const res = await createBatch(t, neighbour, oneRecipient(`Waiting ${i}`));
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    // Every first round has run (and found no slot).
    await waitFor(async () => (await pendingJobs('batch_dispatch')) === 0, 30_000, 'the first rounds');
    let most = 0;
    for (let i = 0; i < 20; i++) {
      most = Math.max(most, await batchJobs());
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.ok(most <= 1, `the neighbour's ${WAITING} waiting batches hold ${most} jobs of the queue`);
    const { data } = (await t.http.get('/api/v1/batches?limit=100').set(bearer(neighbour.apiKey))).body;
    assert.equal(data.length, WAITING);
    assert.ok(
      data.every((b: { status: string }) => b.status === 'queued'),
      'all still waiting for the slot',
    );
  });

  it("another workspace's call is dialed ahead of a burst of the neighbour's dispatch rounds", async () => {
    const burst = await Promise.all(Array.from({ length: BURST }, (_, i) => createBatch(t, neighbour, oneRecipient(`Burst ${i}`))));
    assert.ok(
      burst.every((r) => r.status === 201),
      burst.map((r) => r.status).join(','),
    );
    // The burst's first rounds, each due at once, queued before the call was placed.
    const firstRounds = async () => {
      const keys = burst.map((r) => `batch_dispatch:${r.body.batch_id}`);
      const { rows } = await t.service.db.knex.raw(`select count(*)::int as n from graphile_worker.jobs where key = any(?) and locked_at is null`, [keys]);
      return rows[0].n as number;
    };
    const queuedRounds = await firstRounds();
    const call = await placeCall(t, other, { agent_id: otherAgent, to_number: sandboxNumber('0002') });
    assert.equal(call.status, 201, JSON.stringify(call.body));
    await waitFor(async () => (await getCall(t, other, call.body.call_id)).status !== 'queued', 30_000, 'the other workspace’s call dialed');
    const left = await firstRounds();
    assert.ok(queuedRounds >= BURST / 2, `the burst queued rounds (${queuedRounds})`);
    assert.ok(left >= queuedRounds / 2, `dialed with ${left} of the ${queuedRounds} rounds queued before it still waiting (it did not queue behind them)`);
  });

  it('refuses a batch past the open-batch cap and past the waiting-recipient cap, storing nothing', async () => {
    const [{ count: before }] = await t.service.db.knex('batches').count<{ count: string }[]>('* as count');
    const over = await createBatch(t, neighbour, oneRecipient('One too many'));
    assert.equal(over.status, 429, JSON.stringify(over.body));
    assert.equal(over.body.error.code, 'batch_limit_reached');
    assert.ok(Number(over.headers['retry-after']) > 0);
    const third = await tenant(t, 'Third');
    const agentId = await createPhoneAgent(t, third, 'provider_a');
    const many = await createBatch(t, third, {
      agent_id: agentId,
      name: 'Too many waiting',
      recipients: sandboxNumbers('0002', 101, 500).map((to_number) => ({ to_number })),
    });
    assert.equal(many.status, 429, JSON.stringify(many.body));
    assert.equal(many.body.error.code, 'pending_recipient_limit_reached');
    // The CSV upload is held to the same caps.
    const csv = (numbers: string[]) => Buffer.from(['to_number', ...numbers].join('\n'));
    const upload = (tn: Tenant, agent: string, numbers: string[]) =>
      t.http
        .post('/api/v1/batches/csv')
        .set(bearer(tn.apiKey))
        .field('agent_id', agent)
        .field('name', 'From a file')
        .attach('file', csv(numbers), { filename: 'numbers.csv', contentType: 'text/csv' });
    const overByFile = await upload(neighbour, neighbourAgent, sandboxNumbers('0002', 1, next++));
    assert.equal(overByFile.status, 429, overByFile.text);
    assert.equal(overByFile.body.error.code, 'batch_limit_reached');
    const manyByFile = await upload(third, agentId, sandboxNumbers('0002', 101, 500));
    assert.equal(manyByFile.status, 429, manyByFile.text);
    assert.equal(manyByFile.body.error.code, 'pending_recipient_limit_reached');
    const fits = await createBatch(t, third, {
      agent_id: agentId,
      name: 'Fits',
      recipients: sandboxNumbers('0002', 100, 500).map((to_number) => ({ to_number })),
      scheduled_at: new Date(Date.now() + 3_600_000).toISOString(),
    });
    assert.equal(fits.status, 201, JSON.stringify(fits.body));
    const [{ count: after }] = await t.service.db.knex('batches').count<{ count: string }[]>('* as count');
    assert.equal(Number(after), Number(before) + 1, 'only the batch within the caps was stored');
    assert.equal((await getBatch(t, third, fits.body.batch_id)).total, 100);
  });

  it('refuses to retry a finished batch whose reopened recipients would pass the waiting-recipient cap, changing nothing', async () => {
    const fourth = await tenant(t, 'Fourth');
    await setWorkspace(t, fourth.workspaceId, { concurrent_session_limit: 10, credit_balance_cents: 1_000_000 });
    const agentId = await createPhoneAgent(t, fourth, 'provider_a');
    const busy = await createBatch(t, fourth, {
      agent_id: agentId,
      name: 'All busy',
      concurrency: 10,
      recipients: sandboxNumbers('0002', 30, 700).map((to_number) => ({ to_number })),
    });
    assert.equal(busy.status, 201, JSON.stringify(busy.body));
    await waitFor(async () => (await getBatch(t, fourth, busy.body.batch_id)).status === 'completed', 120_000, 'the busy batch finished');
    const later = await createBatch(t, fourth, {
      agent_id: agentId,
      name: 'Later',
      recipients: sandboxNumbers('0002', 80, 800).map((to_number) => ({ to_number })),
      scheduled_at: new Date(Date.now() + 3_600_000).toISOString(),
    });
    assert.equal(later.status, 201, JSON.stringify(later.body));
    const finished = await getBatch(t, fourth, busy.body.batch_id);

    const retry = await t.http.post(`/api/v1/batches/${busy.body.batch_id}/retry`).set(bearer(fourth.apiKey));
    assert.equal(retry.status, 429, JSON.stringify(retry.body));
    assert.equal(retry.body.error.code, 'pending_recipient_limit_reached');
    assert.equal(retry.body.error.param, 'recipients');
    assert.ok(Number(retry.headers['retry-after']) > 0);
    assert.deepEqual(await getBatch(t, fourth, busy.body.batch_id), finished, 'the batch and its recipients as they were');

    const cancel = await t.http.post(`/api/v1/batches/${later.body.batch_id}/cancel`).set(bearer(fourth.apiKey));
    assert.equal(cancel.status, 200, JSON.stringify(cancel.body));
    const again = await t.http.post(`/api/v1/batches/${busy.body.batch_id}/retry`).set(bearer(fourth.apiKey));
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.equal(again.body.status, 'queued');
  });
});
