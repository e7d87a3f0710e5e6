import type { Knex } from 'knex';

/**
 * Issue 25, the cost of live events. `conversation_event_heads`: each conversation's last event
 * number. A write numbers its events by bumping its conversations' heads in the same statement that
 * inserts them (the head's row lock orders concurrent writers), instead of an advisory lock and a read
 * of the conversation's highest `seq` first: one statement per write instead of two. Filled from the
 * events already stored; removed with the workspace, or by the retention job once a conversation's
 * events are all gone.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('conversation_event_heads', (t) => {
    t.text('conversation_id').primary();
    t.text('workspace_id').notNullable().references('id').inTable('workspaces').onDelete('CASCADE');
    t.integer('last_seq').notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['updated_at']);
  });
  await knex.raw(
    `insert into conversation_event_heads (conversation_id, workspace_id, last_seq, updated_at)
     select conversation_id, min(workspace_id), max(seq), max(created_at) from conversation_events group by conversation_id`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('conversation_event_heads');
}
