/**
 * Batches: outbound campaigns. One `batches` row per campaign and one `batch_recipients` row per
 * person to call, in request order (`position`). A recipient is dialed by creating its call in the
 * same transaction that marks it `dialing` (the call's dial job commits with it), so a crash between
 * the two can neither lose nor double a call. `next_attempt_at` is when a waiting recipient is due
 * (the batch's start, a retry's delay, the calling window's opening); `round_attempts` counts the
 * calls of the current round against the retry policy, `attempts` all of them.
 * `completed_at` is set when `batch.completed` for the current terminal state has been raised.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('batches', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('agent_id').notNullable();
    t.text('name').notNullable();
    t.text('provider').notNullable();
    t.text('status').notNullable();
    t.integer('total').notNullable();
    t.jsonb('skipped').notNullable().defaultTo('[]');
    t.text('webhook_url');
    t.integer('concurrency').notNullable();
    t.integer('retry_max_attempts').notNullable();
    t.integer('retry_delay_s').notNullable();
    t.jsonb('retry_on').notNullable().defaultTo('[]');
    t.jsonb('calling_window');
    /** Why the batch failed (the refusal that stopped it). */
    t.text('failure_reason');
    t.timestamp('scheduled_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('completed_at', { useTz: true });
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['workspace_id', 'id']);
    t.index(['workspace_id', 'agent_id', 'id']);
    t.index(['workspace_id', 'status', 'id']);
  });
  await knex.raw(`alter table batches add constraint batches_status_check check (status in
    ('scheduled', 'queued', 'in_progress', 'paused', 'completed', 'canceled', 'failed'))`);
  await knex.raw(`alter table batches add constraint batches_provider_check check (provider in ('provider_a', 'provider_b'))`);

  await knex.schema.createTable('batch_recipients', (t) => {
    t.text('id').primary();
    t.text('batch_id').notNullable().references('batches.id').onDelete('CASCADE');
    t.integer('position').notNullable();
    t.text('to_number').notNullable();
    t.jsonb('variables').notNullable().defaultTo('{}');
    t.text('first_message');
    t.text('timezone');
    t.text('status').notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.integer('round_attempts').notNullable().defaultTo(0);
    t.text('call_id');
    t.specificType('call_ids', 'text[]').notNullable().defaultTo('{}');
    t.text('outcome');
    t.text('last_error');
    t.timestamp('next_attempt_at', { useTz: true });
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['batch_id', 'position']);
  });
  await knex.raw(`alter table batch_recipients add constraint batch_recipients_status_check check (status in
    ('pending', 'scheduled', 'dialing', 'in_progress', 'completed', 'failed', 'voicemail', 'no_answer', 'busy', 'canceled'))`);
  await knex.raw(`create index batch_recipients_due on batch_recipients (batch_id, next_attempt_at, position) where status in ('pending', 'scheduled')`);
  await knex.raw(`create index batch_recipients_live on batch_recipients (batch_id) where status in ('dialing', 'in_progress')`);
  await knex.raw('create unique index batch_recipients_call on batch_recipients (call_id) where call_id is not null');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('batch_recipients');
  await knex.schema.dropTable('batches');
}
