import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isValidTimeZone, nextOpening, windowProblems, type CallingWindow } from '../../src/batches/calling-window.js';

const NY = 'America/New_York';
const weekdays: CallingWindow['days'] = ['mon', 'tue', 'wed', 'thu', 'fri'];
const at = (iso: string) => new Date(iso);
const opening = (w: CallingWindow, now: string, timezone?: string) => nextOpening(w, at(now), timezone).toISOString();

describe('calling window: nextOpening', () => {
  const nineToFive: CallingWindow = { start: '09:00', end: '17:00', timezone: NY };

  it('returns now itself inside the window, including exactly at the start', () => {
    const now = at('2026-03-10T15:30:00Z'); // Tue 11:30 EDT
    assert.equal(nextOpening(nineToFive, now), now);
    const atStart = at('2026-03-10T13:00:00Z'); // 09:00 EDT
    assert.equal(nextOpening(nineToFive, atStart), atStart);
  });

  it('opens later the same day before the start', () => {
    assert.equal(opening(nineToFive, '2026-03-10T11:00:00Z'), '2026-03-10T13:00:00.000Z'); // 07:00 EDT
  });

  it('opens the next day at or after the end', () => {
    assert.equal(opening(nineToFive, '2026-03-10T21:00:00Z'), '2026-03-11T13:00:00.000Z'); // 17:00 EDT exactly
    assert.equal(opening(nineToFive, '2026-03-11T02:00:00Z'), '2026-03-11T13:00:00.000Z'); // 22:00 EDT
  });

  it('skips days that are not allowed', () => {
    const w: CallingWindow = { ...nineToFive, days: weekdays };
    assert.equal(opening(w, '2026-03-13T22:00:00Z'), '2026-03-16T13:00:00.000Z'); // Fri 18:00 -> Mon 09:00
    assert.equal(opening(w, '2026-03-14T15:00:00Z'), '2026-03-16T13:00:00.000Z'); // Sat 11:00 -> Mon 09:00
    assert.equal(opening({ ...w, days: ['wed'] }, '2026-03-11T14:00:00Z'), '2026-03-11T14:00:00.000Z'); // Wed 10:00 inside
    assert.equal(opening({ ...w, days: ['wed'] }, '2026-03-11T22:00:00Z'), '2026-03-18T13:00:00.000Z'); // a week later
  });

  it('uses the weekday of the local date, not of UTC', () => {
    // Sat 2026-03-14 01:00 UTC is still Friday 21:00 in New York: the next weekday opening is Monday.
    assert.equal(opening({ ...nineToFive, days: weekdays }, '2026-03-14T01:00:00Z'), '2026-03-16T13:00:00.000Z');
    // Mon 2026-03-16 00:30 in Tokyo is Sunday in UTC; inside a Tokyo window starting at 00:00.
    const tokyo: CallingWindow = { start: '00:00', end: '08:00', timezone: 'Asia/Tokyo', days: ['mon'] };
    assert.equal(opening(tokyo, '2026-03-15T15:30:00Z'), '2026-03-15T15:30:00.000Z');
  });

  it('gives different answers in different zones for the same instant', () => {
    const now = '2026-03-10T12:00:00Z'; // 08:00 in New York, 21:00 in Tokyo
    assert.equal(opening(nineToFive, now), '2026-03-10T13:00:00.000Z');
    assert.equal(opening({ ...nineToFive, timezone: 'Asia/Tokyo' }, now), '2026-03-11T00:00:00.000Z');
  });

  it("uses the recipient's zone when given instead of the window's", () => {
    const now = '2026-03-10T12:00:00Z';
    assert.equal(opening(nineToFive, now, 'Asia/Tokyo'), '2026-03-11T00:00:00.000Z');
    assert.equal(opening(nineToFive, now, 'UTC'), '2026-03-10T12:00:00.000Z');
    assert.equal(opening({ ...nineToFive, timezone: 'Not/AZone' }, now, 'Europe/Berlin'), '2026-03-10T12:00:00.000Z');
  });

  it('refuses to compute with an invalid window or zone', () => {
    assert.throws(() => nextOpening({ ...nineToFive, timezone: 'Mars/Olympus' }, at('2026-03-10T12:00:00Z')), RangeError);
    assert.throws(() => nextOpening(nineToFive, at('2026-03-10T12:00:00Z'), 'nowhere'), RangeError);
    assert.throws(() => nextOpening({ ...nineToFive, end: '08:00' }, at('2026-03-10T12:00:00Z')), RangeError);
  });

  describe('daylight saving in America/New_York', () => {
    // 2026-03-08: clocks jump from 02:00 EST (07:00Z) to 03:00 EDT.
    it('spring forward: a 01:30 start is unaffected', () => {
      const w: CallingWindow = { start: '01:30', end: '04:00', timezone: NY };
      assert.equal(opening(w, '2026-03-08T05:00:00Z'), '2026-03-08T06:30:00.000Z'); // 01:30 EST
      const inGap = at('2026-03-08T07:10:00Z'); // 03:10 EDT
      assert.equal(nextOpening(w, inGap), inGap);
      assert.equal(opening(w, '2026-03-08T08:00:00Z'), '2026-03-09T05:30:00.000Z'); // 04:00 EDT -> 01:30 EDT next day
    });

    it('spring forward: a 02:30 start that does not exist opens when the clocks jump', () => {
      const w: CallingWindow = { start: '02:30', end: '05:00', timezone: NY };
      assert.equal(opening(w, '2026-03-08T05:00:00Z'), '2026-03-08T07:00:00.000Z'); // 03:00 EDT
      assert.equal(opening({ ...w, end: '03:15' }, '2026-03-08T05:00:00Z'), '2026-03-08T07:00:00.000Z');
      // 02:00-03:00 does not happen at all that day: the next opening is on the 9th.
      assert.equal(opening({ ...w, start: '02:00', end: '03:00' }, '2026-03-08T05:00:00Z'), '2026-03-09T06:00:00.000Z');
      // The day after is a normal day again.
      assert.equal(opening(w, '2026-03-08T12:00:00Z'), '2026-03-09T06:30:00.000Z'); // 02:30 EDT
    });

    // 2026-11-01: clocks go back from 02:00 EDT (06:00Z) to 01:00 EST; 01:00-02:00 happens twice.
    it('fall back: a 01:30 start opens at its first occurrence, and again at the second', () => {
      const w: CallingWindow = { start: '01:30', end: '02:30', timezone: NY };
      assert.equal(opening(w, '2026-11-01T04:00:00Z'), '2026-11-01T05:30:00.000Z'); // 01:30 EDT
      const short: CallingWindow = { ...w, end: '01:40' };
      assert.equal(opening(short, '2026-11-01T05:50:00Z'), '2026-11-01T06:30:00.000Z'); // 01:50 EDT -> 01:30 EST
      assert.equal(opening(short, '2026-11-01T06:20:00Z'), '2026-11-01T06:30:00.000Z'); // 01:20 EST -> 01:30 EST
      assert.equal(opening(short, '2026-11-01T06:45:00Z'), '2026-11-02T06:30:00.000Z'); // 01:45 EST -> next day
    });

    it('fall back: a window closed at the end of the first 01:00-02:00 opens again when the clocks go back', () => {
      const w: CallingWindow = { start: '01:00', end: '01:30', timezone: NY };
      assert.equal(opening(w, '2026-11-01T05:40:00Z'), '2026-11-01T06:00:00.000Z'); // 01:40 EDT -> 01:00 EST
    });

    it('fall back: a 02:30 start happens once, in EST', () => {
      const w: CallingWindow = { start: '02:30', end: '04:00', timezone: NY };
      assert.equal(opening(w, '2026-11-01T04:00:00Z'), '2026-11-01T07:30:00.000Z');
      assert.equal(opening(w, '2026-11-01T06:30:00Z'), '2026-11-01T07:30:00.000Z'); // 01:30 EST
    });

    it('never answers before now and always inside the window, minute by minute through both change days', () => {
      for (const [day, starts] of [
        ['2026-03-08', ['01:30', '02:00', '02:30', '03:00']],
        ['2026-11-01', ['00:30', '01:00', '01:30', '02:30']],
      ] as const) {
        for (const start of starts) {
          const w: CallingWindow = { start, end: `0${Number(start[1]) + 1}:${start.slice(3)}`, timezone: NY };
          const from = Date.parse(`${day}T03:00:00Z`);
          for (let t = from; t < from + 8 * 3600_000; t += 5 * 60_000) {
            const result = nextOpening(w, new Date(t));
            assert.ok(result.getTime() >= t, `${start} at ${new Date(t).toISOString()}`);
            assert.equal(nextOpening(w, result).getTime(), result.getTime(), `${start}: ${result.toISOString()} is inside`);
          }
        }
      }
    });
  });
});

