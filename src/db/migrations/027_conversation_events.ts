import type { Knex } from 'knex';

/**
 * Issue 22, live events. `conversation_events`: each phone call's and web session's events in order
 * (`seq` from 1 per conversation, unique with it), what the event streams of every instance read
 * after a NOTIFY on `conversation_events`; removed with their workspace or after the retention
 * period by a job (`EVENTS_RETENTION_MS`). The webhook event kinds `call.status_changed` and
 * `call.transcript` join the two of the spec.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('conversation_events', (t) => {
    t.text('workspace_id').notNullable().references('id').inTable('workspaces').onDelete('CASCADE');
    t.text('conversation_id').notNullable();
    t.integer('seq').notNullable();
    t.text('type').notNullable();
    t.jsonb('data').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['conversation_id', 'seq']);
    t.index(['created_at']);
  });
  await knex.raw(
    `alter table conversation_events add constraint conversation_events_type_check check (type in ('status', 'transcript', 'tool_call', 'tool_result', 'interrupted', 'transfer', 'dtmf', 'end'))`,
  );
  await knex.raw(`alter table webhook_events drop constraint webhook_events_kind_check`);
  await knex.raw(
    `alter table webhook_events add constraint webhook_events_kind_check check (kind in ('call.completed', 'batch.completed', 'call.status_changed', 'call.transcript'))`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex('webhook_events').whereIn('kind', ['call.status_changed', 'call.transcript']).delete();
  await knex.raw(`alter table webhook_events drop constraint webhook_events_kind_check`);
  await knex.raw(`alter table webhook_events add constraint webhook_events_kind_check check (kind in ('call.completed', 'batch.completed'))`);
  await knex.schema.dropTable('conversation_events');
}
