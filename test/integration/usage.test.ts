/**
 * Usage and limits as a developer reads them (issue 23): `GET /api/v1/usage` after real sandbox
 * calls (both carriers, answered and busy) and web sessions (voice and text), with exact billed
 * minutes, conversations and cost by day (UTC and another time zone) and by agent, never another
 * workspace's; the range rules (defaults, 92 days at most, `from` after `to`, bad dates and zones
 * refused with 422 and the parameter, nothing stored); and `GET /api/v1/limits` before, during and
 * after a live web session (its slot and reservation), as the operator changes the workspace, with
 * the destination policy as its own read gives it. Every answer is checked against the contract by
 * the service's response check (CONTRACT_CHECK=enforce).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DateTime } from 'luxon';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, connect, createAgent, mintSession, setWorkspace, waitFor, operator } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';

let t: TestService;
before(async () => {
  t = await startTestService({ ...FAST_CALLS, CALL_CENTS_PER_MINUTE: '10', REALTIME_CENTS_PER_MINUTE: '10', REALTIME_TEXT_CENTS_PER_MINUTE: '0' });
});
after(() => t.close());

type Figures = { conversations: number; minutes: number; billed_seconds: number; cost_cents: number };

async function usage(tn: Tenant, query: Record<string, string> = {}, token = tn.apiKey) {
  const res = await t.http.get('/api/v1/usage').query(query).set(bearer(token));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

async function limits(tn: Tenant, token = tn.apiKey) {
  const res = await t.http.get('/api/v1/limits').set(bearer(token));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

async function balance(tn: Tenant): Promise<number> {
  const res = await t.http.get(`/admin/v1/workspaces/${tn.workspaceId}`).set(operator);
  assert.equal(res.status, 200);
  return res.body.credit_balance_cents as number;
}

/** A placed call, once it ended: its agent, start (`created_at`: the day it counts on) and status. */
async function call(tn: Tenant, agentId: string, to: string) {
  const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const done = await waitForCall(t, tn, res.body.call_id);
  // Billed in the transaction that ends it: the usage counts it once the call reads terminal.
  return { agentId, startedAt: done.created_at as string, status: done.status as string, duration: done.duration as number };
}

/** A web session opened, held until it started, closed, and recorded (its record readable through the API). */
async function webSession(tn: Tenant, agentId: string, source: 'voice' | 'text') {
  const minted = await mintSession(t, tn, agentId, source);
  const c = connect(minted.ws_url);
  const started = await c.next('session_started', 10_000);
  await c.close();
  const id = started.session_id as string;
  const record = await waitFor(
    async () => {
      const res = await t.http.get(`/api/v1/realtime/conversations/${id}`).set(bearer(tn.apiKey));
      return res.status === 200 ? res.body : null;
    },
    15_000,
    `the record of ${id}`,
  );
  return { agentId, startedAt: record.created_at as string, duration: record.duration as number };
}

const zero = (): Figures => ({ conversations: 0, minutes: 0, billed_seconds: 0, cost_cents: 0 });
const figures = (f: Figures) => ({ conversations: f.conversations, minutes: f.minutes, cost_cents: f.cost_cents });

