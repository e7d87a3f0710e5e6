/**
 * Reservations as a property (issue 21), against PostgreSQL: for generated balances, prices, plan
 * allowances, slice sizes, concurrency limits and conversations (phone calls and web sessions of
 * generated lengths, starting at generated minutes, admitted, extended and billed concurrently through
 * two admission instances with their own connection pools), after every minute the live reservations
 * of the workspace never hold more than its balance or its plan minutes left, and the balance never
 * goes below zero; at the end every reservation is released and the balance is exactly the starting
 * balance less what was charged, each conversation billed its time up to what it held.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import pino from 'pino';
import type { Knex } from 'knex';
import { createKnex } from '../../src/db/database.js';
import { AdmissionStore } from '../../src/workspaces/admission-store.js';
import { SlotKeeper } from '../../src/workspaces/slots.js';
import { WorkspaceAdmission, monthStart, type ReservationTerms } from '../../src/workspaces/admission.js';
import { createTestDatabase } from '../helpers/database.js';

const RUNS = Number(process.env.RESERVATION_PROPERTY_RUNS ?? 25);
const MINUTE_S = 60;
const log = pino({ level: 'silent' });

let db: { url: string; drop(): Promise<void> };
const pools: Knex[] = [];

before(async () => {
  db = await createTestDatabase();
  pools.push(createKnex(db.url, { min: 0, max: 6 }), createKnex(db.url, { min: 0, max: 6 }));
});

after(async () => {
  for (const k of pools) await k.destroy();
  await db.drop();
});

/** One "instance": its own pool, store, slot keeper and admission. */
function instance(knex: Knex, planMinutes: Record<string, number>, slice: number) {
  const store = new AdmissionStore(knex);
  const slots = new SlotKeeper(store, { instanceId: `inst_${Math.random()}`, heartbeatMs: 60_000, expiryMs: 30_000 }, log);
  const clock = { now: () => new Date() };
  return new WorkspaceAdmission(store, slots, clock, { planMinutes, minuteSeconds: MINUTE_S, reservationMinutes: slice, renewBeforeMs: 1000 }, log);
}

interface Conversation {
  kind: 'phone_call' | 'web_session';
  /** Seconds it would talk if nothing stopped it. */
  lengthS: number;
  /** The minute it starts. */
  start: number;
}

const caseArb = fc.record({
  balance: fc.integer({ min: 0, max: 400 }),
  callPrice: fc.integer({ min: 0, max: 25 }),
  sessionPrice: fc.integer({ min: 0, max: 25 }),
  planMinutes: fc.option(fc.integer({ min: 0, max: 30 }), { nil: null }),
  usedMinutes: fc.integer({ min: 0, max: 10 }),
  slice: fc.integer({ min: 1, max: 4 }),
  limit: fc.integer({ min: 1, max: 8 }),
  conversations: fc.array(
    fc.record({
      kind: fc.constantFrom('phone_call' as const, 'web_session' as const),
      lengthS: fc.integer({ min: 0, max: 8 * MINUTE_S }),
      start: fc.integer({ min: 0, max: 4 }),
    }),
    { minLength: 1, maxLength: 10 },
  ),
});

interface Live {
  c: Conversation;
  id: string;
  held: number;
  /** Seconds it talks: its length, or less when its reservation ran out. */
  endsAtS: number | null;
  done: boolean;
  charged?: number;
  admission: WorkspaceAdmission;
  terms: ReservationTerms;
}

/** `preUsedS`: the plan seconds used before the case began (they may already exceed a small allowance). */
async function invariants(knex: Knex, workspaceId: string, planMinutes: number | null, preUsedS: number): Promise<void> {
  const ws = await knex('workspaces').where({ id: workspaceId }).first('credit_balance_cents');
  const [held] = await knex('reservations')
    .where({ workspace_id: workspaceId })
    .where('expires_at', '>', knex.fn.now())
    .select(knex.raw('coalesce(sum(cents), 0)::int as cents'), knex.raw('coalesce(sum(seconds), 0)::int as seconds'));
  const balance = Number(ws.credit_balance_cents);
  assert.ok(balance >= 0, `balance ${balance}`);
  assert.ok(held.cents <= balance, `reservations hold ${held.cents} cents of a balance of ${balance}`);
  if (planMinutes !== null) {
    const [{ used }] = await knex('usage_records')
      .where({ workspace_id: workspaceId })
      .where('started_at', '>=', monthStart(new Date()))
      .select(knex.raw('coalesce(sum(seconds), 0)::int as used'));
    const allowance = Math.max(planMinutes * MINUTE_S, preUsedS);
    assert.ok(used + held.seconds <= allowance, `plan: ${used} s used and ${held.seconds} s held of ${allowance} s`);
  }
}

