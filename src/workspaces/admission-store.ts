/**
 * What admission reads and writes in PostgreSQL: a workspace's billing fields, its metered usage
 * (`usage_records`), its concurrency slots (`session_leases`, one row per live web session or phone
 * call) and the credit and plan minutes its live conversations hold (`reservations`,
 * reservation-store.ts). Slots and reservations are taken, and usage charged, under one per-workspace
 * advisory lock and compared on the database clock (now()), so instances sharing the database,
 * whatever their own clocks, share one count and one balance.
 */
import type { Knex } from 'knex';
import { grant, type Grant, type ReservationAsk, type ReservationLimit } from './reservations.js';
import type { UsageKind } from './terms.js';
import {
  deleteReservation,
  fundsOf,
  liveReservation,
  putReservation,
  putReservations,
  releasingReservation,
  type ReservationRow,
} from './reservation-store.js';

/** The delete of conversation `id`'s slot lease, unrun (to put in another statement's `with`). */
function releasingLease(db: Knex.Transaction | Knex, id: string): Knex.QueryBuilder {
  return db('session_leases').where({ id }).delete();
}

export interface WorkspaceBilling {
  id: string;
  plan: string;
  subscription_status: 'active' | 'past_due' | 'unpaid';
  credit_balance_cents: number;
  concurrent_session_limit: number;
}

export interface UsageRecord {
  workspaceId: string;
  kind: UsageKind;
  /** The conversation's id (`conv_...`, `call_...`). */
  refId: string;
  /** The agent of the conversation (the usage read groups by it). */
  agentId: string;
  seconds: number;
  /** Billed minutes: every started metering minute of the billed time (what `cents` was priced on). */
  minutes: number;
  cents: number;
  startedAt: Date;
}

export interface Lease {
  id: string;
  workspace_id: string;
  kind: string;
  instance_id: string;
}

/**
 * Serialises slot, reservation and charging decisions of one workspace across every instance (held
 * until the transaction ends). A transaction that also locks other domains' rows takes it last (a
 * batch's dispatch round holds its batch row first; a call's finaliser runs the batch hook before the
 * charge), so two transactions never wait on each other in opposite orders.
 */
export const SLOT_LOCK = 'session-lease';

/** Why a conversation is not admitted: its reservation (plan minutes, credit), then its slot. */
export type AdmitRefusal = ReservationLimit | 'concurrency';

/** Admitted: the minutes its reservation holds (0 when none was asked). */
export interface Admitted {
  minutes: number;
}

function lockWorkspace(trx: Knex.Transaction, purpose: string, workspaceId: string) {
  return trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`${purpose}:${workspaceId}`]);
}

export class AdmissionStore {
  constructor(private readonly db: Knex) {}

  billing(workspaceId: string): Promise<WorkspaceBilling | undefined> {
    return this.db('workspaces').where({ id: workspaceId }).first('id', 'plan', 'subscription_status', 'credit_balance_cents', 'concurrent_session_limit');
  }

  /** Seconds metered for the workspace since `since` (conversations that started since then). */
  async secondsSince(workspaceId: string, since: Date): Promise<number> {
    const [{ total }] = await this.db('usage_records')
      .where('workspace_id', workspaceId)
      .where('started_at', '>=', since)
      .sum<{ total: string | null }[]>('seconds as total');
    return Number(total ?? 0);
  }

