import type { Knex } from 'knex';

/**
 * Which credential minted a realtime token (an API key's or a dashboard session's id): revoking the
 * key, or logging the session out, voids the tokens it minted that were not used yet.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('realtime_tokens', (t) => {
    t.text('minted_by');
  });
  await knex.raw('create index realtime_tokens_unused_by_minter on realtime_tokens (minted_by) where used_at is null');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists realtime_tokens_unused_by_minter');
  await knex.schema.alterTable('realtime_tokens', (t) => {
    t.dropColumn('minted_by');
  });
}