describe('GET /api/v1/usage after real calls and web sessions', () => {
  let a: Tenant;
  let b: Tenant;
  let phoneA: string;
  let phoneB: string;
  let web: string;
  let otherAgent: string;
  let calls: Array<Awaited<ReturnType<typeof call>>>;
  let sessions: Array<Awaited<ReturnType<typeof webSession>>>;

  before(async () => {
    [a, b] = await Promise.all([tenant(t, 'Usage A'), tenant(t, 'Usage B')]);
    [phoneA, phoneB, web, otherAgent] = await Promise.all([
      createPhoneAgent(t, a, 'provider_a'),
      createPhoneAgent(t, a, 'provider_b'),
      createAgent(t, a),
      createAgent(t, b),
    ]);
    // provider_a: one answered, one busy (0002: no answer, billed nothing); provider_b: one answered.
    calls = await Promise.all([call(a, phoneA, sandboxNumber()), call(a, phoneA, sandboxNumber('0002')), call(a, phoneB, sandboxNumber())]);
    assert.deepEqual(
      calls.map((c) => c.status),
      ['completed', 'busy', 'completed'],
    );
    sessions = [await webSession(a, web, 'voice'), await webSession(a, web, 'text')];
    // Another workspace's usage, which A never sees.
    await webSession(b, otherAgent, 'voice');
  });

  it('counts every conversation once, with billed minutes (every started minute) and cost, by day and by agent', async () => {
    const u = await usage(a);
    const today = DateTime.utc().toISODate()!;
    assert.equal(u.object, 'usage');
    assert.equal(u.timezone, 'UTC');
    assert.equal(u.to, today, 'the range ends today by default');
    assert.equal(u.from, DateTime.utc().minus({ days: 29 }).toISODate(), 'and spans 30 days');
    assert.equal(u.days.length, 30);
    assert.deepEqual(
      u.days.map((d: { date: string }) => d.date),
      Array.from({ length: 30 }, (_, i) => DateTime.fromISO(u.from, { zone: 'utc' }).plus({ days: i }).toISODate()),
      'every day of the range, oldest first',
    );

    // Each answered conversation lasted seconds: 1 billed minute each; the busy call 0. Phone calls
    // and voice sessions cost 10 cents a minute, text sessions nothing.
    assert.deepEqual(figures(u.totals.phone), { conversations: 3, minutes: 2, cost_cents: 20 });
    assert.deepEqual(figures(u.totals.web), { conversations: 2, minutes: 2, cost_cents: 10 });
    assert.deepEqual(figures(u.totals.all), { conversations: 5, minutes: 4, cost_cents: 30 });
    assert.equal(u.totals.all.cost_cents, 1000 - (await balance(a)), 'the cost is what was taken off the credit');
    const answered = calls.filter((c) => c.status === 'completed');
    assert.ok(u.totals.phone.billed_seconds <= answered.reduce((n, c) => n + c.duration + 1, 0));
    assert.equal(u.totals.all.billed_seconds, u.totals.phone.billed_seconds + u.totals.web.billed_seconds);

    // By day: each conversation on the UTC day it started; every other day zero.
    const expected = new Map<string, { phone: Figures; web: Figures }>();
    const dayOf = (iso: string, zone = 'utc') => DateTime.fromISO(iso).setZone(zone).toISODate()!;
    for (const c of calls) {
      const d = expected.get(dayOf(c.startedAt)) ?? { phone: zero(), web: zero() };
      d.phone.conversations += 1;
      d.phone.minutes += c.status === 'completed' ? 1 : 0;
      d.phone.cost_cents += c.status === 'completed' ? 10 : 0;
      expected.set(dayOf(c.startedAt), d);
    }
    for (const [i, s] of sessions.entries()) {
      const d = expected.get(dayOf(s.startedAt)) ?? { phone: zero(), web: zero() };
      d.web.conversations += 1;
      d.web.minutes += 1;
      d.web.cost_cents += i === 0 ? 10 : 0;
      expected.set(dayOf(s.startedAt), d);
    }
    for (const day of u.days) {
      const want = expected.get(day.date) ?? { phone: zero(), web: zero() };
      assert.deepEqual({ phone: figures(day.phone), web: figures(day.web) }, { phone: figures(want.phone), web: figures(want.web) }, day.date);
    }

    // By agent: most minutes first, then by id; only A's agents.
    const byAgent = Object.fromEntries(u.agents.map((x: { agent_id: string; phone: Figures; web: Figures }) => [x.agent_id, x]));
    assert.deepEqual(Object.keys(byAgent).sort(), [phoneA, phoneB, web].sort());
    assert.deepEqual(figures(byAgent[phoneA].phone), { conversations: 2, minutes: 1, cost_cents: 10 });
    assert.deepEqual(figures(byAgent[phoneA].web), { conversations: 0, minutes: 0, cost_cents: 0 });
    assert.deepEqual(figures(byAgent[phoneB].phone), { conversations: 1, minutes: 1, cost_cents: 10 });
    assert.deepEqual(figures(byAgent[web].web), { conversations: 2, minutes: 2, cost_cents: 10 });
    assert.deepEqual(figures(byAgent[web].phone), { conversations: 0, minutes: 0, cost_cents: 0 });
    assert.equal(u.agents[0].agent_id, web, 'the agent with the most minutes first');
    assert.deepEqual(
      u.agents.slice(1).map((x: { agent_id: string }) => x.agent_id),
      [phoneA, phoneB].sort(),
      'equal minutes: by id',
    );
  });

  it('the dashboard session reads the same usage', async () => {
    assert.deepEqual(await usage(a, {}, a.sessionToken), await usage(a));
  });

  it("another workspace's usage never appears, and it sees only its own", async () => {
    const ub = await usage(b);
    assert.deepEqual(figures(ub.totals.all), { conversations: 1, minutes: 1, cost_cents: 10 });
    assert.deepEqual(
      ub.agents.map((x: { agent_id: string }) => x.agent_id),
      [otherAgent],
    );
    const ua = await usage(a);
    assert.ok(!ua.agents.some((x: { agent_id: string }) => x.agent_id === otherAgent));
  });

  it('days are cut in the time zone asked for (the day each conversation started there)', async () => {
    for (const zone of ['Pacific/Kiritimati', 'America/Los_Angeles']) {
      const u = await usage(a, { timezone: zone });
      assert.equal(u.timezone, zone);
      assert.equal(u.to, DateTime.now().setZone(zone).toISODate(), `today in ${zone}`);
      const counts = new Map<string, number>();
      for (const s of [...calls, ...sessions]) {
        const d = DateTime.fromISO(s.startedAt).setZone(zone).toISODate()!;
        counts.set(d, (counts.get(d) ?? 0) + 1);
      }
      for (const day of u.days) assert.equal(day.phone.conversations + day.web.conversations, counts.get(day.date) ?? 0, `${zone} ${day.date}`);
      assert.equal(u.totals.all.conversations, 5);
    }
  });

  it('an explicit range: only the days asked for; a range without usage is all zeros', async () => {
    const day = DateTime.fromISO(calls[0].startedAt, { zone: 'utc' }).toISODate()!;
    const one = await usage(a, { from: day, to: day });
    assert.equal(one.days.length, 1);
    assert.equal(one.days[0].date, day);
    const earlier = await usage(a, { from: '2025-01-01', to: '2025-04-02' });
    assert.equal(earlier.days.length, 92, '92 days is the longest range');
    assert.deepEqual(earlier.totals.all, zero());
    assert.deepEqual(earlier.agents, []);
  });
});

