/**
 * The do-not-call list in PostgreSQL (migration 035): one row per workspace and number (a unique
 * key), so adding twice, from two requests or two instances, keeps one entry. Every query is scoped
 * by workspace.
 */
import type { Knex } from 'knex';
import { newId } from '../lib/ids.js';
import { paginate, type Page, type PageParams } from '../lib/pagination.js';

export type EntrySource = 'api' | 'csv' | 'opt_out';

export interface EntryRow {
  id: string;
  workspace_id: string;
  number: string;
  source: EntrySource;
  call_id: string | null;
  created_at: Date;
}

/** Numbers per statement of a bulk insert or lookup: one array parameter each, so the bound is the statement's size. */
const BULK_CHUNK = 10_000;

/**
 * A subquery for `where exists`: the entry listing the number in column `numberColumn` for the
 * workspace in `workspaceColumn` of the outer query, so another room's statement checks the list in
 * its own atomic update (the dial job's claim).
 */
export function listedEntryOf(db: Knex, workspaceColumn: string, numberColumn: string): Knex.QueryBuilder {
  return db('do_not_call_entries as dnc').select(db.raw('1')).where('dnc.workspace_id', db.ref(workspaceColumn)).andWhere('dnc.number', db.ref(numberColumn));
}

export class DoNotCallStore {
  constructor(private readonly db: Knex) {}

  get knex(): Knex {
    return this.db;
  }

  /** Lists `number`: the new row, or the row already there (`created: false`), left as it was. */
  async add(workspaceId: string, number: string, source: EntrySource, callId: string | null, db: Knex = this.db): Promise<{ row: EntryRow; created: boolean }> {
    const [inserted] = (await db('do_not_call_entries')
      .insert({ id: newId('doNotCall'), workspace_id: workspaceId, number, source, call_id: callId })
      .onConflict(['workspace_id', 'number'])
      .ignore()
      .returning('*')) as EntryRow[];
    if (inserted) return { row: inserted, created: true };
    const existing = (await db('do_not_call_entries').where({ workspace_id: workspaceId, number }).first()) as EntryRow | undefined;
    // Removed between the two statements: list it again.
    if (!existing) return this.add(workspaceId, number, source, callId, db);
    return { row: existing, created: false };
  }

  /**
   * Lists every number of `numbers` (distinct, E.164) not listed yet, in `trx`; returns how many were
   * new. Chunked so no statement carries more than BULK_CHUNK numbers.
   */
  async addMany(trx: Knex.Transaction, workspaceId: string, numbers: string[], source: EntrySource): Promise<number> {
    let added = 0;
    for (let i = 0; i < numbers.length; i += BULK_CHUNK) {
      const chunk = numbers.slice(i, i + BULK_CHUNK);
      const ids = chunk.map(() => newId('doNotCall'));
      const { rowCount } = (await trx.raw(
        `insert into do_not_call_entries (id, workspace_id, number, source)
         select id, ?, number, ? from unnest(?::text[], ?::text[]) as n(id, number)
         on conflict (workspace_id, number) do nothing`,
        [workspaceId, source, ids, chunk],
      )) as { rowCount: number };
      added += rowCount;
    }
    return added;
  }

  /** How many numbers the workspace's list holds (kept by migration 037's triggers); in `db`, with that transaction's own inserts. */
  async count(workspaceId: string, db: Knex = this.db): Promise<number> {
    const row = (await db('do_not_call_counts').where({ workspace_id: workspaceId }).first('entries')) as { entries: number } | undefined;
    return row?.entries ?? 0;
  }

  async remove(workspaceId: string, id: string): Promise<boolean> {
    return (await this.db('do_not_call_entries').where({ workspace_id: workspaceId, id }).delete()) > 0;
  }

  list(workspaceId: string, number: string | null, page: PageParams): Promise<Page<EntryRow>> {
    const q = this.db('do_not_call_entries').where({ workspace_id: workspaceId });
    if (number !== null) q.where({ number });
    return paginate<EntryRow, EntryRow>(q, page, (row) => row);
  }

  /**
   * Which of `numbers` are on the workspace's list (in `db`: a dispatch round's transaction sees what
   * committed before its statement). One probe of the unique index per number: written as a join on
   * `unnest`, because with `number = any($array)` PostgreSQL 15 estimates an array of thousands to
   * match thousands of rows and scans the whole table (170 ms against 1,000,000 entries, where the
   * probes take 20-40 ms; BENCHMARKS.md).
   */
  async listedAmong(workspaceId: string, numbers: string[], db: Knex = this.db): Promise<Set<string>> {
    const listed = new Set<string>();
    for (let i = 0; i < numbers.length; i += BULK_CHUNK) {
      const { rows } = (await db.raw(
        `select e.number from unnest(?::text[]) as n(number) join do_not_call_entries e on e.workspace_id = ? and e.number = n.number`,
        [numbers.slice(i, i + BULK_CHUNK), workspaceId],
      )) as { rows: Array<{ number: string }> };
      for (const r of rows) listed.add(r.number);
    }
    return listed;
  }
}
