/**
 * Admission of conversations (web sessions and phone calls) into a workspace: its subscription, its
 * plan's monthly minutes, its credit, its concurrency slots, the reservation a live conversation holds
 * of the credit and plan minutes (reservations.ts), and the metering of what a finished conversation
 * used. The conversation domains ask here and map a refusal to their own answer (a close code, an HTTP
 * status, a rejected inbound call); none of them writes `workspaces` itself.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import type { AdmissionStore, UsageRecord, WorkspaceBilling } from './admission-store.js';
import type { ReservationTerms } from './terms.js';
import { billable, type Grant, type ReservationAsk } from './reservations.js';
import { ReservationWatch, type WatchTerms } from './reservation-watch.js';
import type { SlotKeeper } from './slots.js';

export type { WorkspaceBilling, UsageRecord, AdmitRefusal, Admitted } from './admission-store.js';
export type { ReservationTerms, UsageKind } from './terms.js';
export type { ReservationAsk, ReservationLimit } from './reservations.js';
export type { ReservationWatch, WatchTerms } from './reservation-watch.js';

/** Why a workspace cannot start a conversation now, in the order the checks run. */
export type BillingRefusal = 'subscription_inactive' | 'plan_limit' | 'insufficient_credit';

export interface AdmissionOptions {
  /** Conversation minutes per calendar month (UTC) by plan; a plan not listed is unlimited. */
  planMinutes: Record<string, number>;
  /** Seconds in a metering minute: the unit of prices, plan minutes and reservations (60; tests shorten it). */
  minuteSeconds: number;
  /** Minutes a reservation takes at a time (at admission, and each extension). */
  reservationMinutes: number;
  /** A live conversation asks for its next minutes this long before its reservation runs out. */
  renewBeforeMs: number;
}

const BLOCKED = new Set(['past_due', 'unpaid']);

export function monthStart(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
}

/** Cents for a conversation: every started minute (of `minuteSeconds`) at `centsPerMinute`. */
export function costOf(elapsedMs: number, centsPerMinute: number, minuteSeconds = 60): number {
  return Math.ceil(Math.max(0, elapsedMs) / (minuteSeconds * 1000)) * centsPerMinute;
}

export class WorkspaceAdmission {
  constructor(
    private readonly store: AdmissionStore,
    readonly slots: SlotKeeper,
    private readonly clock: Clock,
    private readonly opts: AdmissionOptions,
    private readonly log: Logger,
  ) {}

  /** The workspace's billing fields now; undefined when it no longer exists. */
  workspace(workspaceId: string): Promise<WorkspaceBilling | undefined> {
    return this.store.billing(workspaceId);
  }

  isBlocked(workspace: WorkspaceBilling): boolean {
    return BLOCKED.has(workspace.subscription_status);
  }

  /** The plan's monthly allowance in seconds; null: unlimited. */
  private planSeconds(plan: string): number | null {
    const minutes = this.opts.planMinutes[plan];
    return minutes === undefined ? null : minutes * this.opts.minuteSeconds;
  }

  /**
   * The first billing check that refuses, or null: subscription, then the plan's minutes this month
   * (at least one minute left), then credit (at least `minCreditCents`; 0 skips it, as for text
   * sessions). What live conversations hold is not counted here: that is the reservation's decision
   * at admission (a conversation refused only by others' reservations could run once they end).
   */
  async refusal(workspace: WorkspaceBilling, minCreditCents: number): Promise<BillingRefusal | null> {
    if (this.isBlocked(workspace)) return 'subscription_inactive';
    const allowance = this.planSeconds(workspace.plan);
    if (allowance !== null) {
      const used = await this.store.secondsSince(workspace.id, monthStart(this.clock.now()));
      if (allowance - used < this.opts.minuteSeconds) return 'plan_limit';
    }
    if (minCreditCents > 0 && workspace.credit_balance_cents < minCreditCents) return 'insufficient_credit';
    return null;
  }

  /** What a conversation of `terms` asks of `workspace`'s plan when it holds `heldMinutes`. */
  ask(plan: string, terms: ReservationTerms, heldMinutes = 0): ReservationAsk {
    const want = heldMinutes + this.opts.reservationMinutes;
    return {
      kind: terms.kind,
      centsPerMinute: terms.centsPerMinute,
      minuteSeconds: this.opts.minuteSeconds,
      wantMinutes: terms.maxMinutes === undefined ? want : Math.min(want, terms.maxMinutes),
      planSeconds: this.planSeconds(plan),
      monthStart: monthStart(this.clock.now()),
      expiryMs: terms.expiryMs,
    };
  }

  /** Minutes in which a conversation of `maxMs` at most fits. */
  minutesFor(maxMs: number): number {
    return Math.ceil(maxMs / (this.opts.minuteSeconds * 1000));
  }

  /** Extends a live conversation's reservation by a slice, as far as the workspace's funds go. */
  async extend(id: string, workspaceId: string, terms: ReservationTerms, heldMinutes: number): Promise<Grant> {
    const workspace = await this.store.billing(workspaceId);
    if (!workspace) return { minutes: heldMinutes, limitedBy: 'insufficient_credit' };
    return this.store.extendReservation(id, workspaceId, this.ask(workspace.plan, terms, heldMinutes));
  }

  /** The minutes a conversation's live reservation holds (0: none). */
  async reservedMinutes(id: string): Promise<number> {
    return (await this.store.reservation(id))?.minutes ?? 0;
  }

  /**
   * Starts the timers of a live conversation's reservation: extended a slice at a time before it runs
   * out, and `terms.onExhausted` once it ran out and could not be.
   */
  watch(terms: WatchTerms, log: Logger): ReservationWatch {
    const w = new ReservationWatch(
      (heldMinutes) => this.extend(terms.id, terms.workspaceId, terms, heldMinutes),
      this.clock,
      { minuteMs: this.opts.minuteSeconds * 1000, renewBeforeMs: this.opts.renewBeforeMs },
      terms,
      log,
    );
    w.start();
    return w;
  }

  /**
   * What a finished conversation is billed: its time up to what its reservation covered, every started
   * minute at `centsPerMinute`; `seconds` is what counts toward the plan, `minutes` the started minutes
   * the cents were priced on (what the usage read reports).
   */
  async bill(id: string, elapsedMs: number, centsPerMinute: number, trx?: Knex.Transaction): Promise<{ cents: number; seconds: number; minutes: number }> {
    const reserved = await this.store.reservation(id, trx);
    const b = billable(elapsedMs, reserved ? reserved.seconds : null, centsPerMinute, this.opts.minuteSeconds);
    return { cents: b.cents, seconds: Math.round(b.billedMs / 1000), minutes: Math.ceil(b.billedMs / (this.opts.minuteSeconds * 1000)) };
  }

  /**
   * Records a finished conversation's usage, charges it (once per conversation) and releases its
   * reservation; with `releaseSlot`, its fixed-term slot too (a phone call's, SlotKeeper.releaseFixed).
   */
  async meter(usage: UsageRecord, trx?: Parameters<AdmissionStore['meter']>[1], opts: { releaseSlot?: boolean } = {}): Promise<boolean> {
    const charged = await this.store.meter(usage, trx, opts);
    if (charged !== null && charged < usage.cents) {
      this.log.warn(
        { workspaceId: usage.workspaceId, refId: usage.refId, cost: usage.cents, charged },
        'usage charged only as far as the balance not held by other live conversations goes',
      );
    }
    return charged !== null;
  }
}