  /**
   * Records the usage, takes its cost off the credit and releases the conversation's reservation, in
   * `trx` when given (so the caller's own record and the charge commit together). The charge never
   * takes the balance below zero or into credit that other live conversations hold (their
   * reservations); a cost beyond that is not collected. Returns the cents charged; null when a usage
   * was already recorded for the same conversation (nothing changes).
   */
  async meter(usage: UsageRecord, trx?: Knex.Transaction, opts: { releaseSlot?: boolean } = {}): Promise<number | null> {
    const run = async (t: Knex.Transaction) => {
      // A usage that costs nothing charges nothing whatever the balance: no lock and no read of the
      // funds (releasing its reservation only gives credit back, which needs no lock either).
      let cents = 0;
      if (usage.cents > 0) {
        await lockWorkspace(t, SLOT_LOCK, usage.workspaceId);
        const funds = await fundsOf(t, usage.workspaceId, { planSeconds: null, monthStart: usage.startedAt }, usage.refId);
        cents = Math.min(usage.cents, Math.max(0, (funds?.balanceCents ?? 0) - (funds?.othersCents ?? 0)));
      }
      // The usage row and the reservation's (and slot's) release in one statement (data-modifying CTEs).
      const released = t.with('released', releasingReservation(t, usage.refId));
      if (opts.releaseSlot) released.with('freed', releasingLease(t, usage.refId));
      const inserted: Array<{ id: unknown }> = await released
        .insert({
          workspace_id: usage.workspaceId,
          kind: usage.kind,
          ref_id: usage.refId,
          agent_id: usage.agentId,
          seconds: usage.seconds,
          minutes: usage.minutes,
          cents,
          started_at: usage.startedAt,
        })
        .into('usage_records')
        .onConflict(['kind', 'ref_id'])
        .ignore()
        .returning('id');
      if (!inserted.length) return null;
      if (cents > 0) {
        await t('workspaces')
          .where({ id: usage.workspaceId })
          .update({ credit_balance_cents: t.raw('credit_balance_cents - ?', [cents]), updated_at: t.fn.now() });
      }
      return cents;
    };
    return trx ? run(trx) : this.db.transaction(run);
  }

  /**
   * Admits a conversation: its reservation (`ask`: as many minutes as the credit and plan minutes
   * left by the other live reservations cover, at least one) and then a slot if fewer than `limit`
   * unexpired leases exist, both written in one transaction under the workspace's lock, or neither.
   */
  async admit(lease: Lease, limit: number, slotExpiryMs: number, ask: ReservationAsk): Promise<Admitted | AdmitRefusal> {
    return this.db.transaction(async (trx) => {
      const { taken, minutes, short } = await this.admitLocked(trx, lease.workspace_id, [lease], limit, slotExpiryMs, ask);
      return taken ? { minutes: minutes[0] } : short!;
    });
  }

  /**
   * Admits as many of `leases` (all of one workspace, in order) as the workspace has slots, credit
   * and plan minutes for, in the caller's transaction, so they commit with what they are for. Returns
   * how many were taken, the minutes each holds, and what stopped the rest (null: none was left).
   */
  async admitManyIn(
    trx: Knex.Transaction,
    workspaceId: string,
    leases: Lease[],
    limit: number,
    slotExpiryMs: number,
    ask: ReservationAsk,
  ): Promise<{ taken: number; minutes: number[]; short: AdmitRefusal | null }> {
    return this.admitLocked(trx, workspaceId, leases, limit, slotExpiryMs, ask);
  }

  private async admitLocked(trx: Knex.Transaction, workspaceId: string, leases: Lease[], limit: number, slotExpiryMs: number, ask: ReservationAsk) {
    const minutes: number[] = [];
    if (!leases.length) return { taken: 0, minutes, short: null };
    await lockWorkspace(trx, SLOT_LOCK, workspaceId);
    const funds = await fundsOf(trx, workspaceId, ask, null);
    if (!funds) return { taken: 0, minutes, short: 'insufficient_credit' as const };
    let short: AdmitRefusal | null = null;
    while (minutes.length < leases.length) {
      const g = grant(funds, ask);
      if (g.minutes < 1) {
        short = g.limitedBy ?? 'insufficient_credit';
        break;
      }
      minutes.push(g.minutes);
      funds.othersCents += g.minutes * ask.centsPerMinute;
      funds.othersSeconds += g.minutes * ask.minuteSeconds;
    }
    const [{ count }] = await trx('session_leases')
      .where('workspace_id', workspaceId)
      .where('expires_at', '>', trx.fn.now())
      .count<{ count: string }[]>('* as count');
    const free = Math.max(0, limit - Number(count));
    if (free < minutes.length) {
      minutes.length = free;
      short = 'concurrency';
    }
    const taking = leases.slice(0, minutes.length);
    if (taking.length) {
      await trx('session_leases').insert(
        taking.map((l) => ({ ...l, expires_at: trx.raw(`now() + ? * interval '1 millisecond'`, [slotExpiryMs]), created_at: trx.fn.now() })),
      );
      await putReservations(
        trx,
        workspaceId,
        ask,
        taking.map((l, i) => ({ id: l.id, minutes: minutes[i] })),
      );
    }
    return { taken: taking.length, minutes, short };
  }

