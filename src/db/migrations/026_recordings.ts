import type { Knex } from 'knex';

/**
 * Issue 22, recordings. The recording setting: the agent's default, a batch's and a call's own choice
 * (null: follow the agent), and on each call the setting in force when it was created. The workspace's
 * retention (null: the deployment's default). A recording is a row per conversation (kept, with why,
 * after its audio is deleted or expires, so a download can say so) and its audio in chunks of about a
 * second, in order: in `data` with the PostgreSQL storage, in an object per chunk with the S3 storage
 * (`data` null). `bytes` is the PCM written so far, advanced in the transaction that adds each chunk.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('agents', (t) => {
    t.boolean('recording_enabled').notNullable().defaultTo(false);
  });
  await knex.schema.alterTable('batches', (t) => {
    t.boolean('recording_enabled');
  });
  await knex.schema.alterTable('calls', (t) => {
    t.boolean('recording_enabled').notNullable().defaultTo(false);
  });
  await knex.schema.alterTable('workspaces', (t) => {
    t.integer('recording_retention_days');
    t.timestamp('recording_settings_updated_at', { useTz: true });
  });
  await knex.schema.createTable('recordings', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('id').inTable('workspaces').onDelete('CASCADE');
    t.text('conversation_id').notNullable().unique();
    t.text('kind').notNullable();
    t.text('storage').notNullable();
    t.integer('sample_rate').notNullable();
    t.integer('channels').notNullable();
    t.bigInteger('bytes').notNullable().defaultTo(0);
    t.integer('chunks').notNullable().defaultTo(0);
    t.boolean('truncated').notNullable().defaultTo(false);
    t.text('status').notNullable().defaultTo('recording');
    t.text('removed_reason');
    t.timestamp('created_at', { useTz: true }).notNullable();
    t.timestamp('completed_at', { useTz: true });
    t.timestamp('removed_at', { useTz: true });
    t.index(['workspace_id', 'created_at']);
  });
  await knex.schema.createTable('recording_chunks', (t) => {
    t.text('recording_id').notNullable().references('id').inTable('recordings').onDelete('CASCADE');
    t.integer('seq').notNullable();
    t.bigInteger('offset').notNullable();
    t.integer('size').notNullable();
    t.binary('data');
    t.primary(['recording_id', 'seq']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('recording_chunks');
  await knex.schema.dropTable('recordings');
  await knex.schema.alterTable('workspaces', (t) => {
    t.dropColumn('recording_retention_days');
    t.dropColumn('recording_settings_updated_at');
  });
  await knex.schema.alterTable('calls', (t) => t.dropColumn('recording_enabled'));
  await knex.schema.alterTable('batches', (t) => t.dropColumn('recording_enabled'));
  await knex.schema.alterTable('agents', (t) => t.dropColumn('recording_enabled'));
}
