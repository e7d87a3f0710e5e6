/**
 * Carriers as plug-ins (issue 33): an agent's carrier accounts move from two sets of columns per
 * carrier (`provider_a_config`, `_phone_number`, `_inbound_enabled`, the same for provider_b) into one
 * jsonb column keyed by provider, so a new carrier needs no migration:
 *   carrier_accounts = {"<provider>": {"config": {<field>: <value; secrets sealed>}, "phone_number": "+1...", "inbound_enabled": true}}
 * (a provider with nothing stored has no key; null members are left out). Which agent answers a number
 * at a provider is kept in `agent_inbound_numbers` by a trigger on the column, whose primary key holds
 * "one agent answers a number at a time" for every carrier at once (enabling a second one fails with
 * a unique violation: 409 phone_number_in_use) and through which inbound calls find the agent.
 * The `calls` and `batches` provider checks go too: the registry of carriers (src/carriers/index.ts)
 * and the contract's `Provider` enum, checked on every request, say which providers there are.
 * SIP's binding (`sip_trunk_id`, `sip_phone_number`, migration 034) stays: it is held by its foreign key.
 */
import type { Knex } from 'knex';

/** The carriers whose accounts had columns of their own. */
const MOVED = ['provider_a', 'provider_b'] as const;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`alter table agents add column carrier_accounts jsonb not null default '{}'`);
  await knex.raw(`
    create table agent_inbound_numbers (
      provider text not null,
      phone_number text not null,
      agent_id text not null references agents (id) on delete cascade,
      primary key (provider, phone_number)
    )`);
  await knex.raw('create index agent_inbound_numbers_agent on agent_inbound_numbers (agent_id)');
  await knex.raw(`
    create function agents_inbound_numbers() returns trigger language plpgsql as $$
    begin
      delete from agent_inbound_numbers where agent_id = new.id;
      insert into agent_inbound_numbers (provider, phone_number, agent_id)
        select a.key, a.value ->> 'phone_number', new.id
        from jsonb_each(new.carrier_accounts) a
        where a.value ->> 'phone_number' is not null and coalesce((a.value ->> 'inbound_enabled')::boolean, false);
      return null;
    end $$`);
  await knex.raw(`
    create trigger agents_inbound_numbers after insert or update of carrier_accounts on agents
      for each row execute function agents_inbound_numbers()`);
  const account = (p: string) => `case when ${p}_config is not null or ${p}_phone_number is not null
      then jsonb_build_object('config', ${p}_config, 'phone_number', ${p}_phone_number, 'inbound_enabled', ${p}_inbound_enabled) end`;
  await knex.raw(`update agents set carrier_accounts = jsonb_strip_nulls(jsonb_build_object(${MOVED.map((p) => `'${p}', ${account(p)}`).join(', ')}))
    where ${MOVED.map((p) => `${p}_config is not null or ${p}_phone_number is not null`).join(' or ')}`);
  await knex.schema.alterTable('agents', (t) => {
    for (const p of MOVED) t.dropColumns(`${p}_config`, `${p}_phone_number`, `${p}_inbound_enabled`);
  });
  await knex.raw('alter table calls drop constraint calls_provider_check');
  await knex.raw('alter table batches drop constraint batches_provider_check');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`alter table calls add constraint calls_provider_check check (provider in ('provider_a', 'provider_b', 'sip'))`);
  await knex.raw(`alter table batches add constraint batches_provider_check check (provider in ('provider_a', 'provider_b', 'sip'))`);
  await knex.schema.alterTable('agents', (t) => {
    for (const p of MOVED) {
      t.jsonb(`${p}_config`);
      t.text(`${p}_phone_number`);
      t.boolean(`${p}_inbound_enabled`).notNullable().defaultTo(false);
    }
  });
  for (const p of MOVED) {
    await knex.raw(`update agents set ${p}_config = carrier_accounts -> '${p}' -> 'config',
        ${p}_phone_number = carrier_accounts -> '${p}' ->> 'phone_number',
        ${p}_inbound_enabled = coalesce((carrier_accounts -> '${p}' ->> 'inbound_enabled')::boolean, false)
      where carrier_accounts -> '${p}' is not null`);
    await knex.raw(`create unique index agents_${p}_inbound_number on agents (${p}_phone_number) where ${p}_inbound_enabled`);
    await knex.raw(`create index agents_${p}_phone_number on agents (${p}_phone_number)`);
  }
  await knex.raw('drop trigger agents_inbound_numbers on agents');
  await knex.raw('drop function agents_inbound_numbers()');
  await knex.raw('drop table agent_inbound_numbers');
  await knex.raw('alter table agents drop column carrier_accounts');
}
