/**
 * A batch recipient's own override of the conversation settings (issue 34): a JSON recipient's
 * `conversation`, a CSV row's `conversation.` columns. Applied over the batch's override as each of
 * its calls is created; null: the batch's.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('batch_recipients', (t) => t.jsonb('conversation'));
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('batch_recipients', (t) => t.dropColumn('conversation'));
}
