/**
 * Reservations: what a live conversation may still spend, held at admission and extended while it
 * runs, so the credit and plan minutes that live conversations hold together never exceed what the
 * workspace has. This module is the rule alone (pure, property-tested); the queries that apply it under
 * the workspace's lock are in reservation-store.ts, the timers of a live conversation in
 * reservation-watch.ts.
 *
 * A reservation is counted in whole metering minutes (METERING_MINUTE_S seconds each, 60 in
 * production): a minute held is one minute's price of credit (the conversation kind's per-minute
 * price) and one minute of the plan's monthly allowance. Conversations are billed per started minute,
 * so a conversation that holds N minutes may talk N minutes and costs at most N minutes' price.
 */
import type { UsageKind } from './terms.js';

/** Why a reservation is refused or cannot grow: the plan's minutes first, then credit (the checks' order). */
export type ReservationLimit = 'plan_limit' | 'insufficient_credit';

/** What one kind of conversation in one workspace asks for, and on what terms. */
export interface ReservationAsk {
  kind: UsageKind;
  /** Price of a minute of this kind of conversation (0: credit is not reserved). */
  centsPerMinute: number;
  /** Seconds in a metering minute. */
  minuteSeconds: number;
  /** Minutes the reservation should reach (a new one: the slice; an extension: held + slice), at most. */
  wantMinutes: number;
  /** The plan's monthly allowance in seconds; null: unlimited. */
  planSeconds: number | null;
  /** Usage that started at or after this counts toward the plan's allowance. */
  monthStart: Date;
  /**
   * How long the reservation lasts from now without renewal (database clock): a phone call's is its
   * slot's fixed term, a web session's is renewed by its instance's heartbeat.
   */
  expiryMs: number;
}

/** The workspace as the rule sees it, read under its lock. */
export interface WorkspaceFunds {
  balanceCents: number;
  /** Held by the workspace's other live reservations. */
  othersCents: number;
  othersSeconds: number;
  /** Plan seconds used this month by finished conversations. */
  usedSeconds: number;
}

export interface Grant {
  /** Minutes the reservation holds after this decision (never fewer than it held). */
  minutes: number;
  /** Set when fewer minutes than asked could be held, and why. */
  limitedBy: ReservationLimit | null;
}

/**
 * How many minutes a reservation may hold: as many as asked, but no more than the credit and the plan
 * time the other live reservations leave, and never fewer than it already holds (an extension that
 * cannot be granted keeps what it has; the conversation then ends when that runs out).
 */
export function grant(
  funds: WorkspaceFunds,
  ask: Pick<ReservationAsk, 'centsPerMinute' | 'minuteSeconds' | 'wantMinutes' | 'planSeconds'>,
  heldMinutes = 0,
): Grant {
  const byCredit = ask.centsPerMinute > 0 ? Math.floor(Math.max(0, funds.balanceCents - funds.othersCents) / ask.centsPerMinute) : Infinity;
  const byPlan = ask.planSeconds === null ? Infinity : Math.floor(Math.max(0, ask.planSeconds - funds.usedSeconds - funds.othersSeconds) / ask.minuteSeconds);
  const minutes = Math.max(heldMinutes, Math.min(ask.wantMinutes, byCredit, byPlan));
  const limitedBy: ReservationLimit | null = byPlan < ask.wantMinutes ? 'plan_limit' : byCredit < ask.wantMinutes ? 'insufficient_credit' : null;
  return { minutes, limitedBy: minutes < ask.wantMinutes ? limitedBy : null };
}

/** What `minutes` of a reservation hold. */
export function holding(minutes: number, ask: Pick<ReservationAsk, 'centsPerMinute' | 'minuteSeconds'>): { cents: number; seconds: number } {
  return { cents: minutes * ask.centsPerMinute, seconds: minutes * ask.minuteSeconds };
}

/**
 * What a finished conversation is billed: its time, but never beyond what its reservation covered (the
 * service ends it when the reservation runs out; the moment between that and the carrier's word that
 * the call is over is not charged), at every started minute. `reservedSeconds` null: it held none
 * (a conversation admitted before reservations existed).
 */
export function billable(
  elapsedMs: number,
  reservedSeconds: number | null,
  centsPerMinute: number,
  minuteSeconds: number,
): { billedMs: number; cents: number } {
  const billedMs = Math.max(0, reservedSeconds === null ? elapsedMs : Math.min(elapsedMs, reservedSeconds * 1000));
  return { billedMs, cents: Math.ceil(billedMs / (minuteSeconds * 1000)) * centsPerMinute };
}
