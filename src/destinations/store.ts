/**
 * Destination policies and the daily call counts in PostgreSQL (migration 016). A workspace's policy
 * row is created with the column defaults, the default policy, the first time it is read; the count
 * of calls placed is written only by the `calls` trigger, in the transaction that inserts the calls.
 */
import type { Knex } from 'knex';
import type { NumberKind } from './numbers.js';

export interface PolicyRow {
  workspace_id: string;
  allowed_countries: string[] | null;
  allowed_number_types: NumberKind[];
  daily_call_cap: number | null;
  updated_at: Date;
}

export interface DayUsage {
  placed: number;
  /** The next 00:00 UTC on the database's clock. */
  resetsAt: Date;
}

export type PolicyChanges = Partial<Pick<PolicyRow, 'allowed_countries' | 'allowed_number_types' | 'daily_call_cap'>>;

/** The constraint the calls trigger names when an insert would pass the daily cap. */
export const DAILY_CAP_CONSTRAINT = 'destination_daily_call_cap';

export class DestinationStore {
  constructor(readonly knex: Knex) {}

  /** The workspace's policy, its row created with the defaults when it has none; undefined when there is no such workspace. */
  async policy(workspaceId: string, db: Knex | Knex.Transaction = this.knex): Promise<PolicyRow | undefined> {
    const found = await db<PolicyRow>('destination_policies').where({ workspace_id: workspaceId }).first();
    if (found) return found;
    await db.raw('insert into destination_policies (workspace_id) select id from workspaces where id = ? on conflict (workspace_id) do nothing', [workspaceId]);
    return db<PolicyRow>('destination_policies').where({ workspace_id: workspaceId }).first();
  }

  async update(workspaceId: string, changes: PolicyChanges): Promise<PolicyRow | undefined> {
    return this.knex.transaction(async (trx) => {
      if (!(await this.policy(workspaceId, trx))) return undefined;
      const [row] = await trx('destination_policies')
        .where({ workspace_id: workspaceId })
        .update({ ...changes, updated_at: trx.fn.now() })
        .returning('*');
      return row as PolicyRow;
    });
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
