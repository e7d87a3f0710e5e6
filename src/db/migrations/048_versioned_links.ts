/**
 * The tools, documents and MCP servers an agent version links (issue 35): `agent_versions.links` holds
 * the ids each version names (`{tool_ids, document_ids, mcp_server_ids}`, sorted), written with the
 * version in the write's transaction; the link tables (`agent_tools`, `agent_documents`,
 * `agent_mcp_servers`) stay what the draft links, and attaching or detaching is a write to the agent.
 * Existing versions get the links the agent has now: nothing recorded which links older versions had,
 * so today's links are the best knowledge there is.
 *
 * A detached agent document (`adoc_`) is kept, with its passages, marked `detached_at`, because a
 * version may still name it (a call pinned to that version searches it; a restore brings it back); the
 * agent's deletion removes it. The unique index on (agent_id, source_doc_id) keeps covering detached
 * copies: attaching the document again takes its copy back instead of making a second one.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('agent_versions', (t) => t.jsonb('links'));
  await knex.raw(
    `with l as (
       select a.id as agent_id, jsonb_build_object(
         'tool_ids', coalesce((select jsonb_agg(x.tool_id order by x.tool_id) from agent_tools x where x.agent_id = a.id), '[]'::jsonb),
         'document_ids', coalesce((select jsonb_agg(d.id order by d.id) from agent_documents d where d.agent_id = a.id), '[]'::jsonb),
         'mcp_server_ids', coalesce((select jsonb_agg(m.mcp_server_id order by m.mcp_server_id) from agent_mcp_servers m where m.agent_id = a.id), '[]'::jsonb)
       ) as links
       from agents a)
     update agent_versions v set links = l.links from l where l.agent_id = v.agent_id`,
  );
  await knex.raw(`alter table agent_versions alter column links set not null`);
  await knex.raw(`alter table agent_versions add constraint agent_versions_links_shape check (
    jsonb_typeof(links -> 'tool_ids') = 'array' and jsonb_typeof(links -> 'document_ids') = 'array' and jsonb_typeof(links -> 'mcp_server_ids') = 'array')`);
  await knex.schema.alterTable('agent_documents', (t) => t.timestamp('detached_at', { useTz: true }));
}

export async function down(knex: Knex): Promise<void> {
  // Before 048 a detached document was deleted: the kept copies go (their passages cascade).
  await knex('agent_documents').whereNotNull('detached_at').delete();
  await knex.schema.alterTable('agent_documents', (t) => t.dropColumn('detached_at'));
  await knex.schema.alterTable('agent_versions', (t) => t.dropColumn('links'));
}
