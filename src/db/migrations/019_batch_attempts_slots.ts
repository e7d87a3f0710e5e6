import type { Knex } from 'knex';

/**
 * Batches (issue 21). Once per attempt: a batch's call names the recipient and the attempt it is, and a unique
 * key allows one call per (recipient, attempt). The call is written in the transaction that claims
 * the recipient and counts the attempt, so any code path that would dial an attempt twice (two
 * claims of one recipient in a round, two instances) fails on the key and places nothing.
 * Existing batch calls take their place in their recipient's `call_ids` (1-based); calls no
 * recipient lists (the extra calls of the claim bug) keep no attempt.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`alter table calls add column batch_recipient_id text, add column attempt integer`);
  await knex.raw(
    `update calls c set batch_recipient_id = u.recipient_id, attempt = u.attempt
     from (select r.id as recipient_id, x.call_id, x.attempt
           from batch_recipients r, unnest(r.call_ids) with ordinality as x(call_id, attempt)) u
     where c.id = u.call_id`,
  );
  await knex.raw(
    `alter table calls add constraint calls_attempt_check check (
       (batch_recipient_id is null) = (attempt is null) and (attempt is null or (attempt >= 1 and batch_id is not null)))`,
  );
  await knex.raw('create unique index calls_recipient_attempt on calls (batch_recipient_id, attempt) where batch_recipient_id is not null');

  // Fair dispatch: a batch whose round found no free slot of its workspace waits in its workspace's
  // line (oldest first) for the workspace's one `batch_slots` job, instead of re-arming a job of its own.
  await knex.raw('alter table batches add column slot_wait_since timestamptz');
  await knex.raw('create index batches_slot_wait on batches (workspace_id, slot_wait_since, id) where slot_wait_since is not null');
  // The per-workspace caps count the batches not yet over (completed_at is set when one is).
  await knex.raw('create index batches_open on batches (workspace_id) where completed_at is null');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists batches_open');
  await knex.raw('drop index if exists batches_slot_wait');
  await knex.raw('alter table batches drop column if exists slot_wait_since');
  await knex.raw('drop index if exists calls_recipient_attempt');
  await knex.raw('alter table calls drop constraint if exists calls_attempt_check, drop column if exists attempt, drop column if exists batch_recipient_id');
}
