/**
 * Credit and plan minutes reserved at admission (issue 21): parallel calls are placed only as far as
 * the workspace's credit and plan minutes cover them (through one instance or two on one database),
 * the rest refused with 402 before anything is stored or dialed; a call that runs out of its
 * reservation ends with its reason and is billed what it used; a batch waits while its own calls hold
 * the credit and fails once it is used up; an inbound call finds the credit held and is rejected. The
 * balance never goes below zero.
 *
 * `short` runs on one-second metering minutes (METERING_MINUTE_S=1) so reservations run out in seconds.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { setWorkspace, waitFor } from '../helpers/realtime.js';
import { bearer } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, providerConfig, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { createBatch, sandboxNumbers, waitForBatch, batchCalls } from '../helpers/batches.js';

let t: TestService;
let short: TestService;

const SHORT = {
  ...FAST_CALLS,
  CALL_CENTS_PER_MINUTE: '10',
  METERING_MINUTE_S: '1',
  RESERVATION_MINUTES: '1',
  RESERVATION_RENEW_BEFORE_MS: '300',
  CALL_SILENCE_TIMEOUT_MS: '0',
  REALTIME_PLAN_MINUTES: 'trial=600,starter=4',
};

before(async () => {
  [t, short] = await Promise.all([startTestService({ ...FAST_CALLS, CALL_CENTS_PER_MINUTE: '10' }), startTestService(SHORT)]);
});

after(async () => {
  await Promise.all([t.close(), short.close()]);
});

const balance = async (s: TestService, workspaceId: string) =>
  (await s.service.db.knex('workspaces').where({ id: workspaceId }).first('credit_balance_cents')).credit_balance_cents as number;

const reservationCount = async (s: TestService, workspaceId: string) =>
  Number((await s.service.db.knex('reservations').where({ workspace_id: workspaceId }).count<{ count: string }[]>('* as count'))[0].count);

/** Samples the balance every 20 ms until `stop` resolves; returns the lowest seen. */
async function lowestBalanceWhile(s: TestService, workspaceId: string, stop: Promise<unknown>): Promise<number> {
  let lowest = Infinity;
  let done = false;
  void stop.finally(() => (done = true));
  while (!done) {
    lowest = Math.min(lowest, await balance(s, workspaceId));
    await new Promise((r) => setTimeout(r, 20));
  }
  return Math.min(lowest, await balance(s, workspaceId));
}

async function parallelCalls(s: TestService, tn: Tenant, agentId: string, n: number) {
  return Promise.all(Array.from({ length: n }, () => placeCall(s, tn, { agent_id: agentId, to_number: sandboxNumber() })));
}

/** A callee who listens to the greeting and then stays on the line, silent, for 30 simulated seconds. */
function patientCallee(s: TestService, to: string): void {
  s.service.sandbox.carriers!.server.setScript(to, [{ waitForAgent: true }, { pause: 30_000 }]);
}

describe('credit reserved at admission', () => {
  it('10 cents, 5 parallel calls: the one the credit covers is placed, 4 get 402 insufficient_credit, the balance never goes below zero', async () => {
    const tn = await tenant(t);
    await setWorkspace(t, tn.workspaceId, { credit_balance_cents: 10, concurrent_session_limit: 10 });
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const answers = await parallelCalls(t, tn, agentId, 5);
    const placed = answers.filter((r) => r.status === 201);
    const refused = answers.filter((r) => r.status !== 201);
    assert.equal(placed.length, 1, `placed ${placed.length}: ${answers.map((r) => r.status).join(',')}`);
    for (const r of refused) {
      assert.equal(r.status, 402);
      assert.equal(r.body.error.code, 'insufficient_credit');
      assert.equal(r.body.error.type, 'billing_error');
    }
    const [{ count }] = await t.service.db.knex('calls').where({ workspace_id: tn.workspaceId }).count<{ count: string }[]>('* as count');
    assert.equal(Number(count), 1, 'no call row for a refused call');
    const ended = Promise.all(placed.map((r) => waitForCall(t, tn, r.body.call_id)));
    const lowest = await lowestBalanceWhile(t, tn.workspaceId, ended);
    const calls = await ended;
    assert.ok(lowest >= 0, `the balance went to ${lowest}`);
    assert.equal(calls[0].status, 'completed');
    const row = await t.service.db.knex('calls').where({ id: calls[0].call_id }).first('cost_cents');
    assert.equal(row.cost_cents, 10, 'one started minute');
    assert.equal(await reservationCount(t, tn.workspaceId), 0, 'the reservation was released with the charge');
    assert.equal(await balance(t, tn.workspaceId), 0);
  });

  it('1 plan minute left, 5 parallel calls: one is placed, 4 get 402 plan_limit_reached', async () => {
    const tn = await tenant(t);
    // trial: 600 minutes a month; 599 used.
    await setWorkspace(t, tn.workspaceId, { credit_balance_cents: 100_000, concurrent_session_limit: 10 });
    await t.service.db.knex('usage_records').insert({
      workspace_id: tn.workspaceId,
      kind: 'phone_call',
      ref_id: `call_used_${tn.workspaceId}`,
      seconds: 599 * 60,
      minutes: 599,
      cents: 0,
      started_at: new Date(),
    });
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const answers = await parallelCalls(t, tn, agentId, 5);
    const placed = answers.filter((r) => r.status === 201);
    assert.equal(placed.length, 1, `placed ${placed.length}: ${answers.map((r) => r.status).join(',')}`);
    for (const r of answers.filter((a) => a.status !== 201)) {
      assert.equal(r.status, 402);
      assert.equal(r.body.error.code, 'plan_limit_reached');
    }
    await waitFor(async () => (await waitForCall(t, tn, placed[0].body.call_id)).status === 'completed', 20_000, 'the placed call');
  });
});