describe('GET /api/v1/usage refuses ranges it cannot read, with the parameter, and stores nothing', () => {
  let tn: Tenant;
  before(async () => {
    tn = await tenant(t);
  });

  /** Every row the workspace has in the tables a read could touch. */
  async function stored() {
    const k = t.service.db.knex;
    return {
      usage: await k('usage_records').where({ workspace_id: tn.workspaceId }),
      workspace: await k('workspaces').where({ id: tn.workspaceId }).first(),
      reservations: await k('reservations').where({ workspace_id: tn.workspaceId }),
      policies: await k('destination_policies').where({ workspace_id: tn.workspaceId }),
    };
  }

  const REFUSED: Array<[string, Record<string, string>, string, string]> = [
    ['from after to', { from: '2026-03-02', to: '2026-03-01' }, 'invalid_range', 'from'],
    ['93 days', { from: '2026-01-01', to: '2026-04-03' }, 'invalid_range', 'from'],
    ['from long ago, to by default', { from: '2020-01-01' }, 'invalid_range', 'from'],
    ['a date that does not exist', { from: '2026-02-30' }, 'invalid_value', 'from'],
    ['not a date', { to: 'yesterday' }, 'invalid_value', 'to'],
    ['a timestamp where a day is asked', { to: '2026-03-01T10:00:00Z' }, 'invalid_value', 'to'],
    ['a time zone the database does not know', { timezone: 'Mars/Olympus_Mons' }, 'invalid_timezone', 'timezone'],
    // Known to the runtime's time zone data, not to PostgreSQL's (which cuts the days): once a 500.
    ['a time zone the runtime knows and PostgreSQL does not', { timezone: 'US/Pacific-New' }, 'invalid_timezone', 'timezone'],
    ['not a time zone name', { timezone: '+05:00' }, 'invalid_value', 'timezone'],
    ['an unknown parameter', { since: '2026-03-01' }, 'unknown_field', 'since'],
  ];
  for (const [what, query, code, param] of REFUSED) {
    it(`${what}: 422 ${code} naming '${param}'`, async () => {
      const before = await stored();
      const res = await t.http.get('/api/v1/usage').query(query).set(bearer(tn.apiKey));
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.equal(res.body.error.code, code, JSON.stringify(res.body));
      assert.equal(res.body.error.param, param);
      assert.deepEqual(await stored(), before, 'nothing stored or changed');
    });
  }

  it('without a credential: 401', async () => {
    const res = await t.http.get('/api/v1/usage');
    assert.equal(res.status, 401);
    assert.equal((await t.http.get('/api/v1/limits')).status, 401);
  });
});

