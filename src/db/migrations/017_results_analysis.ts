import type { Knex } from 'knex';

/**
 * Structured results of conversations (issue 23): an agent's `analysis` setting (the JSON Schema of the
 * data to extract and success criteria), copied onto each call and live web session when it starts (as
 * the instruction is), and the results (`data`/`data_error`, `success`/`success_error`, only the keys
 * the setting asked for) on the call and the web session's record. `json`, not `jsonb`: the schema and
 * the data keep the order of their keys as written (jsonb sorts them), which the tenant reads back and
 * the analysis model follows.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('agents', (t) => {
    t.json('analysis');
  });
  await knex.schema.alterTable('calls', (t) => {
    t.json('analysis');
    t.json('analysis_results');
  });
  await knex.schema.alterTable('realtime_live_sessions', (t) => {
    t.json('analysis');
  });
  await knex.schema.alterTable('realtime_conversations', (t) => {
    t.json('analysis_results');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('realtime_conversations', (t) => t.dropColumn('analysis_results'));
  await knex.schema.alterTable('realtime_live_sessions', (t) => t.dropColumn('analysis'));
  await knex.schema.alterTable('calls', (t) => {
    t.dropColumn('analysis');
    t.dropColumn('analysis_results');
  });
  await knex.schema.alterTable('agents', (t) => t.dropColumn('analysis'));
}
