/**
 * Once per attempt (issue 21), as a property: for generated batch options (no calling window, the
 * contract's all-day window, or an arbitrary window in some time zone, open or closed now, with
 * recipients in time zones of their own, so windows that cross midnight in UTC; retry policies;
 * concurrency 1..50; a start in the past, in a moment or tomorrow), created through either of two
 * instances on one database, the calls placed for each number are exactly the attempts due for it:
 * the retry policy's attempts for an outcome it retries, one otherwise, none while its window is
 * closed or the batch has not started. Every call appears in its recipient's `call_ids`, and the
 * carrier was dialed once per call. The database enforces the rule itself: a second call for an
 * attempt that already has one is refused by a unique key.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { DateTime } from 'luxon';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, setWorkspace } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent } from '../helpers/calls.js';
import { batchCalls, createBatch, getBatch, sandboxNumbers, waitForBatch } from '../helpers/batches.js';

const RUNS = Number(process.env.BATCH_PROPERTY_RUNS ?? 20);
const ZONES = ['UTC', 'America/New_York', 'Asia/Tokyo', 'Pacific/Kiritimati', 'Etc/GMT+11', 'Australia/Adelaide'] as const;
/** Sandbox outcomes by the number's last four digits: busy, and refused at the dial request (failed). */
const OUTCOMES = { busy: '0002', failed: '0004' } as const;
type Outcome = keyof typeof OUTCOMES;

let a: TestService;
let b: TestService;
let tn: Tenant;
let agentId: string;
/** Numbers are never reused across runs (the carrier's log is per number). */
let nextNumber = 100;

before(async () => {
  const env = { ...FAST_CALLS, BATCH_CAPACITY_RETRY_MS: '100', BATCH_WAKE_DELAY_MS: '20' };
  a = await startTestService(env);
  b = await startTestService({ ...env, DATABASE_URL: a.service.db.url });
  tn = await tenant(a);
  await setWorkspace(a, tn.workspaceId, { concurrent_session_limit: 200, credit_balance_cents: 10_000_000 });
  agentId = await createPhoneAgent(a, tn, 'provider_a');
});

after(async () => {
  await b?.close();
  await a?.close();
});

const hhmm = (m: number) => `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;

const windowArb = fc.oneof(
  fc.constant(null),
  fc.constantFrom(...ZONES).map((timezone) => ({ start: '00:00', end: '23:59', timezone })),
  fc
    .tuple(fc.integer({ min: 0, max: 46 }), fc.integer({ min: 1, max: 47 }), fc.constantFrom(...ZONES))
    .map(([s, len, timezone]) => ({ start: hhmm(s * 30), end: hhmm(Math.min(s * 30 + len * 30, 23 * 60 + 59)), timezone })),
);

const caseArb = fc.record({
  recipients: fc.array(fc.record({ outcome: fc.constantFrom<Outcome>('busy', 'failed'), timezone: fc.option(fc.constantFrom(...ZONES), { nil: undefined }) }), {
    minLength: 1,
    maxLength: 4,
  }),
  window: windowArb,
  retry: fc.record({
    max_attempts: fc.integer({ min: 1, max: 3 }),
    retry_on: fc.subarray<Outcome>(['busy', 'failed']),
  }),
  concurrency: fc.integer({ min: 1, max: 50 }),
  start: fc.constantFrom('now', 'past', 'soon', 'tomorrow'),
  via: fc.constantFrom('a', 'b'),
});

type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

/** Whether `at` is inside the window in `zone`, and how far (minutes) it is from either edge. */
function windowAt(w: { start: string; end: string }, zone: string, at: Date): { open: boolean; margin: number } {
  const local = DateTime.fromJSDate(at, { zone });
  const m = local.hour * 60 + local.minute + local.second / 60;
  const toMin = (s: string) => Number(s.slice(0, 2)) * 60 + Number(s.slice(3, 5));
  const [start, end] = [toMin(w.start), toMin(w.end)];
  const edges = [start, end].map((e) => Math.min(Math.abs(m - e), 1440 - Math.abs(m - e)));
  return { open: m >= start && m < end, margin: Math.min(...edges) };
}

async function runCase(c: Case): Promise<void> {
  const now = new Date();
  const startAt = {
    now: undefined,
    past: new Date(now.getTime() - 3_600_000),
    soon: new Date(now.getTime() + 400),
    tomorrow: new Date(now.getTime() + 86_400_000),
  }[c.start];
  // Calls are due when the batch starts (at most a moment from now) and its window is open then.
  const dueAt = c.start === 'soon' ? new Date(now.getTime() + 400) : now;
  const people = c.recipients.map((r) => {
    const [to_number] = sandboxNumbers(OUTCOMES[r.outcome], 1, nextNumber++);
    const zone = r.timezone ?? c.window?.timezone ?? 'UTC';
    const state = c.window ? windowAt(c.window, zone, dueAt) : { open: true, margin: Infinity };
    const started = c.start !== 'tomorrow';
    const expected = !started || !state.open ? 0 : c.retry.retry_on.includes(r.outcome) ? c.retry.max_attempts : 1;
    return { ...r, to_number, zone, margin: state.margin, dialed: started && state.open, expected };
  });
  // A window edge within two minutes could pass during the run: that case says nothing.
  fc.pre(people.every((p) => p.margin > 2));
  const t = c.via === 'a' ? a : b;
  const res = await createBatch(t, tn, {
    agent_id: agentId,
    name: 'Property',
    recipients: people.map((p) => ({ to_number: p.to_number, ...(p.timezone ? { timezone: p.timezone } : {}) })),
    concurrency: c.concurrency,
    retry_policy: { max_attempts: c.retry.max_attempts, delay_seconds: 0, retry_on: c.retry.retry_on },
    ...(c.window ? { calling_window: c.window } : {}),
    ...(startAt ? { scheduled_at: startAt.toISOString() } : {}),
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const batchId = res.body.batch_id as string;
  const settled = (batch: Record<string, any>) =>
    c.start === 'tomorrow'
      ? batch.status === 'scheduled'
      : batch.recipients.every((r: Record<string, any>, i: number) =>
          people[i].dialed ? ['busy', 'failed'].includes(r.status) : r.status === 'scheduled' && new Date(r.next_attempt_at) > now,
        );
  const batch = await waitForBatch(t, tn, batchId, settled, 30_000);
  if (people.every((p) => p.dialed)) await waitForBatch(t, tn, batchId);
  const calls = await batchCalls(t, tn, batchId);
  const recorded = new Set(batch.recipients.flatMap((r: Record<string, any>) => r.call_ids as string[]));
  const dials = [...a.service.sandbox.carriers!.server.calls(), ...b.service.sandbox.carriers!.server.calls()];
  people.forEach((p, i) => {
    const placed = calls.filter((x) => x.to_number === p.to_number);
    assert.equal(placed.length, p.expected, `calls placed to ${p.to_number} (${p.outcome}, ${p.dialed ? 'due' : 'not due'})`);
    assert.equal(batch.recipients[i].attempts, p.expected, 'attempts as the recipient shows them');
    if (p.outcome === 'busy') assert.equal(dials.filter((d) => d.to === p.to_number).length, p.expected, `carrier dials of ${p.to_number}`);
  });
  for (const x of calls) assert.ok(recorded.has(x.call_id), `call ${x.call_id} is in its recipient's call_ids`);
  if (!people.every((p) => p.dialed)) {
    const canceled = await t.http.post(`/api/v1/batches/${batchId}/cancel`).set(bearer(tn.apiKey));
    assert.equal(canceled.status, 200, JSON.stringify(canceled.body));
  }
}

