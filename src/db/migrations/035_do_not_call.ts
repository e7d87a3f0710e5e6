/**
 * The workspace's do-not-call list (issue 36): one row per listed number, unique per workspace, so
 * adding a number twice is one row whichever instance or request adds it, and a batch's dispatch
 * round checks the recipients it claims against it in its own transaction (the unique index is the
 * lookup). `call_id` is the call in which a person opted out; it is no foreign key: the person's wish
 * outlives the call's record (an erased call keeps its entry). An agent's `opt_out` setting offers
 * the tool that lists a person's number; `calls.opted_out_at` records that it did. An agent's
 * `recording_disclosure` is the line its recorded phone calls begin with.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create table do_not_call_entries (
      id text primary key,
      workspace_id text not null references workspaces(id) on delete cascade,
      number text not null check (number ~ '^\\+[1-9][0-9]{1,14}$'),
      source text not null check (source in ('api', 'csv', 'opt_out')),
      call_id text,
      created_at timestamptz not null default now(),
      constraint do_not_call_entries_number_key unique (workspace_id, number)
    )`);
  // Pages of the list, newest first, per workspace.
  await knex.raw('create index do_not_call_entries_workspace_id_idx on do_not_call_entries (workspace_id, id)');
  await knex.raw('alter table agents add column opt_out_enabled boolean not null default false');
  await knex.raw('alter table agents add column recording_disclosure text');
  await knex.raw('alter table calls add column opted_out_at timestamptz');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table calls drop column opted_out_at');
  await knex.raw('alter table agents drop column recording_disclosure');
  await knex.raw('alter table agents drop column opt_out_enabled');
  await knex.raw('drop table do_not_call_entries');
}