  /**
   * Extends conversation `id`'s reservation toward `ask.wantMinutes` under the workspace's lock: as
   * far as the credit and plan minutes left by the other live reservations go, never below what it
   * holds. A reservation that expired meanwhile (its instance's heartbeat lagged) is taken again from
   * nothing, so the result may hold fewer minutes than the conversation thought it had.
   */
  async extendReservation(id: string, workspaceId: string, ask: ReservationAsk): Promise<Grant> {
    return this.db.transaction(async (trx) => {
      await lockWorkspace(trx, SLOT_LOCK, workspaceId);
      const held = (await liveReservation(trx, id))?.minutes ?? 0;
      const funds = await fundsOf(trx, workspaceId, ask, id);
      if (!funds) return { minutes: held, limitedBy: 'insufficient_credit' };
      const g = grant(funds, ask, held);
      if (g.minutes > 0) await putReservation(trx, id, workspaceId, ask, g.minutes);
      return g;
    });
  }

  /** The live reservation of a conversation (undefined: none, or expired). */
  reservation(id: string, trx?: Knex.Transaction): Promise<ReservationRow | undefined> {
    return liveReservation(trx ?? this.db, id);
  }

  /** Gives back a reservation whose conversation never ran (it is otherwise released when metered). */
  releaseReservation(id: string, trx?: Knex.Transaction): Promise<void> {
    return deleteReservation(trx ?? this.db, id);
  }

  /** Extends the given reservations to now() + expiryMs (database clock). */
  async renewReservations(ids: string[], expiryMs: number): Promise<void> {
    if (!ids.length) return;
    await this.db('reservations')
      .whereIn('id', ids)
      .update({ expires_at: this.db.raw(`now() + ? * interval '1 millisecond'`, [expiryMs]) });
  }

  /**
   * Takes a slot if fewer than `limit` unexpired leases of the workspace exist (atomic across
   * instances). Re-acquiring a lease that expired but was not yet deleted replaces it.
   */
  async acquireLease(lease: Lease, limit: number, expiryMs: number): Promise<boolean> {
    return this.db.transaction(async (trx) => {
      await lockWorkspace(trx, SLOT_LOCK, lease.workspace_id);
      const [{ count }] = await trx('session_leases')
        .where('workspace_id', lease.workspace_id)
        .where('expires_at', '>', trx.fn.now())
        .whereNot('id', lease.id)
        .count<{ count: string }[]>('* as count');
      if (Number(count) >= limit) return false;
      await trx('session_leases')
        .insert({ ...lease, expires_at: trx.raw(`now() + ? * interval '1 millisecond'`, [expiryMs]), created_at: trx.fn.now() })
        .onConflict('id')
        .merge(['expires_at', 'instance_id']);
      return true;
    });
  }

  /** Extends the given leases to now() + expiryMs (database clock); returns the ids that still existed. */
  async renewLeases(ids: string[], expiryMs: number): Promise<string[]> {
    if (!ids.length) return [];
    const rows: Array<{ id: string }> = await this.db('session_leases')
      .whereIn('id', ids)
      .update({ expires_at: this.db.raw(`now() + ? * interval '1 millisecond'`, [expiryMs]) })
      .returning('id');
    return rows.map((r) => r.id);
  }

  /** The workspace holding the lease `id` (a live conversation's slot), if one does. */
  async leaseWorkspace(id: string): Promise<string | undefined> {
    const row = await this.db('session_leases').where({ id }).first('workspace_id');
    return row?.workspace_id as string | undefined;
  }

  async releaseLease(id: string, trx?: Knex.Transaction): Promise<void> {
    await releasingLease(trx ?? this.db, id);
  }

  /** Deletes leases and reservations expired on the database clock (a dead instance's). */
  async deleteExpiredLeases(): Promise<void> {
    await this.db('session_leases').where('expires_at', '<=', this.db.fn.now()).delete();
    await this.db('reservations').where('expires_at', '<=', this.db.fn.now()).delete();
  }

  /** The workspace's concurrent-session limit now (undefined when the workspace is gone). */
  async sessionLimit(workspaceId: string): Promise<number | undefined> {
    const row = await this.db('workspaces').where({ id: workspaceId }).first('concurrent_session_limit');
    return row?.concurrent_session_limit as number | undefined;
  }
}
