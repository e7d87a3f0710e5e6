/** Provider `sip` (issue 33): calls and batches may be placed through a workspace's SIP trunk. */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table calls drop constraint calls_provider_check');
  await knex.raw(`alter table calls add constraint calls_provider_check check (provider in ('provider_a', 'provider_b', 'sip'))`);
  await knex.raw('alter table batches drop constraint batches_provider_check');
  await knex.raw(`alter table batches add constraint batches_provider_check check (provider in ('provider_a', 'provider_b', 'sip'))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table calls drop constraint calls_provider_check');
  await knex.raw(`alter table calls add constraint calls_provider_check check (provider in ('provider_a', 'provider_b'))`);
  await knex.raw('alter table batches drop constraint batches_provider_check');
  await knex.raw(`alter table batches add constraint batches_provider_check check (provider in ('provider_a', 'provider_b'))`);
}
