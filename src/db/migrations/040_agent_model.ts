/** Model per agent (issue 34): the live model an agent's conversations use; null takes the service's `VOICE_MODEL`. */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('agents', (t) => t.text('model'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('agents', (t) => t.dropColumn('model'));
}
