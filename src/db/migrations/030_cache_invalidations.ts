/**
 * Per-process caches of agents and of which event kinds a workspace's webhooks list
 * (src/db/notified-cache.ts) learn of every write to those rows from PostgreSQL: a row trigger on each
 * table sends `<table> <key>` on the `cache_invalidations` channel (the agent's id; the webhook's
 * workspace id), for every insert, update and delete, whatever wrote it (the API, a workspace's
 * cascading delete, raw SQL). NOTIFY is sent at commit, and not at all for a rolled-back write.
 * An update that changes the key notifies the old key too.
 */
import type { Knex } from 'knex';

const TABLES: Array<[table: string, key: string]> = [
  ['agents', 'id'],
  ['webhooks', 'workspace_id'],
];

export async function up(knex: Knex): Promise<void> {
  // TG_ARGV[0]: the column whose value keys the table's cache.
  await knex.raw(`
    create function notify_cache_invalidation() returns trigger language plpgsql as $$
    declare
      old_key text;
      new_key text;
    begin
      if tg_op <> 'INSERT' then old_key := to_jsonb(old) ->> tg_argv[0]; end if;
      if tg_op <> 'DELETE' then new_key := to_jsonb(new) ->> tg_argv[0]; end if;
      if old_key is not null then perform pg_notify('cache_invalidations', tg_table_name || ' ' || old_key); end if;
      if new_key is not null and new_key is distinct from old_key then
        perform pg_notify('cache_invalidations', tg_table_name || ' ' || new_key);
      end if;
      return null;
    end $$`);
  for (const [table, key] of TABLES) {
    await knex.raw(`
      create trigger ${table}_cache_invalidation after insert or update or delete on ${table}
        for each row execute function notify_cache_invalidation('${key}')`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const [table] of TABLES) await knex.raw(`drop trigger if exists ${table}_cache_invalidation on ${table}`);
  await knex.raw('drop function if exists notify_cache_invalidation()');
}
