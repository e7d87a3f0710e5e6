/**
 * Tools, documents and MCP servers inside the agent version (issue 35), through the real service, the
 * sandbox carriers and voice service, a local HTTP tool endpoint, an MCP server and PostgreSQL:
 * - attaching or detaching a tool, a document or an MCP server is a write to the agent: the next
 *   version (`AgentVersion.links`), published when `auto_publish` is on, the agent's `ETag` answered;
 *   attaching what is attached (detaching what is not) makes none;
 * - a call runs its version's links: with `auto_publish` off a detach on the draft does not reach calls
 *   of the published version (the tool is called: its endpoint gets the request), a call naming the
 *   draft does not offer it, and after the publish a call pinned to the old version still does; a live
 *   session keeps the links it started with across a detach and publish;
 * - `search_knowledge` searches the version's documents only (a call pinned to a version whose document
 *   the draft detached still finds it; the draft's list and search do not);
 * - restore brings a version's links back (a detached document taken back, a deleted tool skipped);
 * - a stale `If-Match` on any attach or detach is 412 and nothing changes; bad input stores nothing;
 * - deleting a tool or MCP server removes it from every version (shown and run);
 * - migration 048 gives existing versions today's links and undoes cleanly.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, connect, createAgent, mintSession } from '../helpers/realtime.js';
import { startHttpPeer, type HttpPeer } from '../helpers/http-peer.js';
import { startMcpPeer, type McpPeer } from '../helpers/mcp-peers.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { insertWorkspace, migrationDatabase, redoAll, undoFrom } from '../helpers/migrations.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';

let t: TestService;
let tn: Tenant;
let other: Tenant;
let peer: HttpPeer;
let mcpPeer: McpPeer;
let sandbox: SandboxCarriers;
before(async () => {
  t = await startTestService(FAST_CALLS);
  tn = await tenant(t);
  other = await tenant(t, 'Other Co');
  sandbox = t.service.sandbox.carriers!.server;
  peer = await startHttpPeer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ order: 'A-42', status: 'shipped yesterday' }));
  });
  mcpPeer = await startMcpPeer();
});
after(async () => {
  await peer.close();
  await mcpPeer.close();
  await t.close();
});

type Method = 'get' | 'post' | 'put' | 'delete' | 'patch';

function req(method: Method, path: string, body?: unknown, headers: Record<string, string> = {}, key = tn.apiKey) {
  let r = t.http[method](path).set(bearer(key)).set(headers);
  if (body !== undefined) r = r.send(body as object);
  return r;
}

async function ok(method: Method, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await req(method, path, body, headers);
  assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${res.text}`);
  return res;
}

let toolCount = 0;
async function createTool(name = `check_order_${++toolCount}`): Promise<string> {
  const res = await ok('post', '/api/v1/tools', {
    name,
    description: 'Looks an order up.',
    url: `${peer.url}/orders`,
    parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
  });
  return res.body.tool_id;
}

async function createDocument(text = 'A missed appointment costs a fee of 25 dollars.'): Promise<string> {
  return (await ok('post', '/api/v1/documents/text', { name: 'Policy', text })).body.doc_id;
}

async function createMcpServer(): Promise<string> {
  const res = await ok('post', '/api/v1/mcp-servers', { name: 'Order desk', url: mcpPeer.streamableUrl, transport: 'streamable_http', auth_type: 'none' });
  assert.equal(res.body.status, 'ok', JSON.stringify(res.body));
  return res.body.mcp_server_id;
}

async function agentState(agentId: string) {
  const res = await ok('get', `/api/v1/agents/${agentId}`);
  return { draft: res.body.draft_version as number, published: res.body.published_version as number, etag: res.headers.etag as string };
}

async function links(agentId: string, version: number) {
  return (await ok('get', `/api/v1/agents/${agentId}/versions/${version}`)).body.links;
}

const NONE = { tool_ids: [], document_ids: [], mcp_server_ids: [] };

/** What the link tables and versions hold for the agent: a refused write leaves all of it as it was. */
async function stored(agentId: string) {
  const knex = t.service.db.knex;
  return {
    versions: await knex('agent_versions').where({ agent_id: agentId }).orderBy('version').select('version', 'links', 'published_at'),
    tools: await knex('agent_tools').where({ agent_id: agentId }).orderBy('tool_id').pluck('tool_id'),
    documents: await knex('agent_documents').where({ agent_id: agentId }).orderBy('id').select('id', 'detached_at'),
    mcp: await knex('agent_mcp_servers').where({ agent_id: agentId }).orderBy('mcp_server_id').pluck('mcp_server_id'),
    agent: await knex('agents').where({ id: agentId }).first('draft_version', 'published_version'),
  };
}

