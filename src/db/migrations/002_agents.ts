/**
 * Agents and what they carry: HTTP tools (workspace-owned, attached to agents), knowledge documents
 * (workspace documents and their agent-scoped copies) and the full-text index of their passages.
 *
 * Provider configs are jsonb with the credentials sealed by the SecretBox (`auth_token`, `api_key`,
 * `public_key` hold `v1.<iv>.<tag>.<ciphertext>`); the phone numbers live in their own columns so that
 * inbound calls can find the agent answering a number through an index.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('agents', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('description').notNullable().defaultTo('');
    t.text('instruction').notNullable().defaultTo('');
    t.text('first_message').notNullable().defaultTo('');
    t.text('voice_id');
    t.text('language');
    t.text('language_code');
    t.text('accent');
    t.boolean('can_end_conversation').notNullable().defaultTo(false);
    t.text('transfer_phone_number');
    t.text('transfer_criteria');
    t.jsonb('variable_placeholders').notNullable().defaultTo('{}');
    t.jsonb('voicemail_config');
    // {account_sid, auth_token (sealed)}; null: nothing stored for the provider.
    t.jsonb('provider_a_config');
    t.text('provider_a_phone_number');
    t.boolean('provider_a_inbound_enabled').notNullable().defaultTo(false);
    // {api_key (sealed), connection_id, account_sid, public_key (sealed)}.
    t.jsonb('provider_b_config');
    t.text('provider_b_phone_number');
    t.boolean('provider_b_inbound_enabled').notNullable().defaultTo(false);
    t.boolean('enable_webcam').notNullable().defaultTo(true);
    t.boolean('enable_screen_share').notNullable().defaultTo(true);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['workspace_id', 'id']);
  });
  // One agent answers a number at a time (enableInbound refuses a second with phone_number_in_use).
  await knex.raw(`create unique index agents_provider_a_inbound_number on agents (provider_a_phone_number)
    where provider_a_inbound_enabled`);
  await knex.raw(`create unique index agents_provider_b_inbound_number on agents (provider_b_phone_number)
    where provider_b_inbound_enabled`);
  await knex.raw('create index agents_provider_a_phone_number on agents (provider_a_phone_number)');
  await knex.raw('create index agents_provider_b_phone_number on agents (provider_b_phone_number)');

  await knex.schema.createTable('tools', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('description').notNullable();
    t.jsonb('parameters').notNullable();
    t.text('url').notNullable();
    t.text('method').notNullable();
    // {<header name>: <sealed value>}
    t.jsonb('headers').notNullable().defaultTo('{}');
    t.integer('timeout_ms').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['workspace_id', 'name']);
    t.index(['workspace_id', 'id']);
  });
  await knex.raw(`alter table tools add constraint tools_method_check
    check (method in ('GET', 'POST', 'PUT', 'PATCH', 'DELETE'))`);

  await knex.schema.createTable('agent_tools', (t) => {
    t.text('agent_id').notNullable().references('agents.id').onDelete('CASCADE');
    t.text('tool_id').notNullable().references('tools.id').onDelete('CASCADE');
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['agent_id', 'tool_id']);
    t.index(['tool_id']);
  });

  await knex.schema.createTable('documents', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('content_type').notNullable();
    t.integer('size_bytes').notNullable();
    t.integer('char_count').notNullable();
    t.integer('chunk_count').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['workspace_id', 'id']);
  });

  // The agent-scoped copy (`adoc_...`): it outlives its workspace document (source_doc_id set null).
  await knex.schema.createTable('agent_documents', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('agent_id').notNullable().references('agents.id').onDelete('CASCADE');
    t.text('source_doc_id').references('documents.id').onDelete('SET NULL');
    t.text('name').notNullable();
    t.text('content_type').notNullable();
    t.integer('size_bytes').notNullable();
    t.integer('char_count').notNullable();
    t.integer('chunk_count').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['agent_id', 'id']);
    t.index(['source_doc_id']);
  });
  // A workspace document is attached to an agent at most once.
  await knex.raw(`create unique index agent_documents_agent_source on agent_documents (agent_id, source_doc_id)
    where source_doc_id is not null`);

  // Passages of workspace documents (document_id) and of agent-scoped copies (agent_document_id);
  // exactly one owner is set. Searches read only the agent-scoped rows.
  await knex.schema.createTable('knowledge_chunks', (t) => {
    t.bigIncrements('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('document_id').references('documents.id').onDelete('CASCADE');
    t.text('agent_document_id').references('agent_documents.id').onDelete('CASCADE');
    t.text('agent_id').references('agents.id').onDelete('CASCADE');
    t.integer('chunk_index').notNullable();
    t.text('text').notNullable();
    t.index(['document_id', 'chunk_index']);
    t.index(['agent_document_id', 'chunk_index']);
    t.index(['agent_id']);
  });
  await knex.raw(`alter table knowledge_chunks add constraint knowledge_chunks_one_owner
    check ((document_id is null) <> (agent_document_id is null))`);
  await knex.raw(`alter table knowledge_chunks add column tsv tsvector
    generated always as (to_tsvector('simple', text)) stored`);
  await knex.raw('create index knowledge_chunks_tsv on knowledge_chunks using gin (tsv)');
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['knowledge_chunks', 'agent_documents', 'documents', 'agent_tools', 'tools', 'agents']) {
    await knex.schema.dropTableIfExists(table);
  }
}