describe('a call that runs out of its reservation', () => {
  it('ends with end_reason insufficient_credit after the minutes its credit covered, billed exactly those, the balance at zero', async () => {
    const tn = await tenant(short);
    // 3 one-second minutes at 10 cents: reserved one at a time (RESERVATION_MINUTES=1), the 4th refused.
    await setWorkspace(short, tn.workspaceId, { credit_balance_cents: 30 });
    const agentId = await createPhoneAgent(short, tn, 'provider_a');
    const to = sandboxNumber();
    patientCallee(short, to);
    const res = await placeCall(short, tn, { agent_id: agentId, to_number: to });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const ended = waitForCall(short, tn, res.body.call_id, undefined, 30_000);
    const lowest = await lowestBalanceWhile(short, tn.workspaceId, ended);
    const call = await ended;
    assert.equal(call.status, 'completed');
    assert.equal(call.end_reason, 'insufficient_credit');
    assert.ok(call.duration >= 3 && call.duration <= 4, `talked ${call.duration} s for 3 s of credit`);
    const row = await short.service.db.knex('calls').where({ id: call.call_id }).first('cost_cents');
    assert.equal(row.cost_cents, 30, 'billed the 3 minutes it held, not the moment its hang-up took');
    const usage = await short.service.db.knex('usage_records').where({ ref_id: call.call_id }).first();
    assert.equal(usage.cents, 30);
    assert.ok(usage.seconds <= 3, `plan seconds counted: ${usage.seconds}`);
    assert.ok(lowest >= 0, `the balance went to ${lowest}`);
    assert.equal(await balance(short, tn.workspaceId), 0);
    assert.equal(await reservationCount(short, tn.workspaceId), 0);
  });

  it('ends with end_reason plan_limit_reached when the plan minutes run out, never counting more than the plan allows', async () => {
    const tn = await tenant(short);
    // starter: 4 one-second minutes a month, 1 already used.
    await setWorkspace(short, tn.workspaceId, { plan: 'starter', credit_balance_cents: 100_000 });
    await short.service.db.knex('usage_records').insert({
      workspace_id: tn.workspaceId,
      kind: 'web_session',
      ref_id: `conv_used_${tn.workspaceId}`,
      seconds: 1,
      minutes: 1,
      cents: 0,
      started_at: new Date(),
    });
    const agentId = await createPhoneAgent(short, tn, 'provider_b');
    const to = sandboxNumber();
    patientCallee(short, to);
    const res = await placeCall(short, tn, { agent_id: agentId, to_number: to });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const call = await waitForCall(short, tn, res.body.call_id, undefined, 30_000);
    assert.equal(call.status, 'completed');
    assert.equal(call.end_reason, 'plan_limit_reached');
    assert.ok(call.duration >= 3 && call.duration <= 4, `talked ${call.duration} s of 3 s left`);
    const [{ used }] = await short.service.db
      .knex('usage_records')
      .where({ workspace_id: tn.workspaceId })
      .select(short.service.db.knex.raw('sum(seconds)::int as used'));
    assert.ok(used <= 4, `${used} s counted of a 4 s plan`);
    const again = await placeCall(short, tn, { agent_id: agentId, to_number: sandboxNumber() });
    assert.equal(again.status, 402);
    assert.equal(again.body.error.code, 'plan_limit_reached');
  });

  it('is extended a minute at a time while another call ends and is charged; together they use exactly the credit', async () => {
    const tn = await tenant(short);
    // 10 minutes of credit, 2 calls: the first hangs up after the greeting; the second is extended until the credit is used up.
    await setWorkspace(short, tn.workspaceId, { credit_balance_cents: 100, concurrent_session_limit: 5 });
    const agentId = await createPhoneAgent(short, tn, 'provider_a');
    const quick = sandboxNumber();
    short.service.sandbox.carriers!.server.setScript(quick, [{ waitForAgent: true }, { hangup: true }]);
    const patient = sandboxNumber();
    patientCallee(short, patient);
    const [a, b] = await Promise.all([
      placeCall(short, tn, { agent_id: agentId, to_number: quick }),
      placeCall(short, tn, { agent_id: agentId, to_number: patient }),
    ]);
    assert.equal(a.status, 201, JSON.stringify(a.body));
    assert.equal(b.status, 201, JSON.stringify(b.body));
    const both = Promise.all([waitForCall(short, tn, a.body.call_id, undefined, 30_000), waitForCall(short, tn, b.body.call_id, undefined, 30_000)]);
    const lowest = await lowestBalanceWhile(short, tn.workspaceId, both);
    const [first, second] = await both;
    // The first normally hangs up first; on a slow machine its greeting may outlast the credit too.
    assert.ok(['remote_hangup', 'insufficient_credit'].includes(first.end_reason), first.end_reason);
    assert.equal(second.end_reason, 'insufficient_credit');
    const rows = await short.service.db.knex('calls').whereIn('id', [first.call_id, second.call_id]).select('id', 'cost_cents');
    const cost = Object.fromEntries(rows.map((r) => [r.id, r.cost_cents as number]));
    assert.equal(cost[first.call_id] + cost[second.call_id], 100, 'together they used exactly the credit');
    assert.ok(cost[second.call_id] >= 30, `the second call was extended minute after minute (${cost[second.call_id]} cents)`);
    assert.ok(lowest >= 0);
    assert.equal(await balance(short, tn.workspaceId), 0);
  });
});