/** The runtime view of a version, as a call of it gets it, and the tools it declares. */
async function declared(agentId: string, version?: number): Promise<string[]> {
  const agent = await t.service.agents.findForRuntime(tn.workspaceId, agentId, version);
  assert.ok(agent, `version ${version ?? 'published'} runs`);
  const tools = await t.service.toolRunner.declarations({ workspaceId: tn.workspaceId, agentId, links: agent.links });
  return tools.map((d) => d.name).sort();
}

/** A call whose person asks for `ask`, then says goodbye; resolves with the finished call. */
async function callAsking(agentId: string, ask: string, agentVersion?: number) {
  const to = sandboxNumber();
  sandbox.setScript(to, [{ waitForAgent: true }, { say: ask }, { waitForAgent: true }, { say: 'Great, goodbye.' }, { waitForAgent: true }, { hangup: true }]);
  const res = await placeCall(t, tn, { agent_id: agentId, to_number: to, ...(agentVersion ? { agent_version: agentVersion } : {}) });
  assert.equal(res.status, 201, res.text);
  const call = await waitForCall(t, tn, res.body.call_id);
  assert.equal(call.status, 'completed', JSON.stringify(call));
  return call;
}

describe('attach and detach are writes to the agent', () => {
  it('each makes the next version holding the links, published with auto_publish, and answers the ETag', async () => {
    const agentId = (await ok('post', '/api/v1/agents', { name: 'Links' })).body.agent_id;
    const toolId = await createTool();
    const docId = await createDocument();
    const serverId = await createMcpServer();

    const attachedTool = await ok('put', `/api/v1/agents/${agentId}/tools/${toolId}`);
    assert.equal(attachedTool.body.tool_id, toolId);
    assert.equal(attachedTool.headers.etag, '"2.2"');
    const attachedDoc = await ok('post', `/api/v1/agents/${agentId}/documents`, { doc_id: docId });
    assert.equal(attachedDoc.status, 201);
    assert.equal(attachedDoc.headers.etag, '"3.3"');
    const adoc = attachedDoc.body.doc_id as string;
    const attachedServer = await ok('put', `/api/v1/agents/${agentId}/mcp-servers/${serverId}`);
    assert.equal(attachedServer.headers.etag, '"4.4"');

    assert.deepEqual(await links(agentId, 1), NONE);
    assert.deepEqual(await links(agentId, 2), { ...NONE, tool_ids: [toolId] });
    assert.deepEqual(await links(agentId, 3), { ...NONE, tool_ids: [toolId], document_ids: [adoc] });
    assert.deepEqual(await links(agentId, 4), { tool_ids: [toolId], document_ids: [adoc], mcp_server_ids: [serverId] });
    const list = (await ok('get', `/api/v1/agents/${agentId}/versions`)).body.data;
    assert.deepEqual(
      list.map((v: { version: number; links: unknown; is_published: boolean }) => [v.version, v.is_published]),
      [
        [4, true],
        [3, false],
        [2, false],
        [1, false],
      ],
    );
    assert.deepEqual(list[0].links, await links(agentId, 4));

    // Attaching what is attached changes nothing: no version, the same ETag.
    assert.equal((await ok('put', `/api/v1/agents/${agentId}/tools/${toolId}`)).headers.etag, '"4.4"');
    assert.equal((await ok('put', `/api/v1/agents/${agentId}/mcp-servers/${serverId}`)).headers.etag, '"4.4"');

    const detachedTool = await ok('delete', `/api/v1/agents/${agentId}/tools/${toolId}`);
    assert.deepEqual(detachedTool.body, { status: 'detached', tool_id: toolId });
    assert.equal(detachedTool.headers.etag, '"5.5"');
    const detachedDoc = await ok('delete', `/api/v1/agents/${agentId}/documents/${docId}`);
    assert.deepEqual(detachedDoc.body, { status: 'detached', doc_id: adoc });
    assert.equal(detachedDoc.headers.etag, '"6.6"');
    const detachedServer = await ok('delete', `/api/v1/agents/${agentId}/mcp-servers/${serverId}`);
    assert.equal(detachedServer.headers.etag, '"7.7"');
    assert.deepEqual(await links(agentId, 7), NONE);
    assert.deepEqual(await links(agentId, 4), { tool_ids: [toolId], document_ids: [adoc], mcp_server_ids: [serverId] }, 'versions never change');
    // Detaching what is not attached changes nothing.
    assert.equal((await ok('delete', `/api/v1/agents/${agentId}/tools/${toolId}`)).headers.etag, '"7.7"');
    assert.equal((await ok('delete', `/api/v1/agents/${agentId}/mcp-servers/${serverId}`)).headers.etag, '"7.7"');
    assert.equal((await req('delete', `/api/v1/agents/${agentId}/documents/${adoc}`)).status, 404, 'not in the draft any more');

    // The draft's list and search hide the detached document; attaching it again takes its copy back.
    assert.deepEqual((await ok('get', `/api/v1/agents/${agentId}/documents`)).body.data, []);
    assert.deepEqual((await ok('post', `/api/v1/agents/${agentId}/knowledge/search`, { query: 'missed appointment fee' })).body.data, []);
    const again = await ok('post', `/api/v1/agents/${agentId}/documents`, { doc_id: docId });
    assert.equal(again.body.doc_id, adoc, 'one copy per document and agent');
    assert.equal(again.headers.etag, '"8.8"');
    assert.deepEqual(await links(agentId, 8), { ...NONE, document_ids: [adoc] });
    assert.equal((await ok('post', `/api/v1/agents/${agentId}/knowledge/search`, { query: 'missed appointment fee' })).body.data.length, 1);
  });

  it('with auto_publish off each makes a draft: the published version keeps its links until a publish', async () => {
    const agentId = (await ok('post', '/api/v1/agents', { name: 'Drafts', auto_publish: false })).body.agent_id;
    const toolId = await createTool();
    const res = await ok('put', `/api/v1/agents/${agentId}/tools/${toolId}`);
    assert.equal(res.headers.etag, '"2.1"');
    assert.deepEqual(await declared(agentId), [], 'the published version 1 links nothing');
    assert.deepEqual(await declared(agentId, 2), [`check_order_${toolCount}`]);
    assert.equal((await ok('post', `/api/v1/agents/${agentId}/publish`, {})).headers.etag, '"2.2"');
    assert.deepEqual(await declared(agentId), [`check_order_${toolCount}`]);
  });
});

