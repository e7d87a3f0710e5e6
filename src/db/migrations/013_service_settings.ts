import type { Knex } from 'knex';

/** Facts about the deployment the instances on one database must agree on (the secrets key's fingerprint). */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('service_settings', (t) => {
    t.text('key').primary();
    t.text('value').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('service_settings');
}
