/**
 * Phone calls. One row per call, outbound or inbound, from creation to its terminal state; the live
 * facts of a call (transcript so far, counters, tool calls) are written as it goes so a crash loses at
 * most the current utterance. `deadline_at` is when the call is ended by force if nothing moved it
 * (a carrier that never calls back, an instance that died mid-call); the `call_deadline` job of each
 * call fires then. `finalising_at` claims the finalisation (analysis, record, `call.completed`), so
 * one instance finalises a call once. `carrier_events` de-duplicates carrier webhooks by their id.
 * `agent_id` has no foreign key: a call's record outlives its agent.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('calls', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('agent_id').notNullable();
    t.text('batch_id');
    t.text('direction').notNullable();
    t.text('provider').notNullable();
    t.text('from_number').notNullable();
    t.text('to_number').notNullable();
    t.text('status').notNullable();
    t.text('call_sid');
    t.text('first_message');
    t.boolean('first_message_delivered').notNullable().defaultTo(false);
    t.jsonb('variables').notNullable().defaultTo('{}');
    t.text('webhook_url');
    /** The agent's instruction as the call ran it (placeholders filled), for the post-call analysis. */
    t.text('instruction').notNullable().defaultTo('');
    t.jsonb('transcript').notNullable().defaultTo('[]');
    t.integer('interruption_count').notNullable().defaultTo(0);
    t.jsonb('latencies_ms').notNullable().defaultTo('[]');
    t.jsonb('tool_calls').notNullable().defaultTo('[]');
    t.text('summary');
    t.text('sentiment');
    t.boolean('goal_met');
    t.boolean('needs_review');
    t.jsonb('unanswered_questions').notNullable().defaultTo('[]');
    t.double('latency_avg_ms');
    t.integer('duration').notNullable().defaultTo(0);
    t.text('answered_by');
    t.text('end_reason');
    /** Why the call is to end, once known before it is terminal (api_hangup, agent_hangup, transferred...). */
    t.text('end_reason_hint');
    /** The carrier's last reported outcome (its status mapped to ours) and the order of its callbacks. */
    t.text('carrier_outcome');
    t.integer('carrier_seq');
    t.text('stream_token_hash');
    t.text('bridge_instance');
    t.integer('cost_cents').notNullable().defaultTo(0);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('dial_attempted_at', { useTz: true });
    t.timestamp('answered_at', { useTz: true });
    t.timestamp('media_started_at', { useTz: true });
    t.timestamp('media_ended_at', { useTz: true });
    t.timestamp('hangup_requested_at', { useTz: true });
    t.timestamp('ended_at', { useTz: true });
    t.timestamp('deadline_at', { useTz: true }).notNullable();
    t.timestamp('finalising_at', { useTz: true });
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['workspace_id', 'id']);
    t.index(['workspace_id', 'agent_id', 'id']);
    t.index(['workspace_id', 'batch_id', 'id']);
  });
  await knex.raw(`alter table calls add constraint calls_status_check check (status in
    ('queued', 'initiated', 'ringing', 'in_progress', 'completed', 'busy', 'no_answer', 'failed', 'canceled', 'voicemail'))`);
  await knex.raw(`alter table calls add constraint calls_direction_check check (direction in ('outbound', 'inbound'))`);
  await knex.raw(`alter table calls add constraint calls_provider_check check (provider in ('provider_a', 'provider_b'))`);
  await knex.raw('create unique index calls_provider_call_sid on calls (provider, call_sid) where call_sid is not null');
  await knex.raw(`create index calls_live on calls (deadline_at) where status in ('queued', 'initiated', 'ringing', 'in_progress')`);

  await knex.schema.createTable('carrier_events', (t) => {
    t.text('provider').notNullable();
    t.text('event_id').notNullable();
    t.timestamp('received_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['provider', 'event_id']);
    t.index(['received_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('carrier_events');
  await knex.schema.dropTableIfExists('calls');
}
