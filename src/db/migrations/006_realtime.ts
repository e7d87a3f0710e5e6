/**
 * Realtime web sessions: single-use session tokens (only their SHA-256 is stored; the issued rows are
 * also what the per-workspace creation rate limit counts), concurrency-slot leases with a heartbeat,
 * the per-IP connection-attempt counters (rate-limiter-flexible's PostgreSQL table layout), and the
 * conversation record of each finished session.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('realtime_tokens', (t) => {
    t.text('token_hash').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    // No foreign key: a token whose agent was deleted must still be redeemable to answer 4001.
    t.text('agent_id').notNullable();
    t.text('user_id').notNullable();
    t.text('source').notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('used_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.index(['workspace_id', 'created_at']);
  });
  await knex.raw(`alter table realtime_tokens add constraint realtime_tokens_source_check
    check (source in ('voice', 'camera', 'screen', 'text'))`);

  // A live session (or call) holds one row; rows whose heartbeat stopped (expires_at passed) no longer count.
  await knex.schema.createTable('session_leases', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('kind').notNullable();
    t.text('instance_id').notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['workspace_id', 'expires_at']);
  });

  // Layout required by rate-limiter-flexible's RateLimiterPostgres (created here so two instances
  // starting at once do not race on CREATE TABLE IF NOT EXISTS).
  await knex.raw(`create table realtime_ip_attempts (
    key varchar(255) primary key,
    points integer not null default 0,
    expire bigint
  )`);

  await knex.schema.createTable('realtime_conversations', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('agent_id').notNullable();
    t.text('user_id').notNullable();
    t.text('source').notNullable();
    t.text('status').notNullable();
    t.text('first_message');
    t.boolean('first_message_delivered').notNullable().defaultTo(false);
    t.jsonb('variables').notNullable().defaultTo('{}');
    t.timestamp('started_at', { useTz: true }).notNullable();
    t.timestamp('ended_at', { useTz: true }).notNullable();
    t.integer('duration').notNullable();
    t.jsonb('transcript').notNullable().defaultTo('[]');
    t.integer('message_count').notNullable();
    t.integer('interruption_count').notNullable();
    t.double('latency_avg_ms').notNullable();
    t.text('summary').notNullable();
    t.text('sentiment').notNullable();
    t.boolean('goal_met').notNullable();
    t.boolean('needs_review').notNullable();
    t.jsonb('unanswered_questions').notNullable().defaultTo('[]');
    t.jsonb('tool_calls');
    t.integer('cost_cents').notNullable().defaultTo(0);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['workspace_id', 'started_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['realtime_conversations', 'realtime_ip_attempts', 'session_leases', 'realtime_tokens']) {
    await knex.schema.dropTableIfExists(table);
  }
}
