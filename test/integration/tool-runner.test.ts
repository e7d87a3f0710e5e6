/**
 * The ToolRunner against real peers: a local HTTP tool endpoint, an MCP server built with the SDK, and
 * the knowledge base in PostgreSQL, all set up through the API as a developer would.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { startHttpPeer, type HttpPeer } from '../helpers/http-peer.js';
import { startMcpPeer, type McpPeer } from '../helpers/mcp-peers.js';
import { mcpToolName, type ToolScope } from '../../src/conversation/tool-runner.js';

let t: TestService;
let tn: Tenant;
let other: Tenant;
let peer: HttpPeer;
let mcpPeer: McpPeer;
before(async () => {
  t = await startTestService();
  tn = await tenant(t);
  other = await tenant(t, 'Other Co');
  peer = await startHttpPeer(async (req, res) => {
    if (req.url.startsWith('/fail')) {
      res.writeHead(500, { 'Content-Type': 'application/json' });
      return res.end('{"error":"boom"}');
    }
    if (req.url.startsWith('/slow')) {
      await new Promise((r) => setTimeout(r, 1000));
      if (!res.destroyed) res.end('{}');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ found: true, got: JSON.parse(req.body || '{}') }));
  });
  mcpPeer = await startMcpPeer();
});
after(async () => {
  await peer.close();
  await mcpPeer.close();
  await t.close();
});

/** The tools of the agent's published version, as a conversation of it sees them (`workspaceId` may be another workspace's). */
async function scope(agentId: string, workspaceId = tn.workspaceId): Promise<ToolScope> {
  const agent = await t.service.agents.findForRuntime(tn.workspaceId, agentId);
  assert.ok(agent);
  return { workspaceId, agentId, links: agent.links };
}

