/**
 * Destination policies and the daily call counts in PostgreSQL (migration 016). The column defaults
 * are the default policy: a workspace's row is written when the operator first changes its policy or
 * the `calls` trigger first counts a call of it, never by a read (a refused request changes nothing
 * stored). The count of calls placed is written only by that trigger, in the transaction that inserts
 * the calls.
 */
import type { Knex } from 'knex';
import type { NumberKind } from './numbers.js';

export interface PolicyRow {
  workspace_id: string;
  allowed_countries: string[] | null;
  allowed_number_types: NumberKind[];
  daily_call_cap: number | null;
  allowed_sip_domains: string[];
  updated_at: Date;
}

export interface DayUsage {
  placed: number;
  /** The next 00:00 UTC on the database's clock. */
  resetsAt: Date;
}

export type PolicyChanges = Partial<Pick<PolicyRow, 'allowed_countries' | 'allowed_number_types' | 'daily_call_cap' | 'allowed_sip_domains'>>;

/** The constraint the calls trigger names when an insert would pass the daily cap. */
export const DAILY_CAP_CONSTRAINT = 'destination_daily_call_cap';

export class DestinationStore {
  constructor(readonly knex: Knex) {}

  /** The workspace's policy (the default one while it has no row); undefined when there is no such workspace. */
  async policy(workspaceId: string, db: Knex | Knex.Transaction = this.knex): Promise<PolicyRow | undefined> {
    const found = await db<PolicyRow>('destination_policies').where({ workspace_id: workspaceId }).first();
    return found ?? this.defaults(workspaceId, db);
  }

  /**
   * The default policy as the column defaults give it, read by inserting the row in a savepoint that is
   * rolled back: the defaults stay written once, in the migration, and a read stores nothing. A policy
   * never changed was last updated when its workspace was created. Concurrent first reads and first
   * calls of a workspace meet on the unique key: the insert waits for the other and does nothing.
   */
  private async defaults(workspaceId: string, db: Knex | Knex.Transaction): Promise<PolicyRow | undefined> {
    const read = Symbol('defaults read');
    let row: PolicyRow | undefined;
    await db
      .transaction(async (sp) => {
        const { rows } = await sp.raw<{ rows: PolicyRow[] }>(
          'insert into destination_policies (workspace_id, updated_at) select id, created_at from workspaces where id = ? on conflict (workspace_id) do nothing returning *',
          [workspaceId],
        );
        row = rows[0];
        throw read;
      })
      .catch((err: unknown) => {
        if (err !== read) throw err;
      });
    // No row inserted: no such workspace, or another transaction (a first call's trigger) wrote its row meanwhile.
    return row ?? db<PolicyRow>('destination_policies').where({ workspace_id: workspaceId }).first();
  }

  async update(workspaceId: string, changes: PolicyChanges): Promise<PolicyRow | undefined> {
    return this.knex.transaction(async (trx) => {
      await trx.raw('insert into destination_policies (workspace_id) select id from workspaces where id = ? on conflict (workspace_id) do nothing', [
        workspaceId,
      ]);
      const [row] = await trx('destination_policies')
        .where({ workspace_id: workspaceId })
        .update({ ...changes, updated_at: trx.fn.now() })
        .returning('*');
      return row as PolicyRow | undefined;
    });
  }

  /** The termination hosts of the workspace's SIP trunks (lower case, without a port). */
  async trunkHosts(workspaceId: string): Promise<string[]> {
    const rows = await this.knex('sip_trunks')
      .where({ workspace_id: workspaceId })
      .whereNotNull('outbound_host')
      .select<Array<{ outbound_host: string }>>('outbound_host');
    return rows.map((r) => r.outbound_host.toLowerCase().replace(/:[0-9]+$/, ''));
  }

  /** Calls the workspace placed today (UTC, on the database's clock, as the trigger counts them). */
  async today(workspaceId: string, db: Knex | Knex.Transaction = this.knex): Promise<DayUsage> {
    const { rows } = await db.raw<{ rows: Array<{ placed: number | null; resets_at: Date }> }>(
      `select (select placed from destination_daily_calls where workspace_id = ? and day = (now() at time zone 'UTC')::date) as placed,
              (date_trunc('day', now() at time zone 'UTC') + interval '1 day') at time zone 'UTC' as resets_at`,
      [workspaceId],
    );
    return { placed: rows[0].placed ?? 0, resetsAt: rows[0].resets_at };
  }
}