describe('a call runs the links of its version', () => {
  it('a detach on the draft reaches calls only when published; a call pinned to the old version still calls the tool', async () => {
    const name = `check_order_${++toolCount}`;
    const toolId = await createTool(name);
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { auto_publish: false });
    await ok('put', `/api/v1/agents/${agentId}/tools/${toolId}`);
    await ok('post', `/api/v1/agents/${agentId}/publish`, {});
    const detached = await ok('delete', `/api/v1/agents/${agentId}/tools/${toolId}`);
    assert.equal(detached.headers.etag, '"3.2"', 'version 3, a draft; version 2 published');
    const ask = `Please run ${name} for A-42.`;

    // The published version 2 still has the tool: the call calls it and its endpoint gets the request.
    let before = peer.requests.length;
    const published = await callAsking(agentId, ask);
    assert.equal(published.agent_version, 2);
    assert.deepEqual(
      published.tool_calls.map((c: { name: string; ok: boolean; source: string }) => [c.name, c.ok, c.source]),
      [[name, true, 'http']],
    );
    assert.equal(peer.requests.length, before + 1, 'the tool endpoint was called');

    // A call of the draft (version 3) is not offered it.
    before = peer.requests.length;
    const draft = await callAsking(agentId, ask, 3);
    assert.equal(draft.agent_version, 3);
    assert.deepEqual(draft.tool_calls, []);
    assert.equal(peer.requests.length, before, 'no request from a version without the tool');

    // Published: new calls lose it; a call pinned to version 2 keeps it.
    await ok('post', `/api/v1/agents/${agentId}/publish`, {});
    const after = await callAsking(agentId, ask);
    assert.deepEqual([after.agent_version, after.tool_calls], [3, []]);
    before = peer.requests.length;
    const pinned = await callAsking(agentId, ask, 2);
    assert.equal(pinned.agent_version, 2);
    assert.deepEqual(
      pinned.tool_calls.map((c: { name: string; ok: boolean }) => [c.name, c.ok]),
      [[name, true]],
    );
    assert.equal(peer.requests.length, before + 1);
    assert.ok(pinned.transcript.some((e: { role: string; text: string }) => e.role === 'model' && e.text.includes('shipped yesterday')));
  });

  it('a live session keeps the links it started with across a detach and publish; the next session has the new ones', async () => {
    const name = `check_order_${++toolCount}`;
    const toolId = await createTool(name);
    const agentId = await createAgent(t, tn);
    await ok('put', `/api/v1/agents/${agentId}/tools/${toolId}`);
    const ask = Buffer.from(`Please run ${name} for A-42.`).toString('base64');
    const live = connect((await mintSession(t, tn, agentId, 'voice')).ws_url);
    await live.next('session_started');
    await live.next('turn_complete');
    // Detached and published (auto_publish) while the session runs.
    assert.equal((await ok('delete', `/api/v1/agents/${agentId}/tools/${toolId}`)).headers.etag, '"3.3"');
    const before = peer.requests.length;
    live.sendFrame('text/plain', ask);
    assert.deepEqual(await live.next('tool_call'), { type: 'tool_call', name, status: 'started' });
    assert.deepEqual(await live.next('tool_call'), { type: 'tool_call', name, status: 'completed' });
    await live.next('turn_complete');
    await live.close();
    assert.equal(peer.requests.length, before + 1, 'the live session still called the tool');

    const next = connect((await mintSession(t, tn, agentId, 'voice')).ws_url);
    await next.next('session_started');
    await next.next('turn_complete');
    next.sendFrame('text/plain', ask);
    const said = await next.next((m) => m.type === 'transcript' && m.role === 'model' && m.final === true);
    assert.match(String(said.text), /I heard/, 'the next session is not offered the tool');
    await next.next('turn_complete');
    await next.close();
    assert.equal(peer.requests.length, before + 1);
  });

  it("search_knowledge searches the version's documents: a call pinned to a version still finds a document the draft detached", async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const kept = await createDocument('The clinic opens at nine on weekdays.');
    const dropped = await createDocument('A missed appointment costs a fee of 25 dollars.');
    await ok('post', `/api/v1/agents/${agentId}/documents`, { doc_id: kept });
    const droppedCopy = (await ok('post', `/api/v1/agents/${agentId}/documents`, { doc_id: dropped })).body.doc_id;
    await ok('delete', `/api/v1/agents/${agentId}/documents/${dropped}`);
    assert.deepEqual(await agentState(agentId).then((s) => [s.draft, s.published]), [4, 4]);
    assert.ok((await links(agentId, 3)).document_ids.includes(droppedCopy));
    assert.ok(!(await links(agentId, 4)).document_ids.includes(droppedCopy));

    const ask = 'Please search knowledge missed appointment fee';
    const passagesOf = (call: Record<string, any>) =>
      call.tool_calls.flatMap((c: { name: string; result: { passages?: Array<{ text: string }> } }) =>
        c.name === 'search_knowledge' ? (c.result.passages ?? []).map((p) => p.text) : [],
      );
    const current = await callAsking(agentId, ask);
    assert.equal(current.agent_version, 4);
    assert.equal(current.tool_calls.length, 1, JSON.stringify(current.tool_calls));
    assert.deepEqual(passagesOf(current), [], "the published version's documents do not say it");
    const pinned = await callAsking(agentId, ask, 3);
    assert.equal(pinned.agent_version, 3);
    assert.deepEqual(passagesOf(pinned), ['A missed appointment costs a fee of 25 dollars.']);
    // The draft's search (the API) does not see the detached copy either.
    assert.deepEqual((await ok('post', `/api/v1/agents/${agentId}/knowledge/search`, { query: 'missed appointment fee' })).body.data, []);
  });
});

