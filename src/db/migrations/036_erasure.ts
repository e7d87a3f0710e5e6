/**
 * Erasure and retention of conversations' content (issue 36): a call or web session erased by request
 * or by its workspace's `transcript_retention_days` keeps its row as a tombstone with `erased_at` set
 * (content columns emptied, billing facts kept); the retention job finds the finished conversations
 * not yet erased by their end through the partial indexes.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('calls', (t) => t.timestamp('erased_at', { useTz: true }));
  await knex.schema.alterTable('realtime_conversations', (t) => {
    t.timestamp('erased_at', { useTz: true });
    // A tombstone's analysis is gone (null), not a made-up empty one.
    for (const column of ['summary', 'sentiment', 'goal_met', 'needs_review']) t.setNullable(column);
  });
  await knex.schema.alterTable('workspaces', (t) => t.integer('transcript_retention_days'));
  await knex.raw('create index calls_unerased_end on calls (ended_at) where erased_at is null and ended_at is not null');
  await knex.raw('create index realtime_conversations_unerased_end on realtime_conversations (ended_at) where erased_at is null');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists realtime_conversations_unerased_end');
  await knex.raw('drop index if exists calls_unerased_end');
  await knex.schema.alterTable('workspaces', (t) => t.dropColumn('transcript_retention_days'));
  await knex.schema.alterTable('realtime_conversations', (t) => t.dropColumn('erased_at'));
  await knex.schema.alterTable('calls', (t) => t.dropColumn('erased_at'));
}
