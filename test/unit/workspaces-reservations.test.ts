/**
 * The reservation rule (src/workspaces/reservations.ts) as properties over generated funds and asks:
 * a grant never holds more than the credit and plan time the other live reservations leave (unless it
 * keeps what it already held), never takes back what is held, says why it fell short, and a finished
 * conversation is never billed beyond what its reservation covered.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { billable, grant, holding } from '../../src/workspaces/reservations.js';

const funds = fc.record({
  balanceCents: fc.integer({ min: -1000, max: 100_000 }),
  othersCents: fc.integer({ min: 0, max: 100_000 }),
  othersSeconds: fc.integer({ min: 0, max: 100_000 }),
  usedSeconds: fc.integer({ min: 0, max: 100_000 }),
});
const ask = fc.record({
  centsPerMinute: fc.integer({ min: 0, max: 100 }),
  minuteSeconds: fc.integer({ min: 1, max: 60 }),
  wantMinutes: fc.integer({ min: 1, max: 60 }),
  planSeconds: fc.option(fc.integer({ min: 0, max: 200_000 }), { nil: null }),
});

describe('grant', () => {
  it('holds no more than the funds others leave, never less than it held, and names the limit it hit', () => {
    fc.assert(
      fc.property(funds, ask, fc.integer({ min: 0, max: 60 }), (f, a, held) => {
        const g = grant(f, a, held);
        assert.ok(g.minutes >= held, 'never takes back what is held');
        assert.ok(g.minutes <= Math.max(held, a.wantMinutes), 'never more than asked');
        if (g.minutes > held) {
          const { cents, seconds } = holding(g.minutes, a);
          assert.ok(cents <= Math.max(0, f.balanceCents - f.othersCents), `holds ${cents} of ${f.balanceCents - f.othersCents} free cents`);
          if (a.planSeconds !== null) assert.ok(seconds <= a.planSeconds - f.usedSeconds - f.othersSeconds, 'within the plan time left');
        }
        assert.equal(g.limitedBy === null, g.minutes >= a.wantMinutes);
        if (g.limitedBy === 'insufficient_credit') assert.ok(a.centsPerMinute > 0, 'a free conversation is never short of credit');
      }),
    );
  });

  it('a new reservation gets every minute the free credit and plan time cover, up to what it asks', () => {
    fc.assert(
      fc.property(funds, ask, (f, a) => {
        const g = grant(f, a);
        const next = holding(g.minutes + 1, a);
        const creditCovers = a.centsPerMinute === 0 || next.cents <= f.balanceCents - f.othersCents;
        const planCovers = a.planSeconds === null || next.seconds <= a.planSeconds - f.usedSeconds - f.othersSeconds;
        assert.ok(g.minutes === a.wantMinutes || !creditCovers || !planCovers, 'one more minute would have fitted');
      }),
    );
  });
});

describe('billable', () => {
  it('bills every started minute of the time talked, never beyond the minutes reserved', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10_000_000 }),
        fc.integer({ min: 0, max: 120 }),
        fc.integer({ min: 0, max: 100 }),
        fc.integer({ min: 1, max: 60 }),
        (elapsedMs, minutes, price, minuteS) => {
          const b = billable(elapsedMs, minutes * minuteS, price, minuteS);
          assert.ok(b.cents <= minutes * price);
          assert.equal(b.cents, Math.ceil(Math.min(elapsedMs, minutes * minuteS * 1000) / (minuteS * 1000)) * price);
          assert.equal(billable(elapsedMs, null, price, minuteS).cents, Math.ceil(elapsedMs / (minuteS * 1000)) * price);
        },
      ),
    );
  });
});
