/**
 * The daily calling window of a batch: outbound calls are placed only between `start` and `end`
 * (wall-clock time in the recipient's time zone) on the allowed weekdays. Validates a window and
 * finds the next instant at which calling is allowed, daylight-saving changes included.
 */
import { DateTime, FixedOffsetZone, IANAZone } from 'luxon';

export type Weekday = 'mon' | 'tue' | 'wed' | 'thu' | 'fri' | 'sat' | 'sun';

export interface CallingWindow {
  /** 'HH:MM', 24-hour clock */
  start: string;
  /** 'HH:MM', 24-hour clock, later than start */
  end: string;
  timezone: string;
  /** omitted: every day */
  days?: Weekday[];
}

export interface WindowProblem {
  field: 'start' | 'end' | 'timezone' | 'days';
  message: string;
}

/** Indexed by luxon's weekday number minus one (Monday = 1). */
const WEEKDAYS: readonly Weekday[] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
const HH_MM = /^\d{2}:\d{2}$/;
const DAYS_SEARCHED = 8;

export function isValidTimeZone(tz: string): boolean {
  return typeof tz === 'string' && (tz === 'UTC' || IANAZone.isValidZone(tz));
}

export function windowProblems(w: CallingWindow): WindowProblem[] {
  const problems: WindowProblem[] = [];
  const start = minuteOfDay(w.start);
  const end = minuteOfDay(w.end);
  if (start === null) problems.push({ field: 'start', message: 'start must be a time of day as HH:MM (24-hour clock), e.g. 09:00' });
  if (end === null) problems.push({ field: 'end', message: 'end must be a time of day as HH:MM (24-hour clock), e.g. 17:30' });
  if (start !== null && end !== null && end <= start) {
    problems.push({ field: 'end', message: 'end must be later than start on the same day; windows that run past midnight are not supported' });
  }
  if (!isValidTimeZone(w.timezone)) {
    problems.push({ field: 'timezone', message: `${JSON.stringify(w.timezone)} is not a known IANA time zone, e.g. America/New_York` });
  }
  if (w.days !== undefined) problems.push(...dayProblems(w.days));
  return problems;
}

function dayProblems(days: unknown): WindowProblem[] {
  if (!Array.isArray(days)) return [{ field: 'days', message: 'days must be a list of weekdays (mon, tue, wed, thu, fri, sat, sun)' }];
  if (days.length === 0) return [{ field: 'days', message: 'days must list at least one weekday; leave it out to allow every day' }];
  const problems: WindowProblem[] = [];
  const seen = new Set<unknown>();
  for (const day of days) {
    if (!WEEKDAYS.includes(day as Weekday)) {
      problems.push({ field: 'days', message: `${JSON.stringify(day)} is not a weekday; use mon, tue, wed, thu, fri, sat or sun` });
    } else if (seen.has(day)) {
      problems.push({ field: 'days', message: `days lists ${day} more than once` });
    }
    seen.add(day);
  }
  return problems;
}

function minuteOfDay(time: unknown): number | null {
  if (typeof time !== 'string' || !HH_MM.test(time)) return null;
  const hour = Number(time.slice(0, 2));
  const minute = Number(time.slice(3, 5));
  return hour <= 23 && minute <= 59 ? hour * 60 + minute : null;
}

/**
 * `now` itself when calling is allowed at `now`, else the next instant at which the window opens.
 * `timezone` (the recipient's zone) overrides the window's own. Throws RangeError for an invalid window.
 */
export function nextOpening(w: CallingWindow, now: Date, timezone?: string): Date {
  const zone = timezone ?? w.timezone;
  const problem = windowProblems({ ...w, timezone: zone })[0];
  if (problem) throw new RangeError(`invalid calling window: ${problem.message}`);

  const rule: Rule = {
    start: minuteOfDay(w.start) as number,
    end: minuteOfDay(w.end) as number,
    days: new Set(w.days ?? WEEKDAYS),
  };
  const local = DateTime.fromJSDate(now, { zone });
  if (isInside(rule, local)) return now;

  let day = local.startOf('day');
  for (let i = 0; i < DAYS_SEARCHED; i++, day = day.plus({ days: 1 })) {
    if (!rule.days.has(weekdayOf(day))) continue;
    const opening = openingsOn(day, rule.start).find((t) => t.toMillis() >= now.getTime() && isInside(rule, t));
    if (opening) return opening.toJSDate();
  }
  throw new RangeError(`the calling window never opens within ${DAYS_SEARCHED} days in ${zone}`);
}

interface Rule {
  start: number;
  end: number;
  days: Set<Weekday>;
}

function weekdayOf(t: DateTime): Weekday {
  return WEEKDAYS[t.weekday - 1];
}

function isInside(rule: Rule, t: DateTime): boolean {
  const minute = t.hour * 60 + t.minute;
  return rule.days.has(weekdayOf(t)) && minute >= rule.start && minute < rule.end;
}

/**
 * The instants on `day` at which the window may open, earliest first. Normally only the start time.
 * On a day with a clock change the start time may occur twice (clocks go back), or not at all (clocks
 * go forward past it: luxon then moves it later by the gap, but the window really opens at the jump),
 * and the jump back can re-open a window that had closed. The caller keeps the first candidate
 * that is inside the window.
 */
function openingsOn(day: DateTime, start: number): DateTime[] {
  const atStart = day.set({ hour: Math.floor(start / 60), minute: start % 60, second: 0, millisecond: 0 });
  const nextDay = day.plus({ days: 1 });
  const lastOffset = nextDay.minus({ milliseconds: 1 }).offset;
  if (day.offset === lastOffset) return [atStart];

  const atStartAfterChange = atStart.setZone(FixedOffsetZone.instance(lastOffset), { keepLocalTime: true }).setZone(day.zone);
  return [atStart, atStartAfterChange, clockChange(day, nextDay, lastOffset)].sort((a, b) => a.toMillis() - b.toMillis());
}

/** The first second of [from, to) whose UTC offset is `offset`, by bisection. */
function clockChange(from: DateTime, to: DateTime, offset: number): DateTime {
  let before = Math.floor(from.toSeconds());
  let after = Math.ceil(to.toSeconds());
  while (after - before > 1) {
    const middle = Math.floor((before + after) / 2);
    if (from.zone.offset(middle * 1000) === offset) after = middle;
    else before = middle;
  }
  return DateTime.fromSeconds(after, { zone: from.zone });
}
