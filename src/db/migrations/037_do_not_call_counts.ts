/**
 * How many numbers each workspace's do-not-call list holds, kept by the database itself: statement
 * triggers on `do_not_call_entries` add what an insert really inserted (its transition table, so an
 * `on conflict do nothing` that inserted nothing adds nothing) and take away what a delete removed,
 * whichever code path or instance wrote. A writer that adds numbers reads the count in its own
 * transaction after its insert: the trigger's update holds the workspace's count row until commit,
 * so two imports on two instances are judged one after the other against the cap
 * (`DO_NOT_CALL_MAX_ENTRIES`), never both against the count before either.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create table do_not_call_counts (
      workspace_id text primary key references workspaces(id) on delete cascade,
      entries integer not null check (entries >= 0)
    )`);
  await knex.raw(`
    insert into do_not_call_counts (workspace_id, entries)
    select workspace_id, count(*) from do_not_call_entries group by workspace_id`);
  await knex.raw(`
    create function do_not_call_counts_inserted() returns trigger language plpgsql as $$
    begin
      insert into do_not_call_counts (workspace_id, entries)
      select workspace_id, count(*) from inserted group by workspace_id
      on conflict (workspace_id) do update set entries = do_not_call_counts.entries + excluded.entries;
      return null;
    end $$`);
  await knex.raw(`
    create function do_not_call_counts_deleted() returns trigger language plpgsql as $$
    begin
      update do_not_call_counts c set entries = c.entries - d.n
      from (select workspace_id, count(*) as n from deleted group by workspace_id) d
      where c.workspace_id = d.workspace_id;
      return null;
    end $$`);
  await knex.raw(`
    create trigger do_not_call_counts_inserted after insert on do_not_call_entries
    referencing new table as inserted for each statement execute function do_not_call_counts_inserted()`);
  await knex.raw(`
    create trigger do_not_call_counts_deleted after delete on do_not_call_entries
    referencing old table as deleted for each statement execute function do_not_call_counts_deleted()`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop trigger do_not_call_counts_deleted on do_not_call_entries');
  await knex.raw('drop trigger do_not_call_counts_inserted on do_not_call_entries');
  await knex.raw('drop function do_not_call_counts_deleted()');
  await knex.raw('drop function do_not_call_counts_inserted()');
  await knex.raw('drop table do_not_call_counts');
}
