/**
 * The agent version a web session runs (issue 35), fixed when its token is made (named, else the one
 * published then) so that a publish before the socket connects or while it runs changes nothing: on
 * the token, on the live session's row (an orphan is finalised with it) and on the conversation
 * record. Rows from before stay null: which version they ran was never kept.
 */
import type { Knex } from 'knex';

const TABLES = ['realtime_tokens', 'realtime_live_sessions', 'realtime_conversations'] as const;

export async function up(knex: Knex): Promise<void> {
  for (const table of TABLES) {
    await knex.schema.alterTable(table, (t) => t.integer('agent_version'));
    await knex.raw(`alter table ?? add constraint ?? check (agent_version >= 1)`, [table, `${table}_agent_version_positive`]);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const table of TABLES) await knex.schema.alterTable(table, (t) => t.dropColumn('agent_version'));
}
