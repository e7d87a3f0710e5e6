/**
 * Agent versions (issue 35): every write to an agent makes the next immutable version holding its
 * whole stored configuration (`config`, the agents row's own columns, credentials still sealed), in
 * the write's transaction. The primary key (agent_id, version) is what keeps two instances writing at
 * once from making the same number. `agents` says its newest version (`draft_version`), the one new
 * conversations run (`published_version`) and whether writes publish themselves (`auto_publish`,
 * default true: the behaviour before versions). Existing agents get version 1, published. Each call
 * keeps the version it was created with (`calls.agent_version`).
 */
import type { Knex } from 'knex';

/** Columns of `agents` that are not configuration (kept out of a version's `config`). */
const NOT_CONFIG = ['id', 'workspace_id', 'created_at', 'updated_at', 'draft_version', 'published_version', 'auto_publish'];

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('agents', (t) => {
    t.integer('draft_version').notNullable().defaultTo(1);
    t.integer('published_version').notNullable().defaultTo(1);
    t.boolean('auto_publish').notNullable().defaultTo(true);
  });
  await knex.schema.createTable('agent_versions', (t) => {
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('agent_id').notNullable().references('agents.id').onDelete('CASCADE');
    t.integer('version').notNullable();
    t.jsonb('config').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('published_at', { useTz: true });
    t.primary(['agent_id', 'version']);
  });
  await knex.raw(`alter table agent_versions add constraint agent_versions_version_positive check (version >= 1)`);
  // The version each call runs (null: made before versions); a live call never changes under a publish.
  await knex.schema.alterTable('calls', (t) => t.integer('agent_version'));
  await knex.raw(
    `insert into agent_versions (workspace_id, agent_id, version, config, created_at, published_at)
     select a.workspace_id, a.id, 1, to_jsonb(a) - ?::text[], now(), now() from agents a`,
    [NOT_CONFIG],
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('calls', (t) => t.dropColumn('agent_version'));
  await knex.schema.dropTableIfExists('agent_versions');
  await knex.schema.alterTable('agents', (t) => {
    t.dropColumn('auto_publish');
    t.dropColumn('published_version');
    t.dropColumn('draft_version');
  });
}
