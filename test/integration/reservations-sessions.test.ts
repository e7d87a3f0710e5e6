/**
 * Web sessions hold reservations like phone calls (issue 21): parallel sessions start only as far as
 * the workspace's credit and plan minutes cover them, the rest closed with 4028 as the contract says;
 * a session whose reservation runs out is closed with 4028 and recorded with its end reason, billed
 * what it held; calls and sessions draw on one balance. The balance never goes below zero.
 *
 * `short` runs on one-second metering minutes (METERING_MINUTE_S=1) so reservations run out in seconds.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { connect, createAgent, mintSession, setWorkspace, waitFor, type Client } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber } from '../helpers/calls.js';

let t: TestService;
let short: TestService;

before(async () => {
  [t, short] = await Promise.all([
    startTestService({ ...FAST_CALLS, REALTIME_CENTS_PER_MINUTE: '10', CALL_CENTS_PER_MINUTE: '10' }),
    startTestService({
      REALTIME_CENTS_PER_MINUTE: '10',
      METERING_MINUTE_S: '1',
      RESERVATION_MINUTES: '1',
      RESERVATION_RENEW_BEFORE_MS: '300',
      REALTIME_PLAN_MINUTES: 'trial=600,starter=4',
    }),
  ]);
});

after(async () => {
  await Promise.all([t.close(), short.close()]);
});

const balance = async (s: TestService, workspaceId: string) =>
  Number((await s.service.db.knex('workspaces').where({ id: workspaceId }).first('credit_balance_cents')).credit_balance_cents);

/** Opens `n` sessions at once; resolves with each client and what it got first: `session_started` or its close. */
async function openMany(s: TestService, tn: Tenant, agentId: string, source: string, n: number) {
  const minted = await Promise.all(Array.from({ length: n }, (_, i) => mintSession(s, tn, agentId, source, `visitor-${i}`)));
  const clients = minted.map((m) => connect(m.ws_url));
  const first = await Promise.all(
    clients.map((c) =>
      Promise.race([c.next('session_started', 10_000).then((m) => ({ started: m.session_id as string })), c.closed.then((closed) => ({ closed }))]),
    ),
  );
  return clients.map((c, i) => ({ c, first: first[i] }));
}

async function record(s: TestService, sessionId: string) {
  return waitFor(() => s.service.realtime.store.getConversation(sessionId), 15_000, `the record of ${sessionId}`);
}

describe('web sessions', () => {
  it('10 cents, 5 parallel voice sessions: one starts, 4 are closed with 4028 Insufficient credits; the one running is closed with 4028 when its minute runs out, billed 10 cents', async () => {
    const tn = await tenant(short);
    await setWorkspace(short, tn.workspaceId, { credit_balance_cents: 10, concurrent_session_limit: 10 });
    const agentId = await createAgent(short, tn);
    const opened = await openMany(short, tn, agentId, 'voice', 5);
    const started = opened.filter((o) => 'started' in o.first);
    assert.equal(started.length, 1, JSON.stringify(opened.map((o) => o.first)));
    for (const o of opened.filter((x) => 'closed' in x.first)) {
      assert.deepEqual((o.first as { closed: unknown }).closed, { code: 4028, reason: 'Insufficient credits' });
      assert.deepEqual(o.c.messages, [], 'no message precedes a refusal');
    }
    const running = started[0];
    const closed = await running.c.closed;
    assert.deepEqual(closed, { code: 4028, reason: 'Insufficient credits' });
    const row = await record(short, (running.first as { started: string }).started);
    assert.equal(row.status, 'completed');
    assert.equal(row.end_reason, 'insufficient_credit');
    assert.equal(row.cost_cents, 10, 'billed the minute it held');
    assert.ok(row.duration >= 1 && row.duration <= 2, `ran ${row.duration} s on one second of credit`);
    assert.equal(await balance(short, tn.workspaceId), 0);
    const res = await short.http.get(`/api/v1/realtime/conversations/${row.id}`).set({ Authorization: `Bearer ${tn.apiKey}` });
    assert.equal(res.status, 200);
    assert.equal(res.body.end_reason, 'insufficient_credit');
  });

  it('3 plan minutes left, 5 parallel text sessions with no credit: 3 start (text needs no credit), 2 are closed with 4028 Plan limit; the three end with plan_limit_reached', async () => {
    const tn = await tenant(short);
    // starter: 4 one-second minutes a month, 1 already used.
    await setWorkspace(short, tn.workspaceId, { plan: 'starter', credit_balance_cents: 0, concurrent_session_limit: 10 });
    await short.service.db.knex('usage_records').insert({
      workspace_id: tn.workspaceId,
      kind: 'phone_call',
      ref_id: `call_used_${tn.workspaceId}`,
      seconds: 1,
      minutes: 1,
      cents: 0,
      started_at: new Date(),
    });
    const agentId = await createAgent(short, tn);
    const opened = await openMany(short, tn, agentId, 'text', 5);
    const started = opened.filter((o) => 'started' in o.first);
    assert.equal(started.length, 3, JSON.stringify(opened.map((o) => o.first)));
    for (const o of opened.filter((x) => 'closed' in x.first)) assert.deepEqual((o.first as { closed: unknown }).closed, { code: 4028, reason: 'Plan limit' });
    for (const o of started) {
      assert.deepEqual(await o.c.closed, { code: 4028, reason: 'Plan limit' });
      const row = await record(short, (o.first as { started: string }).started);
      assert.equal(row.end_reason, 'plan_limit_reached');
      assert.equal(row.cost_cents, 0, 'text sessions are free');
    }
    const [{ used }] = await short.service.db
      .knex('usage_records')
      .where({ workspace_id: tn.workspaceId })
      .select(short.service.db.knex.raw('sum(seconds)::int as used'));
    assert.ok(used <= 4, `${used} s counted of a 4 s plan`);
    assert.equal(await balance(short, tn.workspaceId), 0);
  });

  it('calls and sessions draw on one balance: a live voice session holding the credit refuses a call with 402; once it is billed the balance is zero', async () => {
    const tn = await tenant(t);
    await setWorkspace(t, tn.workspaceId, { credit_balance_cents: 10, concurrent_session_limit: 10 });
    const agentId = await createAgent(t, tn);
    const [session] = await openMany(t, tn, agentId, 'voice', 1);
    assert.ok('started' in session.first, JSON.stringify(session.first));
    const phoneAgent = await createPhoneAgent(t, tn, 'provider_a');
    const call = await placeCall(t, tn, { agent_id: phoneAgent, to_number: sandboxNumber() });
    assert.equal(call.status, 402);
    assert.equal(call.body.error.code, 'insufficient_credit');
    const second = await openMany(t, tn, agentId, 'voice', 1);
    assert.deepEqual((second[0].first as { closed: unknown }).closed, { code: 4028, reason: 'Insufficient credits' });
    await (session.c as Client).close();
    const row = await record(t, (session.first as { started: string }).started);
    assert.equal(row.end_reason, 'client_closed');
    assert.equal(row.cost_cents, 10);
    assert.equal(await balance(t, tn.workspaceId), 0);
    assert.equal(
      Number((await t.service.db.knex('reservations').where({ workspace_id: tn.workspaceId }).count<{ count: string }[]>('* as count'))[0].count),
      0,
    );
  });
});
