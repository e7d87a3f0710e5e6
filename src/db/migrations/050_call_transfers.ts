/**
 * Issue 34, transfers recorded: one `call_transfers` row per attempt the agent made to transfer a call
 * (`transfers` on the call record and in `call.completed`). `target_type` is `phone_number` for every
 * row today; the column is there so that SIP URI targets (a later step) need no migration of their own.
 * And the hosts a transfer destination's `sip_uri` may point at besides the workspace's own SIP trunks
 * (`allowed_sip_domains` of the destination policy). A destination's `sip_uri` lives in the agents'
 * existing JSON `transfer_destinations` (migration 023) and needs no column.
 *
 * A row is written before the carrier is asked to hand the call over (`outcome` null), and given its
 * outcome once the carrier answers; a row still without one when its call is finalised (the instance
 * stopped in between) is settled by the finaliser from the call's end reason.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create table call_transfers (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      call_id text not null references calls(id) on delete cascade,
      seq smallint not null,
      destination_name text not null,
      target_type text not null,
      target text not null,
      reason text,
      outcome text,
      refusal_code text,
      started_at timestamptz not null,
      ended_at timestamptz,
      constraint call_transfers_seq unique (call_id, seq),
      constraint call_transfers_seq_positive check (seq >= 1),
      constraint call_transfers_target_type check (target_type in ('phone_number', 'sip_uri')),
      constraint call_transfers_outcome check (outcome in ('transferred', 'failed', 'refused')),
      constraint call_transfers_refusal check ((outcome = 'refused') = (refusal_code is not null))
    )`);
  await knex.raw('create index call_transfers_workspace on call_transfers (workspace_id)');
  await knex.raw(`alter table destination_policies add column allowed_sip_domains text[] not null default '{}'`);
  await knex.raw('alter table destination_policies add constraint destination_policies_sip_domains check (cardinality(allowed_sip_domains) <= 100)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table destination_policies drop column allowed_sip_domains');
  await knex.raw('drop table call_transfers');
}
