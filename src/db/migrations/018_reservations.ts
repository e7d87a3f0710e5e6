import type { Knex } from 'knex';

/**
 * Reservations (issue 21): the credit and plan minutes each live conversation (phone call or web
 * session) holds, taken at admission under the workspace's lock beside its slot, extended while it
 * runs and released in the transaction that charges it. The live rows of a workspace (unexpired on the
 * database clock) never hold more than its balance or its plan minutes left.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('reservations', (t) => {
    /** The conversation's id (`call_...`, `conv_...`). */
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('kind').notNullable();
    /** Metering minutes held; `cents` and `seconds` are what they hold of the credit and the plan. */
    t.integer('minutes').notNullable();
    t.integer('cents').notNullable();
    t.integer('seconds').notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['workspace_id', 'expires_at']);
  });
  await knex.raw(`alter table reservations add constraint reservations_kind_check check (kind in ('web_session', 'phone_call'))`);
  await knex.raw(`alter table reservations add constraint reservations_amounts_check check (minutes >= 0 and cents >= 0 and seconds >= 0)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('reservations');
}