describe('once per recipient attempt', () => {
  it('the contract’s all-day window with three recipients and room for ten: each number called once', async () => {
    const numbers = sandboxNumbers(OUTCOMES.busy, 3, 990);
    const res = await createBatch(a, tn, {
      agent_id: agentId,
      name: 'All day',
      recipients: numbers.map((to_number) => ({ to_number, timezone: 'Asia/Tokyo' })),
      concurrency: 10,
      calling_window: { start: '00:00', end: '23:59', timezone: 'UTC' },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    // The recipients' zone decides (in the minute before Tokyo's midnight they wait for 00:00).
    const open = windowAt({ start: '00:00', end: '23:59' }, 'Asia/Tokyo', new Date()).open;
    const batch = await waitForBatch(
      a,
      tn,
      res.body.batch_id,
      open ? undefined : (x) => x.recipients.every((r: { status: string }) => r.status === 'scheduled'),
    );
    const calls = await batchCalls(a, tn, res.body.batch_id);
    assert.deepEqual(
      numbers.map((n) => calls.filter((x) => x.to_number === n).length),
      numbers.map(() => (open ? 1 : 0)),
    );
    assert.deepEqual(
      batch.recipients.map((r: { call_ids: string[] }) => r.call_ids.length),
      numbers.map(() => (open ? 1 : 0)),
    );
    if (!open) await a.http.post(`/api/v1/batches/${res.body.batch_id}/cancel`).set(bearer(tn.apiKey));
  });

  it('for generated options through two instances: calls placed equal the attempts due, per number', async () => {
    await fc.assert(fc.asyncProperty(caseArb, runCase), { numRuns: RUNS, endOnFailure: true });
  });

  it('the database refuses a second call for an attempt that already has one', async () => {
    const [to] = sandboxNumbers(OUTCOMES.busy, 1, 995);
    const res = await createBatch(a, tn, { agent_id: agentId, name: 'Key', recipients: [{ to_number: to }], concurrency: 1 });
    const batch = await waitForBatch(a, tn, res.body.batch_id);
    const [call] = await batchCalls(a, tn, res.body.batch_id);
    const knex = a.service.db.knex;
    const row = await knex('calls').where({ id: call.call_id }).first();
    const again = {
      ...Object.fromEntries(
        ['workspace_id', 'agent_id', 'batch_id', 'direction', 'provider', 'from_number', 'to_number', 'instruction', 'deadline_at'].map((k) => [k, row[k]]),
      ),
      id: `${row.id}x`,
      status: 'queued',
      batch_recipient_id: row.batch_recipient_id,
      attempt: row.attempt,
    };
    assert.ok(row.batch_recipient_id && row.attempt === 1, 'the call names its recipient and attempt');
    await assert.rejects(knex('calls').insert(again), (err: { code?: string }) => err.code === '23505');
    await assert.rejects(
      knex('calls').insert({ ...again, batch_recipient_id: null }),
      (err: { code?: string }) => err.code === '23514',
      'an attempt without its recipient',
    );
    const after = await getBatch(a, tn, res.body.batch_id);
    assert.deepEqual([batch.recipients[0].call_ids, after.recipients[0].attempts], [[call.call_id], 1]);
  });
});
