/**
 * Webhooks: registrations, the per-workspace signing secret, events and their deliveries.
 * A delivery row is the outbox entry of one (event, target): written in the event's transaction as
 * `pending`, claimed by a dispatcher (`sending`), then `done` with its outcome. `call_id`/`batch_id`
 * are plain text (no foreign key): this migration precedes the calls and batches tables.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhooks', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('url').notNullable();
    /** The URL after normalisation (lower-case scheme and host, no default port): the identity of a target. */
    t.text('url_key').notNullable();
    t.specificType('events', 'text[]').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['workspace_id', 'url_key'], { indexName: 'webhooks_workspace_url_unique' });
  });

  await knex.schema.createTable('webhook_secrets', (t) => {
    t.text('workspace_id').primary().references('workspaces.id').onDelete('CASCADE');
    /** SecretBox-sealed `whsec_...` strings. */
    t.text('secret_sealed').notNullable();
    t.text('previous_secret_sealed');
    t.timestamp('previous_expires_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('rotated_at', { useTz: true });
  });

  await knex.schema.createTable('webhook_events', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('kind').notNullable();
    t.text('call_id');
    t.text('batch_id');
    /** The exact bytes every target receives (serialised once, so every target gets the same body). */
    t.text('body').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['created_at']);
  });
  await knex.raw(`alter table webhook_events add constraint webhook_events_kind_check check (kind in ('call.completed', 'batch.completed'))`);

  await knex.schema.createTable('webhook_deliveries', (t) => {
    t.text('id').primary();
    t.text('event_id').notNullable().references('webhook_events.id').onDelete('CASCADE');
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    /** The registered webhook, when the target is one (kept after the webhook is deleted: no foreign key). */
    t.text('webhook_id');
    t.text('kind').notNullable();
    t.text('call_id');
    t.text('batch_id');
    t.text('target_url').notNullable();
    t.text('url_key').notNullable();
    t.text('state').notNullable().defaultTo('pending');
    t.text('status');
    t.integer('status_code');
    t.text('error');
    t.boolean('signed');
    t.integer('duration_ms');
    t.timestamp('claimed_at', { useTz: true });
    t.timestamp('attempted_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    // Exactly one delivery per (event, target): a URL both registered and given as webhook_url is one row.
    t.unique(['event_id', 'url_key'], { indexName: 'webhook_deliveries_event_target_unique' });
    t.index(['workspace_id', 'webhook_id', 'id']);
    t.index(['workspace_id', 'call_id', 'id']);
    t.index(['workspace_id', 'batch_id', 'id']);
  });
  await knex.raw(`alter table webhook_deliveries add constraint webhook_deliveries_state_check check (state in ('pending', 'sending', 'done'))`);
  await knex.raw(`alter table webhook_deliveries add constraint webhook_deliveries_status_check check (status is null or status in ('succeeded', 'failed'))`);
  await knex.raw(`create index webhook_deliveries_pending on webhook_deliveries (id) where state = 'pending'`);
  await knex.raw(`create index webhook_deliveries_sending on webhook_deliveries (claimed_at) where state = 'sending'`);
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['webhook_deliveries', 'webhook_events', 'webhook_secrets', 'webhooks']) {
    await knex.schema.dropTableIfExists(table);
  }
}
