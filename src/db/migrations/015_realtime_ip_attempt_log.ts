import type { Knex } from 'knex';

/**
 * WebSocket connection attempts per client address as a log of their times, so the limit holds in
 * any window of its length (a fixed-window counter let twice the limit through across a boundary).
 * Each address keeps at most the limit's worth of rows; older ones are pruned as it goes.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('realtime_ip_attempt_log', (t) => {
    t.bigIncrements('id');
    t.text('address').notNullable();
    t.timestamp('at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['address', 'at']);
  });
  await knex.schema.dropTableIfExists('realtime_ip_attempts');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('realtime_ip_attempt_log');
  await knex.raw(`create table realtime_ip_attempts (key varchar(255) primary key, points integer not null default 0, expire bigint)`);
}
