/**
 * Agent tests and test runs (issue 35, part two). `agent_tests` holds each scripted test of an agent
 * (`definition`: turns, expectations, tool mocks, variables as the API stores them); tests are not
 * part of any agent version. A `test_runs` row is one run of tests against one agent version, and
 * `test_run_cases` one repeat of one test in it, with a copy of the test as the run was created
 * (`definition`, `test_name`: editing or deleting the test later changes no run), its verdict,
 * transcript, tool calls and expectation results. A run's counts are read from its cases (at most
 * 1,000, indexed by run), so there are no counters to keep in step. Deleting a test keeps the cases
 * that ran it (`test_id` set null); deleting the agent or the workspace removes everything.
 *
 * `webhook_events.kind`: 032's shape (`^[a-z]+(\.[a-z_]+)+$`) refuses `test_run.completed`; the
 * first part may now hold underscores too.
 */
import type { Knex } from 'knex';

const OLD_KIND_SHAPE = `kind ~ '^[a-z]+(\\.[a-z_]+)+$' and length(kind) <= 64`;
const KIND_SHAPE = `kind ~ '^[a-z]+(_[a-z]+)*(\\.[a-z_]+)+$' and length(kind) <= 64`;

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('agent_tests', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('agent_id').notNullable().references('agents.id').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('type').notNullable();
    t.jsonb('definition').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['agent_id', 'name']);
    t.index(['agent_id', 'id']);
  });
  await knex.raw(`alter table agent_tests add constraint agent_tests_type_check check (type in ('scripted'))`);

  await knex.schema.createTable('test_runs', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('agent_id').notNullable().references('agents.id').onDelete('CASCADE');
    t.integer('agent_version').notNullable();
    t.integer('repeats').notNullable();
    t.integer('concurrency').notNullable();
    t.text('status').notNullable().defaultTo('queued');
    t.boolean('passed');
    t.text('webhook_url');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('started_at', { useTz: true });
    t.timestamp('completed_at', { useTz: true });
    t.index(['workspace_id', 'id']);
    t.index(['agent_id', 'id']);
  });
  await knex.raw(`alter table test_runs add constraint test_runs_version_check check (agent_version >= 1)`);
  await knex.raw(`alter table test_runs add constraint test_runs_repeats_check check (repeats between 1 and 10)`);
  await knex.raw(`alter table test_runs add constraint test_runs_concurrency_check check (concurrency between 1 and 20)`);
  await knex.raw(`alter table test_runs add constraint test_runs_status_check check (status in ('queued', 'running', 'completed'))`);
  // The workspace's active runs, counted at every creation.
  await knex.raw(`create index test_runs_active on test_runs (workspace_id) where status in ('queued', 'running')`);

  await knex.schema.createTable('test_run_cases', (t) => {
    t.text('id').primary();
    t.text('run_id').notNullable().references('test_runs.id').onDelete('CASCADE');
    t.text('workspace_id').notNullable();
    t.text('test_id').references('agent_tests.id').onDelete('SET NULL');
    t.text('test_name').notNullable();
    t.integer('position').notNullable();
    t.integer('repeat').notNullable();
    t.jsonb('definition').notNullable();
    t.text('status').notNullable().defaultTo('pending');
    t.jsonb('transcript').notNullable().defaultTo('[]');
    t.jsonb('tool_calls').notNullable().defaultTo('[]');
    t.jsonb('expectations').notNullable().defaultTo('[]');
    t.text('ended_by');
    t.jsonb('error');
    t.timestamp('started_at', { useTz: true });
    t.timestamp('ended_at', { useTz: true });
    t.integer('duration_ms');
    t.unique(['run_id', 'position', 'repeat']);
    t.index(['run_id', 'id']);
    t.index(['test_id']);
  });
  await knex.raw(`alter table test_run_cases add constraint test_run_cases_status_check check (status in ('pending', 'running', 'passed', 'failed', 'error'))`);

  await knex.raw(`alter table webhook_events drop constraint webhook_events_kind_check`);
  await knex.raw(`alter table webhook_events add constraint webhook_events_kind_check check (${KIND_SHAPE})`);
}

export async function down(knex: Knex): Promise<void> {
  // Events of kinds the old shape refuses go (their deliveries with them).
  await knex.raw(`delete from webhook_events where not (${OLD_KIND_SHAPE})`);
  await knex.raw(`alter table webhook_events drop constraint webhook_events_kind_check`);
  await knex.raw(`alter table webhook_events add constraint webhook_events_kind_check check (${OLD_KIND_SHAPE})`);
  await knex.schema.dropTableIfExists('test_run_cases');
  await knex.schema.dropTableIfExists('test_runs');
  await knex.schema.dropTableIfExists('agent_tests');
}
