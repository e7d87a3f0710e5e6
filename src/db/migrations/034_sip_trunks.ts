/**
 * SIP trunks (issue 33): a workspace's carriers, PBXs and contact-centre platforms that send calls to
 * the service and take its outbound calls over SIP.
 *
 * - `sip_trunks`: one row per trunk; passwords sealed by the SecretBox (`v1.<iv>.<tag>.<ciphertext>`).
 * - `sip_trunk_sources`: the addresses and CIDR ranges a trunk's INVITEs may come from, as `cidr`, so
 *   "which trunks allow this source" is one GiST index lookup (`>>=`), whatever the number of trunks.
 * - `sip_trunk_numbers`: the numbers a trunk delivers. The number is the primary key: a number belongs
 *   to one trunk across all workspaces (409 `sip_number_taken`).
 * - `agents.sip_trunk_id` / `sip_phone_number`: the trunk number an agent answers. A foreign key to
 *   the trunk's number of the same workspace (workspace_id in the key), so an agent can only answer a
 *   number its own workspace's trunk delivers, and neither the number nor the trunk can go while an
 *   agent answers it (NO ACTION: checked at the end of the statement, so deleting a workspace, which
 *   removes its agents and trunks in one cascade, still works). One agent answers a number.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('sip_trunks', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('name').notNullable();
    t.boolean('inbound').notNullable().defaultTo(false);
    t.text('inbound_username');
    t.text('inbound_password');
    t.boolean('outbound').notNullable().defaultTo(false);
    t.text('outbound_host');
    t.integer('outbound_port');
    t.text('outbound_transport');
    t.text('outbound_username');
    t.text('outbound_password');
    t.specificType('outbound_caller_ids', 'text[]').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['workspace_id', 'id']);
    t.unique(['workspace_id', 'id']);
  });
  await knex.raw(`alter table sip_trunks add constraint sip_trunks_sides_check check (
    (outbound_transport is null or outbound_transport in ('udp', 'tcp', 'tls'))
    and (outbound_port is null or outbound_port between 1 and 65535)
    and (not outbound or (outbound_host is not null and outbound_transport is not null))
    and ((inbound_username is null) = (inbound_password is null))
    and ((outbound_username is null) = (outbound_password is null)))`);
  // Digest-only trunks (no source list) are looked up by the username an INVITE presents.
  await knex.raw('create index sip_trunks_inbound_username on sip_trunks (inbound_username) where inbound_username is not null');

  await knex.schema.createTable('sip_trunk_sources', (t) => {
    t.text('trunk_id').notNullable().references('sip_trunks.id').onDelete('CASCADE');
    t.specificType('source', 'cidr').notNullable();
    t.primary(['trunk_id', 'source']);
  });
  await knex.raw('create index sip_trunk_sources_source on sip_trunk_sources using gist (source inet_ops)');

  await knex.schema.createTable('sip_trunk_numbers', (t) => {
    t.text('number').primary();
    t.text('trunk_id').notNullable();
    t.text('workspace_id').notNullable();
    t.foreign(['workspace_id', 'trunk_id']).references(['workspace_id', 'id']).inTable('sip_trunks').onDelete('CASCADE');
    t.unique(['workspace_id', 'trunk_id', 'number']);
    t.index(['trunk_id']);
  });

  await knex.schema.alterTable('agents', (t) => {
    t.text('sip_trunk_id');
    t.text('sip_phone_number');
  });
  await knex.raw(`alter table agents add constraint agents_sip_number_fk foreign key (workspace_id, sip_trunk_id, sip_phone_number)
    references sip_trunk_numbers (workspace_id, trunk_id, number)`);
  await knex.raw('alter table agents add constraint agents_sip_binding_check check ((sip_trunk_id is null) = (sip_phone_number is null))');
  await knex.raw('create unique index agents_sip_inbound_number on agents (sip_phone_number) where sip_phone_number is not null');
  await knex.raw('create index agents_sip_trunk on agents (sip_trunk_id) where sip_trunk_id is not null');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table agents drop constraint if exists agents_sip_number_fk');
  await knex.raw('alter table agents drop constraint if exists agents_sip_binding_check');
  await knex.schema.alterTable('agents', (t) => {
    t.dropColumn('sip_trunk_id');
    t.dropColumn('sip_phone_number');
  });
  for (const table of ['sip_trunk_numbers', 'sip_trunk_sources', 'sip_trunks']) await knex.schema.dropTableIfExists(table);
}