describe('restore, stale writes, bad input, deletion', () => {
  it("restore brings a version's links back: a detached document taken back, a deleted tool skipped", async () => {
    const agentId = (await ok('post', '/api/v1/agents', { name: 'Restore' })).body.agent_id;
    const keptTool = await createTool();
    const deletedTool = await createTool();
    const serverId = await createMcpServer();
    const docId = await createDocument();
    await ok('put', `/api/v1/agents/${agentId}/tools/${keptTool}`);
    await ok('put', `/api/v1/agents/${agentId}/tools/${deletedTool}`);
    await ok('put', `/api/v1/agents/${agentId}/mcp-servers/${serverId}`);
    const adoc = (await ok('post', `/api/v1/agents/${agentId}/documents`, { doc_id: docId })).body.doc_id;
    assert.equal((await agentState(agentId)).draft, 5);
    // Version 6 onwards: everything detached, one tool deleted from the workspace, a newer tool attached.
    await ok('delete', `/api/v1/agents/${agentId}/tools/${keptTool}`);
    await ok('delete', `/api/v1/agents/${agentId}/mcp-servers/${serverId}`);
    await ok('delete', `/api/v1/agents/${agentId}/documents/${adoc}`);
    const newer = await createTool();
    await ok('put', `/api/v1/agents/${agentId}/tools/${newer}`);
    await ok('delete', `/api/v1/tools/${deletedTool}`);
    assert.deepEqual(
      await links(agentId, 5),
      { tool_ids: [keptTool], document_ids: [adoc], mcp_server_ids: [serverId] },
      'a deleted tool leaves every version',
    );

    const restored = await ok('post', `/api/v1/agents/${agentId}/versions/5/restore`, {});
    assert.equal(restored.body.draft_version, 10);
    assert.deepEqual(await links(agentId, 10), { tool_ids: [keptTool], document_ids: [adoc], mcp_server_ids: [serverId] });
    const ids = async (path: string, key: string) =>
      (await ok('get', `/api/v1/agents/${agentId}/${path}`)).body.data.map((x: Record<string, string>) => x[key]);
    assert.deepEqual(await ids('tools', 'tool_id'), [keptTool]);
    assert.deepEqual(await ids('documents', 'doc_id'), [adoc]);
    assert.deepEqual(await ids('mcp-servers', 'mcp_server_id'), [serverId]);
    const names = await declared(agentId);
    assert.ok(names.includes('search_knowledge') && names.includes('Order_desk__lookup_order'), names.join());
    assert.equal(names.filter((n) => n.startsWith('check_order_')).length, 1, names.join());
  });

  it('a stale If-Match on any attach or detach is 412 and changes nothing; the current one writes', async () => {
    const agentId = (await ok('post', '/api/v1/agents', { name: 'Concurrency' })).body.agent_id;
    const toolId = await createTool();
    const docId = await createDocument();
    const serverId = await createMcpServer();
    const stale = (await agentState(agentId)).etag;
    await ok('patch', `/api/v1/agents/${agentId}`, { instruction: 'Someone else wrote.' });
    const adoc = (await ok('post', `/api/v1/agents/${agentId}/documents`, { doc_id: docId })).body.doc_id;
    await ok('put', `/api/v1/agents/${agentId}/tools/${toolId}`);
    const before = await stored(agentId);
    const writes: Array<[Method, string, unknown]> = [
      ['put', `/api/v1/agents/${agentId}/tools/${await createTool()}`, undefined],
      ['delete', `/api/v1/agents/${agentId}/tools/${toolId}`, undefined],
      ['post', `/api/v1/agents/${agentId}/documents`, { doc_id: await createDocument('Other text.') }],
      ['delete', `/api/v1/agents/${agentId}/documents/${adoc}`, undefined],
      ['put', `/api/v1/agents/${agentId}/mcp-servers/${serverId}`, undefined],
      ['delete', `/api/v1/agents/${agentId}/mcp-servers/${serverId}`, undefined],
    ];
    for (const [method, path, body] of writes) {
      const res = await req(method, path, body, { 'If-Match': stale });
      assert.equal(res.status, 412, `${method} ${path}: ${res.text}`);
      assert.equal(res.body.error.code, 'precondition_failed');
      assert.equal(res.body.error.param, 'If-Match');
    }
    assert.deepEqual(await stored(agentId), before, 'nothing written');
    const current = (await agentState(agentId)).etag;
    const res = await req('put', `/api/v1/agents/${agentId}/mcp-servers/${serverId}`, undefined, { 'If-Match': current });
    assert.equal(res.status, 200, res.text);
    assert.notEqual(res.headers.etag, current);
    assert.equal(res.headers.etag, (await agentState(agentId)).etag);
  });

  it('bad input stores nothing: unknown or foreign resources, a malformed body, a document attached twice', async () => {
    const agentId = (await ok('post', '/api/v1/agents', { name: 'Refusals' })).body.agent_id;
    const docId = await createDocument();
    await ok('post', `/api/v1/agents/${agentId}/documents`, { doc_id: docId });
    const otherTool = (await req('post', '/api/v1/tools', { name: 'foreign_tool', description: 'Not yours.', url: `${peer.url}/x` }, {}, other.apiKey)).body
      .tool_id;
    assert.ok(otherTool);
    const before = await stored(agentId);
    const cases: Array<[Method, string, unknown, number, string]> = [
      ['put', `/api/v1/agents/${agentId}/tools/tool_01JD5Z7Q8Y1C2B3A4N5M6K7P9Z`, undefined, 404, 'tool_not_found'],
      ['put', `/api/v1/agents/${agentId}/tools/${otherTool}`, undefined, 403, 'forbidden'],
      ['put', `/api/v1/agents/agt_01JD5Z7Q8Y1C2B3A4N5M6K7P9Z/tools/${otherTool}`, undefined, 404, 'agent_not_found'],
      ['post', `/api/v1/agents/${agentId}/documents`, {}, 422, 'missing_field'],
      ['post', `/api/v1/agents/${agentId}/documents`, { doc_id: docId }, 409, 'document_already_attached'],
      ['post', `/api/v1/agents/${agentId}/documents`, { doc_id: 'doc_01JD5Z7Q8Y1C2B3A4N5M6K7P9Z' }, 404, 'document_not_found'],
      ['delete', `/api/v1/agents/${agentId}/documents/doc_01JD5Z7Q8Y1C2B3A4N5M6K7P9Z`, undefined, 404, 'document_not_found'],
      ['put', `/api/v1/agents/${agentId}/mcp-servers/mcp_01JD5Z7Q8Y1C2B3A4N5M6K7P9Z`, undefined, 404, 'mcp_server_not_found'],
      ['put', `/api/v1/agents/${agentId}/tools/${otherTool}`, undefined, 403, 'forbidden'],
    ];
    for (const [method, path, body, status, code] of cases) {
      const res = await req(method, path, body, { 'If-Match': '*' });
      assert.equal(res.status, status, `${method} ${path}: ${res.text}`);
      assert.equal(res.body.error.code, code, res.text);
    }
    const foreign = await req('put', `/api/v1/agents/${agentId}/tools/${otherTool}`, undefined, {}, other.apiKey);
    assert.equal(foreign.status, 403, "another workspace's key cannot write this agent");
    assert.deepEqual(await stored(agentId), before, 'nothing stored');
  });

  it('a draft links at most 128 tools: one more is 422 agent_link_limit_reached and stores nothing', async () => {
    const agentId = (await ok('post', '/api/v1/agents', { name: 'Bounded' })).body.agent_id;
    const knex = t.service.db.knex;
    const ids = Array.from({ length: 129 }, (_, i) => `tool_01JD5Z7Q8Y1C2B3A4N5M6K${String(i).padStart(4, '0')}`);
    await knex('tools').insert(
      ids.map((id) => ({
        id,
        workspace_id: tn.workspaceId,
        name: `bulk_${id.slice(-4)}`,
        description: 'd',
        parameters: '{}',
        url: `${peer.url}/x`,
        method: 'POST',
        headers: '{}',
        timeout_ms: 1000,
      })),
    );
    await knex('agent_tools').insert(ids.slice(0, 127).map((id) => ({ agent_id: agentId, tool_id: id, workspace_id: tn.workspaceId })));
    assert.equal((await ok('put', `/api/v1/agents/${agentId}/tools/${ids[127]}`)).headers.etag, '"2.2"', 'the 128th is linked');
    assert.equal((await links(agentId, 2)).tool_ids.length, 128);
    const before = await stored(agentId);
    const refused = await req('put', `/api/v1/agents/${agentId}/tools/${ids[128]}`);
    assert.equal(refused.status, 422, refused.text);
    assert.deepEqual([refused.body.error.code, refused.body.error.param], ['agent_link_limit_reached', 'tool_id']);
    assert.deepEqual(await stored(agentId), before, 'nothing stored');
    assert.equal((await ok('put', `/api/v1/agents/${agentId}/tools/${ids[0]}`)).headers.etag, '"2.2"', 'one already linked is no new link');
  });

  it('deleting a tool or MCP server removes it from every version at runtime', async () => {
    const agentId = (await ok('post', '/api/v1/agents', { name: 'Deletion', auto_publish: false })).body.agent_id;
    const name = `check_order_${++toolCount}`;
    const toolId = await createTool(name);
    const serverId = await createMcpServer();
    await ok('put', `/api/v1/agents/${agentId}/tools/${toolId}`);
    await ok('put', `/api/v1/agents/${agentId}/mcp-servers/${serverId}`);
    await ok('post', `/api/v1/agents/${agentId}/publish`, {});
    assert.deepEqual(await declared(agentId), ['Order_desk__add', 'Order_desk__lookup_order', name]);
    assert.deepEqual(await declared(agentId, 2), [name]);
    await ok('delete', `/api/v1/tools/${toolId}`);
    await ok('delete', `/api/v1/mcp-servers/${serverId}`);
    assert.deepEqual(await declared(agentId), []);
    assert.deepEqual(await declared(agentId, 2), []);
    assert.deepEqual(await links(agentId, 3), NONE);
    const agent = await t.service.agents.findForRuntime(tn.workspaceId, agentId);
    const before = peer.requests.length;
    const out = await t.service.toolRunner.call({ workspaceId: tn.workspaceId, agentId, links: { ...agent!.links, toolIds: [toolId] } }, name, {});
    assert.equal(out.ok, false);
    assert.equal(peer.requests.length, before, 'a deleted tool is never called, whatever a version says');
  });
});

