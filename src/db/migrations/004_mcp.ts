/**
 * MCP servers of a workspace, their attachment to agents, and the pending OAuth consents.
 *
 * Credentials are sealed by the SecretBox (`v1.<iv>.<tag>.<ciphertext>`): `static_headers` maps each
 * header name to its sealed value (a bearer token is stored as `Authorization: Bearer ...`), the OAuth
 * client secret and tokens are sealed text. `oauth_states` keeps only the SHA-256 of each state.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('mcp_servers', (t) => {
    t.text('id').primary();
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('url').notNullable();
    t.text('transport').notNullable();
    t.text('auth_type').notNullable();
    // {<header name>: <sealed value>}; null unless auth_type is static.
    t.jsonb('static_headers');
    t.text('oauth_client_id');
    t.text('oauth_client_secret');
    t.text('oauth_authorization_url');
    t.text('oauth_token_url');
    t.jsonb('oauth_scopes');
    t.text('oauth_access_token');
    t.text('oauth_refresh_token');
    t.timestamp('oauth_expires_at', { useTz: true });
    t.text('oauth_status').notNullable();
    t.text('status').notNullable();
    t.text('error_code');
    t.text('error_message');
    t.jsonb('tools').notNullable().defaultTo('[]');
    t.timestamp('tools_refreshed_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['workspace_id', 'id']);
  });
  await knex.raw(`alter table mcp_servers add constraint mcp_servers_kinds_check check (
    transport in ('sse', 'streamable_http')
    and auth_type in ('none', 'static', 'oauth2')
    and oauth_status in ('not_applicable', 'consent_required', 'authorized', 'refresh_failed')
    and status in ('ok', 'error'))`);

  await knex.schema.createTable('agent_mcp_servers', (t) => {
    t.text('agent_id').notNullable().references('agents.id').onDelete('CASCADE');
    t.text('mcp_server_id').notNullable().references('mcp_servers.id').onDelete('CASCADE');
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['agent_id', 'mcp_server_id']);
    t.index(['mcp_server_id']);
  });

  await knex.schema.createTable('mcp_oauth_states', (t) => {
    t.text('state_hash').primary();
    t.text('mcp_server_id').notNullable().references('mcp_servers.id').onDelete('CASCADE');
    t.text('workspace_id').notNullable().references('workspaces.id').onDelete('CASCADE');
    // The PKCE verifier, sealed.
    t.text('code_verifier').notNullable();
    t.text('redirect_uri').notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['mcp_server_id']);
    t.index(['expires_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['mcp_oauth_states', 'agent_mcp_servers', 'mcp_servers']) await knex.schema.dropTableIfExists(table);
}
