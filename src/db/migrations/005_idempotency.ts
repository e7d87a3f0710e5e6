/**
 * Idempotency keys (src/http/idempotency.ts): one row per (scope, operation, key). While the first
 * request runs the row is `in_progress`; afterwards it holds the response to replay until `expires_at`.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('idempotency_keys', (t) => {
    // The workspace the key belongs to.
    t.text('scope').notNullable();
    t.text('operation_id').notNullable();
    t.text('key').notNullable();
    // SHA-256 of the canonical request (method, path, query, body).
    t.text('request_hash').notNullable();
    t.text('state').notNullable();
    t.integer('response_status');
    t.jsonb('response_body');
    t.jsonb('response_headers');
    t.timestamp('locked_at', { useTz: true }).notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['scope', 'operation_id', 'key']);
    t.index(['expires_at']);
  });
  await knex.raw(`alter table idempotency_keys add constraint idempotency_keys_state_check
    check (state in ('in_progress', 'completed'))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('idempotency_keys');
}