describe('migration 048', () => {
  const database = migrationDatabase();
  const WS = 'ws_01JD5Z7Q8Y1C2B3A4N5M6K7P8S';
  const AGENT = 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9K';
  const TOOLS = ['tool_01JD5Z8A1B2C3D4E5F6G7H8J9B', 'tool_01JD5Z8A1B2C3D4E5F6G7H8J9A'];
  const ADOC = 'adoc_01JD5Z8A1B2C3D4E5F6G7H8J9K';

  it("gives every existing version the agent's links of today, and undoes cleanly", async () => {
    const knex = database.knex();
    await undoFrom(knex, '048');
    assert.equal(await knex.schema.hasColumn('agent_versions', 'links'), false);
    await insertWorkspace(knex, WS);
    await knex('agents').insert({ id: AGENT, workspace_id: WS, name: 'Before', draft_version: 2, published_version: 2 });
    for (const version of [1, 2])
      await knex('agent_versions').insert({ workspace_id: WS, agent_id: AGENT, version, config: JSON.stringify({ name: 'Before' }) });
    for (const id of TOOLS) {
      await knex('tools').insert({
        id,
        workspace_id: WS,
        name: id.slice(-4),
        description: 'd',
        parameters: '{}',
        url: 'https://example.com',
        method: 'POST',
        headers: '{}',
        timeout_ms: 1000,
      });
      await knex('agent_tools').insert({ agent_id: AGENT, tool_id: id, workspace_id: WS });
    }
    await knex('agent_documents').insert({
      id: ADOC,
      workspace_id: WS,
      agent_id: AGENT,
      name: 'Doc',
      content_type: 'text/plain',
      size_bytes: 1,
      char_count: 1,
      chunk_count: 0,
    });
    const bare = 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9M';
    await knex('agents').insert({ id: bare, workspace_id: WS, name: 'Bare' });
    await knex('agent_versions').insert({ workspace_id: WS, agent_id: bare, version: 1, config: '{}' });

    await redoAll(knex);
    const versions = await knex('agent_versions').orderBy(['agent_id', 'version']).select('agent_id', 'version', 'links');
    const today = { tool_ids: [...TOOLS].sort(), document_ids: [ADOC], mcp_server_ids: [] };
    assert.deepEqual(versions, [
      { agent_id: AGENT, version: 1, links: today },
      { agent_id: AGENT, version: 2, links: today },
      { agent_id: bare, version: 1, links: NONE },
    ]);
    await knex('agent_documents').where({ id: ADOC }).update({ detached_at: knex.fn.now() });

    await undoFrom(knex, '048');
    assert.equal(await knex.schema.hasColumn('agent_versions', 'links'), false);
    assert.equal(await knex.schema.hasColumn('agent_documents', 'detached_at'), false);
    assert.equal((await knex('agent_documents').where({ id: ADOC })).length, 0, 'a detached document was deleted before 048');
    await redoAll(knex);
  });
});