describe('GET /api/v1/limits', () => {
  it('a new workspace: its plan, slots, credit and plan minutes, prices, caps and destination policy; reading stores nothing', async () => {
    const tn = await tenant(t);
    const l = await limits(tn);
    const policy = (await t.http.get('/api/v1/workspace/destination-policy').set(bearer(tn.apiKey))).body;
    const month = DateTime.utc().startOf('month');
    assert.deepEqual(l, {
      plan: 'trial',
      subscription_status: 'active',
      concurrency: { limit: 5, live: 0, live_phone_calls: 0, live_web_sessions: 0 },
      credit: { balance_cents: 1000, reserved_cents: 0, available_cents: 1000 },
      plan_minutes: {
        included: 600,
        used: 0,
        reserved: 0,
        left: 600,
        period_start: month.toISO({ suppressMilliseconds: false }).replace('+00:00', 'Z'),
        resets_at: month.plus({ months: 1 }).toISO({ suppressMilliseconds: false }).replace('+00:00', 'Z'),
      },
      prices: { phone_call_cents_per_minute: 10, web_session_cents_per_minute: 10, text_session_cents_per_minute: 0 },
      max_call_duration_seconds: 3600,
      web_session_creation: { per_hour: { limit: 60, used: 0 }, per_day: { limit: 500, used: 0 } },
      destination_policy: policy,
    });
    const rows = await t.service.db.knex('destination_policies').where({ workspace_id: tn.workspaceId });
    assert.deepEqual(rows, [], 'the default policy is read, not written');
    assert.deepEqual(await limits(tn, tn.sessionToken), l, 'the dashboard session reads the same');
  });

  it("a live web session holds a slot and its reservation; once it ends it is billed and the plan's minutes are used; another workspace sees none of it", async () => {
    const [tn, other] = await Promise.all([tenant(t), tenant(t)]);
    const agentId = await createAgent(t, tn);
    const minted = await mintSession(t, tn, agentId, 'voice');
    const c = connect(minted.ws_url);
    const started = await c.next('session_started', 10_000);
    const live = await limits(tn);
    assert.deepEqual(live.concurrency, { limit: 5, live: 1, live_phone_calls: 0, live_web_sessions: 1 });
    // A reservation holds RESERVATION_MINUTES (2) at 10 cents.
    assert.deepEqual(live.credit, { balance_cents: 1000, reserved_cents: 20, available_cents: 980 });
    assert.equal(live.plan_minutes.reserved, 2);
    assert.equal(live.plan_minutes.left, 598);
    assert.deepEqual(live.web_session_creation.per_hour, { limit: 60, used: 1 });
    assert.deepEqual(live.web_session_creation.per_day, { limit: 500, used: 1 });
    const theirs = await limits(other);
    assert.deepEqual(theirs.concurrency.live, 0);
    assert.deepEqual(theirs.credit, { balance_cents: 1000, reserved_cents: 0, available_cents: 1000 });
    assert.equal(theirs.web_session_creation.per_hour.used, 0);

    await c.close();
    await waitFor(async () => (await t.http.get(`/api/v1/realtime/conversations/${started.session_id}`).set(bearer(tn.apiKey))).status === 200, 15_000);
    const ended = await limits(tn);
    assert.deepEqual(ended.concurrency.live, 0);
    assert.deepEqual(ended.credit, { balance_cents: 990, reserved_cents: 0, available_cents: 990 });
    const u = await usage(tn);
    assert.equal(ended.plan_minutes.reserved, 0);
    assert.equal(ended.plan_minutes.used, Math.round((u.totals.all.billed_seconds / 60) * 100) / 100, 'the plan counts billed seconds');
    assert.equal(ended.plan_minutes.left, Math.round((600 - u.totals.all.billed_seconds / 60) * 100) / 100);
  });

  it("follows the operator's changes: the concurrency limit, an unlimited plan, a blocked subscription, the destination policy", async () => {
    const tn = await tenant(t);
    await setWorkspace(t, tn.workspaceId, { concurrent_session_limit: 7, plan: 'enterprise', subscription_status: 'past_due', credit_balance_cents: 250 });
    const res = await t.http
      .patch(`/admin/v1/workspaces/${tn.workspaceId}/destination-policy`)
      .set(operator)
      .send({ allowed_countries: ['US'], daily_call_cap: 3 });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const l = await limits(tn);
    assert.equal(l.plan, 'enterprise');
    assert.equal(l.subscription_status, 'past_due');
    assert.equal(l.concurrency.limit, 7);
    assert.deepEqual(l.credit, { balance_cents: 250, reserved_cents: 0, available_cents: 250 });
    assert.equal(l.plan_minutes.included, null, 'a plan without minutes is unlimited');
    assert.equal(l.plan_minutes.left, null);
    assert.deepEqual(l.destination_policy.allowed_countries, ['US']);
    assert.equal(l.destination_policy.daily_call_cap, 3);
  });
});