describe('reservations (property, PostgreSQL, two instances)', () => {
  it('live reservations never exceed the balance or the plan minutes left; the balance never goes below zero; each conversation is billed what it used', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(caseArb, async (k) => {
        n += 1;
        const workspaceId = `ws_prop_${process.pid}_${n}_${Date.now()}`;
        const plan = k.planMinutes === null ? 'enterprise' : 'trial';
        const planMinutes: Record<string, number> = k.planMinutes === null ? {} : { trial: k.planMinutes };
        const knex = pools[0];
        await knex('workspaces').insert({
          id: workspaceId,
          name: 'Property',
          plan,
          subscription_status: 'active',
          credit_balance_cents: k.balance,
          concurrent_session_limit: k.limit,
        });
        if (k.usedMinutes) {
          await knex('usage_records').insert({
            workspace_id: workspaceId,
            kind: 'web_session',
            ref_id: `conv_used_${workspaceId}`,
            seconds: k.usedMinutes * MINUTE_S,
            minutes: k.usedMinutes,
            cents: 0,
            started_at: new Date(),
          });
        }
        const admissions = pools.map((p) => instance(p, planMinutes, k.slice));
        const lives: Live[] = [];
        const lastMinute = Math.max(...k.conversations.map((c) => c.start)) + 10;
        for (let minute = 0; minute <= lastMinute; minute++) {
          // Every conversation's move this minute runs concurrently, half of them through each instance.
          await Promise.all([
            ...k.conversations
              .map((c, i) => ({ c, i }))
              .filter(({ c }) => c.start === minute)
              .map(async ({ c, i }) => {
                const admission = admissions[i % 2];
                const terms: ReservationTerms =
                  c.kind === 'phone_call'
                    ? { kind: 'phone_call', centsPerMinute: k.callPrice, expiryMs: 3_600_000, maxMinutes: 8 }
                    : { kind: 'web_session', centsPerMinute: k.sessionPrice, expiryMs: 60_000 };
                const id = `${c.kind === 'phone_call' ? 'call' : 'conv'}_${workspaceId}_${i}`;
                const ask = admission.ask(plan, terms);
                const admitted = await admission.slots.admitFixed(id, workspaceId, k.limit, 3_600_000, ask, c.kind);
                if (typeof admitted === 'string') return;
                lives.push({ c, id, held: admitted.minutes, endsAtS: null, done: false, admission, terms });
              }),
            ...lives
              .filter((l) => !l.done)
              .map(async (l) => {
                const elapsedS = (minute - l.c.start) * MINUTE_S;
                const talks = l.endsAtS ?? l.c.lengthS;
                if (elapsedS >= talks) {
                  // It ended within the last minute: billed up to what it held, its slot and reservation released.
                  const bill = await l.admission.bill(l.id, talks * 1000, l.terms.centsPerMinute);
                  assert.ok(bill.cents <= l.held * l.terms.centsPerMinute, 'never billed beyond its reservation');
                  assert.equal(bill.cents, Math.ceil(talks / MINUTE_S) * l.terms.centsPerMinute, 'billed every started minute it talked');
                  await l.admission.meter({
                    workspaceId,
                    kind: l.c.kind,
                    refId: l.id,
                    agentId: 'agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8R',
                    seconds: bill.seconds,
                    minutes: bill.minutes,
                    cents: bill.cents,
                    startedAt: new Date(),
                  });
                  await l.admission.slots.releaseFixed(l.id);
                  l.charged = bill.cents;
                  l.done = true;
                  return;
                }
                // Talking into the next minute beyond what it holds: extend, or end when it runs out.
                if (elapsedS + MINUTE_S > l.held * MINUTE_S && l.c.lengthS > l.held * MINUTE_S) {
                  const g = await l.admission.extend(l.id, workspaceId, l.terms, l.held);
                  assert.ok(g.minutes >= l.held, 'an extension never takes back what is held');
                  l.held = g.minutes;
                  if (l.c.lengthS > l.held * MINUTE_S) l.endsAtS = l.held * MINUTE_S;
                }
              }),
          ]);
          await invariants(knex, workspaceId, k.planMinutes, k.usedMinutes * MINUTE_S);
        }
        assert.ok(
          lives.every((l) => l.done),
          'every conversation ended',
        );
        const left = await knex('reservations').where({ workspace_id: workspaceId }).count<{ count: string }[]>('* as count');
        assert.equal(Number(left[0].count), 0, 'every reservation released');
        const ws = await knex('workspaces').where({ id: workspaceId }).first('credit_balance_cents');
        const charged = lives.reduce((sum, l) => sum + (l.charged ?? 0), 0);
        assert.equal(Number(ws.credit_balance_cents), k.balance - charged, 'the balance is the start less what was charged');
        // Something was admitted whenever the workspace could pay for a first minute of it.
        if (k.conversations.length && lives.length === 0) {
          const cheapest = Math.min(...k.conversations.map((c) => (c.kind === 'phone_call' ? k.callPrice : k.sessionPrice)));
          const planLeft = k.planMinutes === null ? Infinity : k.planMinutes - k.usedMinutes;
          assert.ok(cheapest > k.balance || planLeft < 1, 'a conversation the workspace could pay for was refused');
        }
      }),
      { numRuns: RUNS },
    );
  });
});
