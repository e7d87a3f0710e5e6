import type { Knex } from 'knex';

/**
 * Records that always save and web sessions that survive a crash: every conversation record says
 * whether its size limit cut the transcript, a web session's record says why it ended, and a live web
 * session is kept in `realtime_live_sessions` from admission (its transcript saved as it grows, its
 * `alive_at` renewed by the instance running it) until its record is written, so another instance can
 * finalise it when that instance dies.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('calls', (t) => {
    t.boolean('transcript_truncated').notNullable().defaultTo(false);
  });
  await knex.schema.alterTable('realtime_conversations', (t) => {
    t.boolean('transcript_truncated').notNullable().defaultTo(false);
    t.text('end_reason').notNullable().defaultTo('client_closed');
  });
  await knex('realtime_conversations').where({ status: 'failed' }).update({ end_reason: 'service_error' });
  await knex.schema.createTable('realtime_live_sessions', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('agent_id').notNullable();
    t.text('user_id').notNullable();
    t.text('source').notNullable();
    t.text('instruction').notNullable();
    t.text('first_message');
    t.jsonb('variables').notNullable().defaultTo('{}');
    t.timestamp('started_at', { useTz: true }).notNullable();
    t.timestamp('alive_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.jsonb('transcript').notNullable().defaultTo('[]');
    t.boolean('transcript_truncated').notNullable().defaultTo(false);
    t.integer('interruption_count').notNullable().defaultTo(0);
    t.jsonb('latencies_ms').notNullable().defaultTo('[]');
    t.jsonb('tool_calls').notNullable().defaultTo('[]');
    t.boolean('first_message_delivered').notNullable().defaultTo(false);
    t.index(['alive_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('realtime_live_sessions');
  await knex.schema.alterTable('realtime_conversations', (t) => {
    t.dropColumn('transcript_truncated');
    t.dropColumn('end_reason');
  });
  await knex.schema.alterTable('calls', (t) => {
    t.dropColumn('transcript_truncated');
  });
}
