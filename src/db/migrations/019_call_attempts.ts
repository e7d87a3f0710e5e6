import type { Knex } from 'knex';

/**
 * Once per attempt (issue 21): a batch's call names the recipient and the attempt it is, and a unique
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
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists calls_recipient_attempt');
  await knex.raw('alter table calls drop constraint if exists calls_attempt_check, drop column if exists attempt, drop column if exists batch_recipient_id');
}
