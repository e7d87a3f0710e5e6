/**
 * API keys and dashboard sessions notify `cache_invalidations` (migration 030's trigger function) on
 * every write, keyed by id: every instance learns at once that a credential was revoked or logged out
 * (or deleted with its workspace), whichever instance or statement wrote it, and ends the event
 * streams opened with it (src/events/hub.ts).
 */
import type { Knex } from 'knex';

const TABLES = ['api_keys', 'dashboard_sessions'];

export async function up(knex: Knex): Promise<void> {
  for (const table of TABLES) {
    await knex.raw(`
      create trigger ${table}_cache_invalidation after insert or update or delete on ${table}
        for each row execute function notify_cache_invalidation('id')`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of TABLES) await knex.raw(`drop trigger if exists ${table}_cache_invalidation on ${table}`);
}
