import type { Knex } from 'knex';

/**
 * Issue 21: a live call's `alive_at`, the last moment the instance running its media was known alive
 * (set when its stream is claimed, renewed with its deadline every heartbeat). A call orphaned by a
 * crashed instance ends and is billed there, not at its deadline, as web sessions are.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('calls', (t) => {
    t.timestamp('alive_at', { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('calls', (t) => {
    t.dropColumn('alive_at');
  });
}
