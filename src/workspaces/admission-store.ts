/**
 * What admission reads and writes in PostgreSQL: a workspace's billing fields, its metered usage
 * (`usage_records`), and its concurrency slots (`session_leases`, one row per live web session or
 * phone call). Slot counts are taken under a per-workspace advisory lock and compared on the database
 * clock (now()), so instances sharing the database, whatever their own clocks, share one count.
 */
import type { Knex } from 'knex';

export interface WorkspaceBilling {
  id: string;
  plan: string;
  subscription_status: 'active' | 'past_due' | 'unpaid';
  credit_balance_cents: number;
  concurrent_session_limit: number;
}

export type UsageKind = 'web_session' | 'phone_call';

export interface UsageRecord {
  workspaceId: string;
  kind: UsageKind;
  /** The conversation's id (`conv_...`, `call_...`). */
  refId: string;
  seconds: number;
  cents: number;
  startedAt: Date;
}

export interface Lease {
  id: string;
  workspace_id: string;
  kind: string;
  instance_id: string;
}

/** Serialises slot decisions of one workspace across every instance (held until the transaction ends). */
export const SLOT_LOCK = 'session-lease';

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
   * Records the usage and takes its cost off the credit, in `trx` when given (so the caller's own
   * record and the charge commit together). A usage already recorded for the same conversation
   * changes nothing: returns false.
   */
  async meter(usage: UsageRecord, trx?: Knex.Transaction): Promise<boolean> {
    const run = async (t: Knex.Transaction) => {
      const inserted = await t('usage_records')
        .insert({
          workspace_id: usage.workspaceId,
          kind: usage.kind,
          ref_id: usage.refId,
          seconds: usage.seconds,
          cents: usage.cents,
          started_at: usage.startedAt,
        })
        .onConflict(['kind', 'ref_id'])
        .ignore()
        .returning('id');
      if (!inserted.length) return false;
      if (usage.cents > 0) {
        await t('workspaces')
          .where({ id: usage.workspaceId })
          .update({ credit_balance_cents: t.raw('credit_balance_cents - ?', [usage.cents]), updated_at: t.fn.now() });
      }
      return true;
    };
    return trx ? run(trx) : this.db.transaction(run);
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

  /**
   * Takes as many of `leases` (all of one workspace, in order) as the workspace has free slots, in
   * the caller's transaction, so the leases commit with what they are for; returns how many.
   */
  async acquireLeasesIn(trx: Knex.Transaction, workspaceId: string, leases: Lease[], limit: number, expiryMs: number): Promise<number> {
    if (!leases.length) return 0;
    await lockWorkspace(trx, SLOT_LOCK, workspaceId);
    const [{ count }] = await trx('session_leases')
      .where('workspace_id', workspaceId)
      .where('expires_at', '>', trx.fn.now())
      .count<{ count: string }[]>('* as count');
    const taking = leases.slice(0, Math.max(0, limit - Number(count)));
    if (taking.length) {
      await trx('session_leases').insert(
        taking.map((l) => ({ ...l, expires_at: trx.raw(`now() + ? * interval '1 millisecond'`, [expiryMs]), created_at: trx.fn.now() })),
      );
    }
    return taking.length;
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

  async releaseLease(id: string, trx?: Knex.Transaction): Promise<void> {
    await (trx ?? this.db)('session_leases').where({ id }).delete();
  }

  /** Deletes leases expired on the database clock. */
  async deleteExpiredLeases(): Promise<void> {
    await this.db('session_leases').where('expires_at', '<=', this.db.fn.now()).delete();
  }

  /** The workspace's concurrent-session limit now (undefined when the workspace is gone). */
  async sessionLimit(workspaceId: string): Promise<number | undefined> {
    const row = await this.db('workspaces').where({ id: workspaceId }).first('concurrent_session_limit');
    return row?.concurrent_session_limit as number | undefined;
  }
}