describe('calling window: validation', () => {
  it('accepts a valid window, with or without days', () => {
    assert.deepEqual(windowProblems({ start: '00:00', end: '23:59', timezone: 'Europe/Berlin' }), []);
    assert.deepEqual(windowProblems({ start: '09:00', end: '17:00', timezone: 'UTC', days: ['sat', 'sun'] }), []);
  });

  it('knows IANA time zones and UTC', () => {
    for (const tz of ['UTC', 'America/New_York', 'Asia/Tokyo', 'Australia/Lord_Howe']) assert.ok(isValidTimeZone(tz), tz);
    for (const tz of ['', 'Mars/Olympus', 'GMT+25', 'America/New York']) assert.ok(!isValidTimeZone(tz), tz);
  });

  it('reports times that are not HH:MM on a 24-hour clock', () => {
    for (const bad of ['9:00', '24:00', '12:60', '12:5', '12-00', ' 09:00', '09:00 ', '0900', '']) {
      assert.deepEqual(
        windowProblems({ start: bad, end: '23:00', timezone: 'UTC' }).map((p) => p.field),
        ['start'],
        JSON.stringify(bad),
      );
      assert.deepEqual(
        windowProblems({ start: '00:00', end: bad, timezone: 'UTC' }).map((p) => p.field),
        ['end'],
        JSON.stringify(bad),
      );
    }
  });

  it('reports an end that is not later than the start', () => {
    for (const [start, end] of [
      ['10:00', '10:00'],
      ['22:00', '06:00'],
    ]) {
      const problems = windowProblems({ start, end, timezone: 'UTC' });
      assert.deepEqual(
        problems.map((p) => p.field),
        ['end'],
      );
      assert.match(problems[0].message, /later than start/);
    }
  });

  it('reports an invalid time zone', () => {
    assert.deepEqual(
      windowProblems({ start: '09:00', end: '17:00', timezone: 'Europe/Atlantis' }).map((p) => p.field),
      ['timezone'],
    );
  });

  it('reports empty, duplicate and unknown days', () => {
    const w = { start: '09:00', end: '17:00', timezone: 'UTC' };
    assert.deepEqual(
      windowProblems({ ...w, days: [] }).map((p) => p.field),
      ['days'],
    );
    const dup = windowProblems({ ...w, days: ['mon', 'tue', 'mon'] });
    assert.deepEqual(
      dup.map((p) => p.field),
      ['days'],
    );
    assert.match(dup[0].message, /mon more than once/);
    assert.deepEqual(
      windowProblems({ ...w, days: ['funday' as never] }).map((p) => p.field),
      ['days'],
    );
  });

  it('reports every problem at once', () => {
    assert.deepEqual(
      windowProblems({ start: '25:00', end: '7', timezone: 'nowhere', days: [] }).map((p) => p.field),
      ['start', 'end', 'timezone', 'days'],
    );
  });
});