async function api(method: 'get' | 'post' | 'put' | 'delete', path: string, body?: unknown, key = tn.apiKey) {
  let req = t.http[method](path).set('Authorization', `Bearer ${key}`);
  if (body !== undefined) req = req.send(body as object);
  const res = await req;
  assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${res.text}`);
  return res.body;
}

/** A fresh workspace (tool names are unique per workspace) with an agent carrying one of everything. */
async function agentWithEverything() {
  tn = await tenant(t);
  const agent = await api('post', '/api/v1/agents', { name: 'Runner agent' });
  const lookup = await api('post', '/api/v1/tools', {
    name: 'lookup_appointment',
    description: 'Finds an appointment.',
    url: `${peer.url}/lookup`,
    parameters: { type: 'object', properties: { patient: { type: 'string' } }, required: ['patient'] },
    timeout_ms: 5000,
  });
  const failing = await api('post', '/api/v1/tools', { name: 'always_fails', description: 'Fails.', url: `${peer.url}/fail` });
  const slow = await api('post', '/api/v1/tools', { name: 'slow_tool', description: 'Slow.', url: `${peer.url}/slow`, timeout_ms: 5000 });
  for (const tool of [lookup, failing, slow]) await api('put', `/api/v1/agents/${agent.agent_id}/tools/${tool.tool_id}`);
  const doc = await api('post', '/api/v1/documents/text', { name: 'Policy', text: 'A missed appointment costs a fee of 25 dollars.' });
  await api('post', `/api/v1/agents/${agent.agent_id}/documents`, { doc_id: doc.doc_id });
  const server = await api('post', '/api/v1/mcp-servers', { name: 'Order desk', url: mcpPeer.streamableUrl, transport: 'streamable_http', auth_type: 'none' });
  assert.equal(server.status, 'ok', JSON.stringify(server));
  await api('put', `/api/v1/agents/${agent.agent_id}/mcp-servers/${server.mcp_server_id}`);
  return { agentId: agent.agent_id as string, lookup, failing };
}

describe('ToolRunner', () => {
  it('declares the HTTP tools, the MCP tools and search_knowledge of the agent', async () => {
    const { agentId, lookup } = await agentWithEverything();
    const declarations = await t.service.toolRunner.declarations(await scope(agentId));
    const names = declarations.map((d) => d.name).sort();
    assert.deepEqual(names, ['Order_desk__add', 'Order_desk__lookup_order', 'always_fails', 'lookup_appointment', 'search_knowledge', 'slow_tool']);
    const http = declarations.find((d) => d.name === 'lookup_appointment')!;
    assert.deepEqual(http, { name: 'lookup_appointment', description: 'Finds an appointment.', parameters: lookup.parameters });
    const mcp = declarations.find((d) => d.name === 'Order_desk__lookup_order')!;
    assert.equal(mcp.description, 'Returns the shipping status of an order.');
    assert.equal((mcp.parameters as { type: string }).type, 'object');
    assert.equal(mcpToolName('Ünïcode server!', 'x'.repeat(80)).length, 64);
  });

  it('calls an HTTP tool with the arguments as its JSON body', async () => {
    const { agentId } = await agentWithEverything();
    const before = peer.requests.length;
    const out = await t.service.toolRunner.call(await scope(agentId), 'lookup_appointment', { patient: 'Ada' });
    assert.equal(out.ok, true, JSON.stringify(out));
    assert.equal(out.source, 'http');
    assert.equal(out.error, null);
    assert.deepEqual(out.result, { found: true, got: { patient: 'Ada' } });
    assert.ok(out.durationMs >= 0);
    assert.equal(peer.requests.length, before + 1);
  });

  it("validates the model's arguments against the HTTP tool's parameters first: a mismatch is a failed outcome saying why, and the tool is not called", async () => {
    const { agentId } = await agentWithEverything();
    const before = peer.requests.length;
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ patient: 42 }, /'arguments\.patient' must be string/],
      [{}, /'arguments\.patient' must have required property/],
    ];
    for (const [args, error] of cases) {
      const out = await t.service.toolRunner.call(await scope(agentId), 'lookup_appointment', args);
      assert.deepEqual({ ok: out.ok, source: out.source, result: out.result }, { ok: false, source: 'http', result: null }, JSON.stringify(out));
      assert.match(out.error!, /^The arguments do not match the tool's parameters: /);
      assert.match(out.error!, error);
    }
    assert.equal(peer.requests.length, before, 'no request for arguments that do not match');
    const ok = await t.service.toolRunner.call(await scope(agentId), 'lookup_appointment', { patient: 'Ada' });
    assert.equal(ok.ok, true, JSON.stringify(ok));
    assert.equal(peer.requests.length, before + 1);
  });

  it('reports a failing or slow tool as an outcome, never by throwing', async () => {
    const { agentId } = await agentWithEverything();
    const failed = await t.service.toolRunner.call(await scope(agentId), 'always_fails', {});
    assert.deepEqual(
      { ...failed, durationMs: 0 },
      { ok: false, result: { error: 'boom' }, error: 'The endpoint answered 500.', durationMs: 0, source: 'http' },
    );
    const slow = await t.service.toolRunner.call(await scope(agentId), 'slow_tool', {}, { timeoutMs: 150 });
    assert.equal(slow.ok, false);
    assert.equal(slow.error, 'No response within 150 ms.');
    assert.ok(slow.durationMs < 900, String(slow.durationMs));
    const unknown = await t.service.toolRunner.call(await scope(agentId), 'no_such_tool', {});
    assert.equal(unknown.ok, false);
    assert.match(unknown.error!, /No tool named 'no_such_tool'/);
  });

  it('answers search_knowledge from the agent documents', async () => {
    const { agentId } = await agentWithEverything();
    const out = await t.service.toolRunner.call(await scope(agentId), 'search_knowledge', { query: 'missed appointment fee' });
    assert.equal(out.ok, true, JSON.stringify(out));
    assert.equal(out.source, 'knowledge');
    const passages = (out.result as { passages: Array<{ document: string; text: string; score: number }> }).passages;
    assert.equal(passages.length, 1);
    assert.equal(passages[0].document, 'Policy');
    assert.match(passages[0].text, /25 dollars/);
    const empty = await t.service.toolRunner.call(await scope(agentId), 'search_knowledge', { query: '?!' });
    assert.equal(empty.ok, false);
    assert.equal(empty.error, 'The query has no searchable word.');
  });

  it('calls an MCP tool on the attached server', async () => {
    const { agentId } = await agentWithEverything();
    const out = await t.service.toolRunner.call(await scope(agentId), 'Order_desk__lookup_order', { order_id: 'A-17' });
    assert.equal(out.ok, true, JSON.stringify(out));
    assert.equal(out.source, 'mcp');
    assert.match(JSON.stringify(out.result), /Order A-17 has shipped/);
    assert.deepEqual(mcpPeer.calls.at(-1), ['lookup_order', { order_id: 'A-17' }]);
  });

  it('offers nothing detached, and nothing of another workspace', async () => {
    const agent = await api('post', '/api/v1/agents', { name: 'Bare' });
    assert.deepEqual(await t.service.toolRunner.declarations(await scope(agent.agent_id)), []);
    const { agentId, lookup } = await agentWithEverything();
    await api('delete', `/api/v1/agents/${agentId}/tools/${lookup.tool_id}`);
    const names = (await t.service.toolRunner.declarations(await scope(agentId))).map((d) => d.name);
    assert.ok(!names.includes('lookup_appointment'));
    const before = peer.requests.length;
    const detached = await t.service.toolRunner.call(await scope(agentId), 'lookup_appointment', { patient: 'Ada' });
    assert.equal(detached.ok, false);
    assert.equal(peer.requests.length, before, 'a detached tool is not called');

    const foreign = await t.service.toolRunner.call(await scope(agentId, other.workspaceId), 'always_fails', {});
    assert.equal(foreign.ok, false);
    assert.equal(peer.requests.length, before, "another workspace cannot run this agent's tools");
    const foreignSearch = await t.service.toolRunner.call(await scope(agentId, other.workspaceId), 'search_knowledge', { query: 'fee' });
    assert.deepEqual(foreignSearch.result, { passages: [] }, "another workspace finds none of this agent's passages");
  });
});
