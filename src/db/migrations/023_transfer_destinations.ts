import type { Knex } from 'knex';

/**
 * Several transfer destinations per agent (issue 23): `[{name, phone_number, description}]`, the model
 * choosing one by name. `json`, not `jsonb`, so the list keeps the order the tenant wrote it in.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('agents', (t) => {
    t.json('transfer_destinations').notNullable().defaultTo('[]');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('agents', (t) => t.dropColumn('transfer_destinations'));
}
