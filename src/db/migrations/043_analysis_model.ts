/**
 * Analysis model per agent (issue 34): the model of an agent's post-call analysis (null takes the
 * service's `VOICE_ANALYSIS_MODEL`), kept on each call and live web session as it started, as its
 * `analysis` setting is.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('agents', (t) => t.text('analysis_model'));
  await knex.schema.alterTable('calls', (t) => t.text('analysis_model'));
  await knex.schema.alterTable('realtime_live_sessions', (t) => t.text('analysis_model'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('realtime_live_sessions', (t) => t.dropColumn('analysis_model'));
  await knex.schema.alterTable('calls', (t) => t.dropColumn('analysis_model'));
  await knex.schema.alterTable('agents', (t) => t.dropColumn('analysis_model'));
}