describe('batches and inbound calls', () => {
  it('a batch waits while its own calls hold the credit, then fails with insufficient_credit once it is used up; the balance never goes below zero', async () => {
    const tn = await tenant(t);
    // Each call reserves up to 2 minutes (20 cents) and uses 1: two calls, one after the other, then nothing is left.
    await setWorkspace(t, tn.workspaceId, { credit_balance_cents: 20, concurrent_session_limit: 5 });
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const res = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Thrifty',
      recipients: sandboxNumbers('5600', 4, 300).map((to_number) => ({ to_number })),
      concurrency: 4,
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const finished = waitForBatch(t, tn, res.body.batch_id, undefined, 60_000);
    const lowest = await lowestBalanceWhile(t, tn.workspaceId, finished);
    const batch = await finished;
    assert.equal(batch.status, 'failed');
    const calls = await batchCalls(t, tn, res.body.batch_id);
    assert.equal(calls.length, 2, 'as many calls as the credit paid for');
    assert.ok(calls.every((c) => c.status === 'completed'));
    const notDialed = batch.recipients.filter((r: Record<string, unknown>) => r.call_id === null);
    assert.equal(notDialed.length, 2);
    assert.ok(notDialed.every((r: Record<string, unknown>) => r.status === 'failed' && r.last_error === 'insufficient_credit'));
    assert.ok(lowest >= 0, `the balance went to ${lowest}`);
    assert.equal(await balance(t, tn.workspaceId), 0);
  });

  it('an inbound call while a live call holds all the credit is rejected as busy; nothing is recorded for it', async () => {
    const tn = await tenant(t);
    await setWorkspace(t, tn.workspaceId, { credit_balance_cents: 10, concurrent_session_limit: 5 });
    const number = sandboxNumber();
    const agentId = await createPhoneAgent(t, tn, 'provider_a', providerConfig('provider_a', number));
    assert.equal((await t.http.post(`/api/v1/agents/${agentId}/telephony/provider_a/inbound`).set(bearer(tn.apiKey))).status, 200);
    const to = sandboxNumber();
    patientCallee(t, to);
    const out = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    assert.equal(out.status, 201);
    const inbound = await t.http.post('/api/v1/sandbox/inbound-calls').set(bearer(tn.apiKey)).send({ to_number: number });
    assert.equal(inbound.status, 409, JSON.stringify(inbound.body));
    assert.equal(inbound.body.error.code, 'inbound_call_rejected');
    const calls = await t.http.get('/api/v1/calls?direction=inbound').set(bearer(tn.apiKey));
    assert.deepEqual(calls.body.data, []);
    await t.http.post(`/api/v1/calls/${out.body.call_id}/hangup`).set(bearer(tn.apiKey));
    await waitForCall(t, tn, out.body.call_id);
  });
});

describe('two instances on one database', () => {
  it('share one balance: 10 parallel calls through both, 30 cents of one-minute reservations, 3 placed', async () => {
    const env = { ...FAST_CALLS, CALL_CENTS_PER_MINUTE: '10', RESERVATION_MINUTES: '1', DATABASE_URL: t.service.db.url };
    const [a, b] = await Promise.all([startTestService(env), startTestService(env)]);
    try {
      const tn = await tenant(a);
      await setWorkspace(a, tn.workspaceId, { credit_balance_cents: 30, concurrent_session_limit: 20 });
      const agentId = await createPhoneAgent(a, tn, 'provider_a');
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => placeCall(i % 2 ? a : b, tn, { agent_id: agentId, to_number: sandboxNumber() })));
      const placed = answers.filter((r) => r.status === 201);
      assert.equal(placed.length, 3, answers.map((r) => r.status).join(','));
      assert.ok(answers.filter((r) => r.status !== 201).every((r) => r.status === 402 && r.body.error.code === 'insufficient_credit'));
      const ended = Promise.all(placed.map((r) => waitForCall(a, tn, r.body.call_id)));
      const lowest = await lowestBalanceWhile(a, tn.workspaceId, ended);
      assert.ok(lowest >= 0, `the balance went to ${lowest}`);
      assert.equal(await balance(a, tn.workspaceId), 0);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
