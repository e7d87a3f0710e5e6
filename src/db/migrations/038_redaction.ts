/**
 * Redaction (issue 36): an agent's `redaction` setting (what to redact and where), copied onto each
 * call and live web session as it starts, as the `analysis` setting is, so whoever finalises the
 * conversation (another instance after a crash too) redacts what it writes and sends by the setting
 * the conversation ran with.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('agents', (t) => t.jsonb('redaction'));
  await knex.schema.alterTable('calls', (t) => t.jsonb('redaction'));
  await knex.schema.alterTable('realtime_live_sessions', (t) => t.jsonb('redaction'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('realtime_live_sessions', (t) => t.dropColumn('redaction'));
  await knex.schema.alterTable('calls', (t) => t.dropColumn('redaction'));
  await knex.schema.alterTable('agents', (t) => t.dropColumn('redaction'));
}
