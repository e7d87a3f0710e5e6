/**
 * Destination policies (issue 21, toll fraud). One row per workspace: the countries and number kinds it
 * may call and its cap of outbound calls per UTC day. The column defaults ARE the default policy: a
 * workspace gets its row, with them, the first time anything reads or counts against it.
 *
 * The daily cap is the database's to keep: `destination_daily_calls` counts each workspace's outbound
 * calls per UTC day of `calls.created_at`, and a statement trigger on `calls` adds every inserted
 * outbound row to it in the inserting transaction, raising `check_violation` (constraint
 * `destination_daily_call_cap`) when the count passes the cap. Concurrent inserts wait on the counter
 * row, so no two transactions, of one instance or several, can both take the last call of the day,
 * and no code path can write an outbound call without it being counted.
 */
import type { Knex } from 'knex';

/** The number kinds as of this migration (a migration stays as it ran: it imports no domain code; test/integration/destinations.test.ts stores every kind the service knows). */
const KINDS = [
  'fixed_line',
  'mobile',
  'fixed_line_or_mobile',
  'toll_free',
  'premium_rate',
  'shared_cost',
  'voip',
  'personal_number',
  'pager',
  'uan',
  'voicemail',
  'satellite',
  'international_network',
  'fictional',
  'unknown',
];
const DEFAULT_KINDS = ['fixed_line', 'mobile', 'fixed_line_or_mobile', 'toll_free', 'voip', 'uan', 'fictional'];
const DEFAULT_DAILY_CALL_CAP = 1000;

const textArray = (items: string[]) => `'{${items.join(',')}}'::text[]`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create table destination_policies (
      workspace_id text primary key references workspaces(id) on delete cascade,
      allowed_countries text[],
      allowed_number_types text[] not null default ${textArray(DEFAULT_KINDS)},
      daily_call_cap integer default ${DEFAULT_DAILY_CALL_CAP},
      updated_at timestamptz not null default now(),
      constraint destination_policies_kinds check (allowed_number_types <@ ${textArray(KINDS)}),
      constraint destination_policies_countries check (allowed_countries is null or cardinality(allowed_countries) <= 300),
      constraint destination_policies_cap check (daily_call_cap is null or daily_call_cap >= 0)
    )`);
  await knex.raw(`
    create table destination_daily_calls (
      workspace_id text not null references workspaces(id) on delete cascade,
      day date not null,
      placed integer not null,
      primary key (workspace_id, day)
    )`);
  await knex.raw(`
    create function destination_count_calls() returns trigger language plpgsql as $$
    declare
      over record;
    begin
      insert into destination_policies (workspace_id)
        select distinct workspace_id from new_calls where direction = 'outbound'
        on conflict (workspace_id) do nothing;
      with counted as (
        insert into destination_daily_calls as d (workspace_id, day, placed)
          select workspace_id, (created_at at time zone 'UTC')::date, count(*)::integer
          from new_calls where direction = 'outbound' group by 1, 2
          on conflict (workspace_id, day) do update set placed = d.placed + excluded.placed
          returning d.workspace_id, d.placed
      )
      select c.workspace_id, c.placed, p.daily_call_cap into over
        from counted c join destination_policies p using (workspace_id)
        where p.daily_call_cap is not null and c.placed > p.daily_call_cap
        limit 1;
      if found then
        raise exception 'workspace % would place % outbound calls today, over its daily cap of %', over.workspace_id, over.placed, over.daily_call_cap
          using errcode = 'check_violation', constraint = 'destination_daily_call_cap';
      end if;
      return null;
    end $$`);
  await knex.raw(`
    create trigger calls_count_destinations after insert on calls
      referencing new table as new_calls
      for each statement execute function destination_count_calls()`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop trigger if exists calls_count_destinations on calls');
  await knex.raw('drop function if exists destination_count_calls()');
  await knex.raw('drop table if exists destination_daily_calls');
  await knex.raw('drop table if exists destination_policies');
}
