/**
 * Admission of conversations (web sessions and phone calls) into a workspace: its subscription, its
 * plan's monthly minutes, its credit, its concurrency slots, and the metering of what a finished
 * conversation used. The conversation domains ask here and map a refusal to their own answer (a
 * close code, an HTTP status, a rejected inbound call); none of them writes `workspaces` itself.
 */
import type { Clock } from '../lib/clock.js';
import type { AdmissionStore, UsageRecord, WorkspaceBilling } from './admission-store.js';
import type { SlotKeeper } from './slots.js';

export type { WorkspaceBilling, UsageKind, UsageRecord } from './admission-store.js';

/** Why a workspace cannot start a conversation now, in the order the checks run. */
export type BillingRefusal = 'subscription_inactive' | 'plan_limit' | 'insufficient_credit';

export interface AdmissionOptions {
  /** Conversation minutes per calendar month (UTC) by plan; a plan not listed is unlimited. */
  planMinutes: Record<string, number>;
}

const BLOCKED = new Set(['past_due', 'unpaid']);

export function monthStart(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
}

/** Cents for a conversation: every started minute at `centsPerMinute`. */
export function costOf(elapsedMs: number, centsPerMinute: number): number {
  return Math.ceil(Math.max(0, elapsedMs) / 60_000) * centsPerMinute;
}

export class WorkspaceAdmission {
  constructor(
    private readonly store: AdmissionStore,
    readonly slots: SlotKeeper,
    private readonly clock: Clock,
    private readonly opts: AdmissionOptions,
  ) {}

  /** The workspace's billing fields now; undefined when it no longer exists. */
  workspace(workspaceId: string): Promise<WorkspaceBilling | undefined> {
    return this.store.billing(workspaceId);
  }

  isBlocked(workspace: WorkspaceBilling): boolean {
    return BLOCKED.has(workspace.subscription_status);
  }

  /**
   * The first billing check that refuses, or null: subscription, then the plan's minutes this month,
   * then credit (at least `minCreditCents`; 0 skips it, as for text sessions).
   */
  async refusal(workspace: WorkspaceBilling, minCreditCents: number): Promise<BillingRefusal | null> {
    if (this.isBlocked(workspace)) return 'subscription_inactive';
    const minutes = this.opts.planMinutes[workspace.plan];
    if (minutes !== undefined) {
      const used = await this.store.secondsSince(workspace.id, monthStart(this.clock.now()));
      if (used >= minutes * 60) return 'plan_limit';
    }
    if (minCreditCents > 0 && workspace.credit_balance_cents < minCreditCents) return 'insufficient_credit';
    return null;
  }

  /** Records a finished conversation's usage and charges it (once per conversation). */
  meter(usage: UsageRecord, trx?: Parameters<AdmissionStore['meter']>[1]): Promise<boolean> {
    return this.store.meter(usage, trx);
  }
}
