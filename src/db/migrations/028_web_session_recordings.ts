import type { Knex } from 'knex';

/**
 * Issue 22, recordings of web voice sessions: whether a session records is the agent's `recording`
 * setting as the session started (text sessions never), kept on its live row (a crash's orphan is
 * finalised with it) and on its record, so a download without a recording can say why
 * (`not_enabled` or `not_started`). The recordings themselves are the rows of migration 026
 * (`kind` `web_session`).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('realtime_live_sessions', (t) => {
    t.boolean('recording_enabled').notNullable().defaultTo(false);
  });
  await knex.schema.alterTable('realtime_conversations', (t) => {
    t.boolean('recording_enabled').notNullable().defaultTo(false);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('realtime_conversations', (t) => t.dropColumn('recording_enabled'));
  await knex.schema.alterTable('realtime_live_sessions', (t) => t.dropColumn('recording_enabled'));
}
