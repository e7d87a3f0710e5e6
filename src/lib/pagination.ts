/** Cursor pagination over time-ordered ids: newest first, `starting_after` is the last id of the previous page. */
import type { Knex } from 'knex';

export interface Page<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}

export interface PageParams {
  limit?: number | string;
  starting_after?: string;
}

export async function paginate<Row extends { id?: string }, T>(
  query: Knex.QueryBuilder,
  params: PageParams,
  toItem: (row: Row) => T,
  idColumn = 'id',
): Promise<Page<T>> {
  const limit = Math.min(100, Math.max(1, Number(params.limit ?? 20) || 20));
  if (params.starting_after) query.where(idColumn, '<', params.starting_after);
  const rows = (await query.orderBy(idColumn, 'desc').limit(limit + 1)) as Row[];
  const page = rows.slice(0, limit);
  const last = page.at(-1) as Record<string, unknown> | undefined;
  const lastId = last ? String(last[idColumn.split('.').pop() as string]) : null;
  return { object: 'list', data: page.map(toItem), has_more: rows.length > limit, next_cursor: rows.length > limit ? lastId : null };
}
