/**
 * The agent version a batch's calls run (issue 35), fixed when the batch is created so that a publish
 * meanwhile does not change the rest of the batch or its retries. Batches not yet over get the version
 * their agent publishes now (what their next call would have run); finished ones stay null (which
 * version their calls ran is on each call), and a retry of one runs the version published then.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('batches', (t) => t.integer('agent_version'));
  await knex.raw('alter table batches add constraint batches_agent_version_positive check (agent_version >= 1)');
  await knex.raw(
    `update batches b set agent_version = a.published_version
     from agents a where a.id = b.agent_id and b.completed_at is null`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('batches', (t) => t.dropColumn('agent_version'));
}
