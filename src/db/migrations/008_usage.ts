/**
 * Metered usage of a workspace, one row per finished web session or phone call: what the plan's
 * monthly minutes count and what was taken off the credit. Owned by workspace admission
 * (src/workspaces/admission.ts), so no conversation domain writes `workspaces` itself. `(kind, ref_id)`
 * is unique: a conversation is charged once even if its finalisation runs twice.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('usage_records', (t) => {
    t.bigIncrements('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('kind').notNullable();
    t.text('ref_id').notNullable();
    t.integer('seconds').notNullable();
    t.integer('cents').notNullable();
    /** When the metered conversation started: the month it counts in. */
    t.timestamp('started_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['kind', 'ref_id'], { indexName: 'usage_records_ref_unique' });
    t.index(['workspace_id', 'started_at']);
  });
  await knex.raw(`alter table usage_records add constraint usage_records_kind_check check (kind in ('web_session', 'phone_call'))`);
  // Web sessions finished before this migration keep counting toward their month.
  await knex.raw(`insert into usage_records (workspace_id, kind, ref_id, seconds, cents, started_at)
    select workspace_id, 'web_session', id, duration, cost_cents, started_at from realtime_conversations`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('usage_records');
}
