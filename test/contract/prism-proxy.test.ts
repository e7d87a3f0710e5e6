/**
 * The contract checked by a validator nobody here wrote: every public operation is driven through
 * Stoplight Prism's validating proxy (`prism proxy --errors`, with the document the service serves at
 * /openapi.json) in front of a real service. Prism checks each request against the document before
 * forwarding it, and each response after: with --errors, a request the document refuses is answered
 * by Prism itself (a `stoplight.io/prism/errors` problem), and so is a response that breaks the
 * document (`VIOLATIONS`). The driver sends what a client would, once per operation at least (the
 * error paths too: a 404, a 409, a 422), and expects the service's own answer every time, so any
 * answer of Prism's is a failure naming what it found.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTestService, type TestService } from '../helpers/service.js';
import { startHttpPeer, type HttpPeer } from '../helpers/http-peer.js';
import { startMcpPeer, startOAuthPeer, type McpPeer, type OAuthPeer } from '../helpers/mcp-peers.js';
import { FAST_CALLS, providerConfig, sandboxNumber } from '../helpers/calls.js';
import { sandboxNumbers } from '../helpers/batches.js';
import { freePort } from '../helpers/process.js';
import { connect, waitFor } from '../helpers/realtime.js';

const root = path.resolve(import.meta.dirname, '../..');

let t: TestService;
let peer: HttpPeer;
let mcp: McpPeer;
let oauth: OAuthPeer;
let oauthMcp: McpPeer;
let prism: ChildProcess;
let prismLog = '';
let proxyUrl: string;
let dir: string;

interface Operation {
  operationId: string;
  method: string;
  path: string;
  json: boolean;
}
const operations = new Map<string, Operation>();
/** Each operation's statuses as the proxy passed them on. */
const answered = new Map<string, number[]>();

before(async () => {
  [t, peer, mcp, oauth] = await Promise.all([
    startTestService({ ...FAST_CALLS, WEBHOOK_POLL_INTERVAL_MS: '100', VOICE_SANDBOX_SPEED: '20', VOICE_SANDBOX_MS_PER_CHAR: '0' }),
    startHttpPeer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ order: 'A-42', status: 'shipped' }));
    }),
    startMcpPeer(),
    startOAuthPeer({ expiresIn: 3600 }),
  ]);
  oauthMcp = await startMcpPeer({ acceptBearer: (tok) => oauth.isValidAccessToken(tok) });
  // The document exactly as the service serves it.
  const served = await (await fetch(`${t.url}/openapi.json`)).json();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prism-'));
  fs.writeFileSync(path.join(dir, 'openapi.json'), JSON.stringify(served));
  for (const [p, item] of Object.entries<Record<string, any>>(served.paths))
    for (const [method, op] of Object.entries<any>(item))
      if (op?.operationId)
        operations.set(op.operationId, {
          operationId: op.operationId,
          method: method.toUpperCase(),
          path: p,
          json: Boolean(op.requestBody?.content?.['application/json']),
        });

  const port = await freePort();
  proxyUrl = `http://127.0.0.1:${port}`;
  prism = spawn(
    path.join(root, 'node_modules/.bin/prism'),
    ['proxy', path.join(dir, 'openapi.json'), t.url, '--errors', '--host', '127.0.0.1', '--port', String(port)],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } },
  );
  prism.stdout!.on('data', (d: Buffer) => (prismLog += d.toString()));
  prism.stderr!.on('data', (d: Buffer) => (prismLog += d.toString()));
  await waitFor(async () => prismLog.includes('Prism is listening'), 60_000, `Prism to listen:\n${prismLog.slice(-2000)}`);
});

after(async () => {
  prism?.kill();
  await Promise.all([t?.close(), peer?.close(), mcp?.close(), oauth?.close(), oauthMcp?.close()]);
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

interface Sent {
  params?: Record<string, string>;
  query?: Record<string, string>;
  token?: string;
  body?: unknown;
  form?: FormData;
  /** The status the service answers; anything else fails. */
  expect: number;
}

/** One request through the proxy; fails on any answer of Prism's or another status than expected. */
async function send(operationId: string, s: Sent): Promise<any> {
  const op = operations.get(operationId);
  assert.ok(op, `${operationId} is in the served document`);
  const url = new URL(`${proxyUrl}${op.path.replace(/\{(\w+)\}/g, (_m, n: string) => encodeURIComponent(s.params?.[n] ?? `missing_${n}`))}`);
  for (const [k, v] of Object.entries(s.query ?? {})) url.searchParams.set(k, v);
  const headers: Record<string, string> = {};
  if (s.token) headers.Authorization = `Bearer ${s.token}`;
  let body: string | FormData | undefined;
  if (s.form) body = s.form;
  else if (s.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(s.body);
  }
  const res = await fetch(url, { method: op.method, headers, body, redirect: 'manual' });
  const text = await res.text();
  const type = res.headers.get('content-type') ?? '';
  const parsed = type.includes('json') && text ? JSON.parse(text) : text;
  if (typeof parsed === 'object' && String(parsed?.type ?? '').includes('stoplight.io/prism')) {
    // Later steps build on this one's answer: stop here, naming what Prism found.
    assert.fail(
      `Prism: ${operationId} (${op.method} ${url.pathname}): ${parsed.title}: ${parsed.detail}${parsed.validation ? ` ${JSON.stringify(parsed.validation)}` : ''}`,
    );
  }
  answered.set(operationId, [...(answered.get(operationId) ?? []), res.status]);
  assert.equal(res.status, s.expect, `${operationId}: ${res.status} ${text.slice(0, 300)}`);
  return parsed;
}

async function until<T>(what: string, read: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
  let last: T | undefined;
  await waitFor(async () => done((last = await read())), 30_000, what);
  return last!;
}

describe("every public operation through Prism's validating proxy", () => {
  it('passes: no request the service accepts and no response it gives breaks the served document', async () => {
    const email = `prism-${Date.now()}@example.com`;
    const password = 'correct-horse-battery';
    // Auth, members, keys: a dashboard session.
    const signup = await send('signup', { body: { email, password, workspace_name: 'Prism' }, expect: 201 });
    const session = (await send('login', { body: { email, password }, expect: 200 })).session_token as string;
    await send('getCurrentSession', { token: session, expect: 200 });
    await send('createMember', { token: session, body: { email: `member-${Date.now()}@example.com`, password, role: 'viewer' }, expect: 201 });
    await send('listMembers', { token: session, expect: 200 });
    const key = (await send('createApiKey', { token: session, body: { name: 'prism' }, expect: 201 })).key as string;
    const spare = await send('createApiKey', { token: session, body: { name: 'spare' }, expect: 201 });
    await send('listApiKeys', { token: session, expect: 200 });
    await send('revokeApiKey', { token: session, params: { key_id: spare.id }, expect: 200 });

    // Agents.
    const inboundNumber = sandboxNumber('6000');
    const agent = await send('createAgent', {
      token: key,
      body: { name: 'Prism agent', instruction: 'Help callers.', first_message: 'Hello {{name|there}}.', ...providerConfig('provider_a', inboundNumber) },
      expect: 201,
    });
    const agentId = agent.agent_id as string;
    const params = { agent_id: agentId };
    await send('getAgent', { token: key, params, expect: 200 });
    await send('listAgents', { token: key, query: { limit: '5' }, expect: 200 });
    await send('updateAgent', { token: key, params, body: { description: 'Checked by Prism' }, expect: 200 });
    await send('getPublicAgentProfile', { params, expect: 200 });
    await send('getAgent', { token: key, params: { agent_id: 'agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8R' }, expect: 404 });
    // Versions: the create made version 1, the update version 2 (each published at once: auto_publish).
    await send('listAgentVersions', { token: key, params, query: { limit: '5' }, expect: 200 });
    await send('getAgentVersion', { token: key, params: { ...params, version: '1' }, expect: 200 });
    await send('getAgentVersion', { token: key, params: { ...params, version: '99' }, expect: 404 });
    await send('restoreAgentVersion', { token: key, params: { ...params, version: '1' }, expect: 200 });
    await send('publishAgent', { token: key, params, expect: 200 });
    await send('enableInbound', { token: key, params: { ...params, provider: 'provider_a' }, expect: 200 });
    await send('createSandboxInboundCall', { token: key, body: { to_number: inboundNumber }, expect: 201 });

    // Tools.
    const tool = await send('createTool', {
      token: key,
      body: {
        name: 'check_order',
        description: 'Looks up an order.',
        url: peer.url,
        parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
      },
      expect: 201,
    });
    const toolParams = { tool_id: tool.tool_id as string };
    await send('getTool', { token: key, params: toolParams, expect: 200 });
    await send('listTools', { token: key, expect: 200 });
    await send('updateTool', { token: key, params: toolParams, body: { description: 'Looks up an order by id.' }, expect: 200 });
    await send('testTool', { token: key, params: toolParams, body: { arguments: { order_id: 'A-42' } }, expect: 200 });
    await send('attachTool', { token: key, params: { ...params, ...toolParams }, expect: 200 });
    await send('listAgentTools', { token: key, params, expect: 200 });
    await send('detachTool', { token: key, params: { ...params, ...toolParams }, expect: 200 });
    await send('createTool', { token: key, body: { name: 'check_order', description: 'Again.', url: peer.url }, expect: 409 });

    // Agent tests and a run of them (the tool mocked: the peer is never called by it).
    const agentTest = await send('createAgentTest', {
      token: key,
      params,
      body: {
        name: 'Answers',
        variables: { name: 'Ada' },
        expect_first_message: [{ type: 'reply_contains', phrase: 'Hello Ada' }],
        turns: [{ user: 'Check order 42.', expect: [{ type: 'tool_called', tool: 'check_order', arguments: { type: 'object' } }] }],
        tool_mocks: [{ tool: 'check_order', result: { status: 'shipped' } }],
      },
      expect: 201,
    });
    const testParams = { ...params, test_id: agentTest.test_id as string };
    await send('getAgentTest', { token: key, params: testParams, expect: 200 });
    await send('listAgentTests', { token: key, params, expect: 200 });
    await send('updateAgentTest', { token: key, params: testParams, body: { description: 'Checked by Prism' }, expect: 200 });
    await send('createAgentTest', { token: key, params, body: { name: 'Answers', turns: [{ user: 'Hi' }] }, expect: 409 });
    await send('createAgentTest', {
      token: key,
      params,
      body: { name: 'Bad', turns: [{ user: 'Hi', expect: [{ type: 'ended', phrase: 'x' }] }] },
      expect: 422,
    });
    const testRun = await send('createTestRun', { token: key, body: { agent_id: agentId, repeats: 2 }, expect: 201 });
    const runParams = { run_id: testRun.run_id as string };
    await until(
      'the test run to complete',
      () => send('getTestRun', { token: key, params: runParams, expect: 200 }),
      (r) => r.status === 'completed',
    );
    await send('listTestRuns', { token: key, query: { agent_id: agentId }, expect: 200 });
    await send('listTestRunCases', { token: key, params: runParams, expect: 200 });
    await send('getTestRun', { token: key, params: { run_id: 'trun_01JD5Z7Q8Y1C2B3A4N5M6K7P9B' }, expect: 404 });
    await send('deleteAgentTest', { token: key, params: testParams, expect: 200 });

    // Knowledge.
    const form = new FormData();
    form.append('file', new Blob(['We are open 8 am to 6 pm on weekdays.'], { type: 'text/plain' }), 'hours.txt');
    form.append('name', 'Opening hours');
    const uploaded = await send('uploadDocument', { token: key, form, expect: 201 });
    const text = await send('createTextDocument', { token: key, body: { name: 'Parking', text: 'Parking is free behind the building.' }, expect: 201 });
    await send('listDocuments', { token: key, expect: 200 });
    await send('getDocument', { token: key, params: { doc_id: text.doc_id }, expect: 200 });
    await send('attachDocument', { token: key, params, body: { doc_id: uploaded.doc_id }, expect: 201 });
    await send('listAgentDocuments', { token: key, params, expect: 200 });
    await send('searchAgentKnowledge', { token: key, params, body: { query: 'When are you open?' }, expect: 200 });
    await send('detachDocument', { token: key, params: { ...params, doc_id: uploaded.doc_id }, expect: 200 });
    await send('deleteDocument', { token: key, params: { doc_id: text.doc_id }, expect: 200 });

    // MCP servers, one behind OAuth (its callback reached through the proxy as a browser would).
    const server = await send('connectMcpServer', { token: key, body: { name: 'Orders', url: mcp.streamableUrl, auth_type: 'none' }, expect: 201 });
    const mcpParams = { mcp_server_id: server.mcp_server_id as string };
    await send('listMcpServers', { token: key, expect: 200 });
    await send('getMcpServer', { token: key, params: mcpParams, expect: 200 });
    await send('updateMcpServer', { token: key, params: mcpParams, body: { name: 'Order desk' }, expect: 200 });
    await send('refreshMcpServerTools', { token: key, params: mcpParams, expect: 200 });
    await send('attachMcpServer', { token: key, params: { ...params, ...mcpParams }, expect: 200 });
    await send('listAgentMcpServers', { token: key, params, expect: 200 });
    await send('detachMcpServer', { token: key, params: { ...params, ...mcpParams }, expect: 200 });
    const guarded = await send('connectMcpServer', {
      token: key,
      body: {
        name: 'Calendar',
        url: oauthMcp.streamableUrl,
        auth_type: 'oauth2',
        oauth_config: { client_id: oauth.clientId, client_secret: oauth.clientSecret, authorization_url: oauth.authorizationUrl, token_url: oauth.tokenUrl },
      },
      expect: 201,
    });
    const started = await send('authorizeMcpServer', { token: key, params: { mcp_server_id: guarded.mcp_server_id }, expect: 200 });
    const consent = await fetch(started.authorization_url, { redirect: 'manual' });
    const callback = new URL(consent.headers.get('location')!);
    await send('mcpOAuthCallback', { query: Object.fromEntries(callback.searchParams), expect: 200 });
    await send('deleteMcpServer', { token: key, params: { mcp_server_id: guarded.mcp_server_id }, expect: 200 });
    await send('deleteMcpServer', { token: key, params: mcpParams, expect: 200 });

    // Webhooks.
    const hook = await send('createWebhook', { token: key, body: { url: `${peer.url}/hooks` }, expect: 201 });
    await send('createWebhook', { token: key, body: { url: `${peer.url}/hooks`, events: ['call.completed'] }, expect: 200 });
    const liveHook = await send('createWebhook', {
      token: key,
      body: { url: `${peer.url}/live`, events: ['call.status_changed', 'call.transcript'] },
      expect: 201,
    });
    await send('listWebhooks', { token: key, expect: 200 });
    await send('updateWebhook', { token: key, params: { webhook_id: hook.webhook_id }, body: { events: ['call.completed', 'batch.completed'] }, expect: 200 });
    await send('getWebhookSecret', { token: key, expect: 200 });
    await send('rotateWebhookSecret', { token: key, expect: 200 });

    // Calls: one that runs to its end (recorded), one hung up at once.
    const call = await send('createCall', {
      token: key,
      body: { agent_id: agentId, to_number: sandboxNumber(), variables: { name: 'Ada', visits: 2, vip: true }, recording: { enabled: true } },
      expect: 201,
    });
    const callParams = { call_id: call.call_id as string };
    const hungUp = await send('createCall', { token: key, body: { agent_id: agentId, to_number: sandboxNumber() }, expect: 201 });
    await send('getVoiceCatalogue', { token: key, expect: 200 });
    await send('hangupCall', { token: key, params: { call_id: hungUp.call_id }, expect: 200 });
    await send('listCalls', { token: key, query: { limit: '10' }, expect: 200 });
    const policy = await send('getDestinationPolicy', { token: key, expect: 200 });
    assert.equal(policy.calls_placed_today, 2, 'the two calls count toward the daily cap');
    const ended = await until(
      'the call to end',
      () => send('getCall', { token: key, params: callParams, expect: 200 }),
      (c) => c.ended_at !== null,
    );
    // Its live events (Server-Sent Events): a finished call's stream replays everything and ends; resumed after its first event.
    const stream = (await send('streamCallEvents', { token: key, params: callParams, expect: 200 })) as string;
    assert.match(stream, /^event: end$/m);
    const resumed = (await send('streamCallEvents', { token: key, params: callParams, query: { last_event_id: '1' }, expect: 200 })) as string;
    assert.doesNotMatch(resumed, /^id: 1$/m);
    // Its recording: through the API, by its signed link, then deleted; the workspace's retention rule.
    await send('getCallRecording', { token: key, params: callParams, expect: 200 });
    const link = new URL(ended.recording_url as string);
    await send('downloadSignedRecording', { params: callParams, query: Object.fromEntries(link.searchParams), expect: 200 });
    await send('deleteCallRecording', { token: key, params: callParams, expect: 200 });
    await send('getRecordingSettings', { token: key, expect: 200 });
    await send('updateRecordingSettings', { token: key, body: { retention_days: 7 }, expect: 200 });
    await until(
      "the call's delivery",
      () => send('listCallWebhookDeliveries', { token: key, params: callParams, expect: 200 }),
      (l) => l.data.length > 0,
    );
    await send('listWebhookDeliveries', { token: key, params: { webhook_id: hook.webhook_id }, expect: 200 });
    // Usage and limits: the ended call counts (its day in Paris), and the limits read with the policy in it.
    const used = await send('getUsage', { token: key, query: { timezone: 'Europe/Paris' }, expect: 200 });
    assert.ok(used.totals.phone.conversations >= 1, 'the ended call counts');
    const limits = await send('getLimits', { token: key, expect: 200 });
    assert.equal(limits.destination_policy.calls_placed_today, 2);
    // Erased at last: its tombstone.
    const tombstone = await send('deleteCall', { token: key, params: callParams, expect: 200 });
    assert.ok(tombstone.erased_at);

    // Batches: one paused, resumed and canceled before it starts; one run to its end and retried; one from a CSV.
    const later = new Date(Date.now() + 3600_000).toISOString();
    const scheduled = await send('createBatch', {
      token: key,
      body: { agent_id: agentId, name: 'Later', recipients: [{ to_number: sandboxNumber() }], scheduled_at: later },
      expect: 201,
    });
    const sParams = { batch_id: scheduled.batch_id as string };
    await send('pauseBatch', { token: key, params: sParams, expect: 200 });
    await send('resumeBatch', { token: key, params: sParams, expect: 200 });
    await send('cancelBatch', { token: key, params: sParams, expect: 200 });
    const [busy] = sandboxNumbers('0002', 1, 970);
    const batch = await send('createBatch', {
      token: key,
      body: {
        agent_id: agentId,
        name: 'Now',
        recipients: [{ to_number: busy, variables: { name: 'Grace' } }],
        retry_policy: { max_attempts: 1 },
        webhook_url: `${peer.url}/batch`,
      },
      expect: 201,
    });
    const bParams = { batch_id: batch.batch_id as string };
    await send('listBatches', { token: key, expect: 200 });
    await until(
      'the batch to finish',
      () => send('getBatch', { token: key, params: bParams, expect: 200 }),
      (b) => b.completed_at !== null,
    );
    await until(
      "the batch's delivery",
      () => send('listBatchWebhookDeliveries', { token: key, params: bParams, expect: 200 }),
      (l) => l.data.length > 0,
    );
    await send('retryBatch', { token: key, params: bParams, expect: 200 });
    await send('cancelBatch', { token: key, params: bParams, expect: 200 });
    const csv = new FormData();
    csv.append('file', new Blob([`to_number,name\n${sandboxNumber()},Alan\n`], { type: 'text/csv' }), 'recipients.csv');
    csv.append('agent_id', agentId);
    csv.append('name', 'From CSV');
    csv.append('scheduled_at', later);
    csv.append('retry_on', 'busy,no_answer');
    const fromCsv = await send('createBatchFromCsv', { token: key, form: csv, expect: 201 });
    await send('cancelBatch', { token: key, params: { batch_id: fromCsv.batch_id }, expect: 200 });

    // SIP trunks: one made, read, listed, its number bound to the agent (so the trunk is in use), unbound, deleted.
    const trunkNumber = sandboxNumber();
    const trunk = await send('createSipTrunk', {
      token: key,
      body: {
        name: 'Prism trunk',
        inbound: { allowed_sources: ['203.0.113.0/24'], auth: { username: 'prism-in', password: 'inbound-Secret-5fa9c1' }, numbers: [trunkNumber] },
        outbound: { host: '[2606:4700::1111]', transport: 'tcp', auth: { username: 'prism-out', password: 'outbound-Secret-77e0b2' } },
      },
      expect: 201,
    });
    const trunkParams = { trunk_id: trunk.trunk_id as string };
    await send('getSipTrunk', { token: key, params: trunkParams, expect: 200 });
    await send('listSipTrunks', { token: key, query: { limit: '5' }, expect: 200 });
    await send('updateSipTrunk', { token: key, params: trunkParams, body: { name: 'Prism trunk, renamed' }, expect: 200 });
    await send('createSipTrunk', {
      token: key,
      body: { name: 'Bad', inbound: { allowed_sources: ['203.0.113.7/24'], numbers: [sandboxNumber()] } },
      expect: 422,
    });
    await send('updateAgent', { token: key, params, body: { sip_config: { trunk_id: trunk.trunk_id, phone_number: trunkNumber } }, expect: 200 });
    await send('deleteSipTrunk', { token: key, params: trunkParams, expect: 409 });
    await send('updateAgent', { token: key, params, body: { sip_config: null }, expect: 200 });
    await send('deleteSipTrunk', { token: key, params: trunkParams, expect: 200 });

    // The do-not-call list: a number added (again: the same entry), found, refused as a call, imported, removed.
    const listedNumber = sandboxNumber();
    const entry = await send('addDoNotCallEntry', { token: key, body: { number: listedNumber }, expect: 201 });
    await send('addDoNotCallEntry', { token: key, body: { number: listedNumber }, expect: 200 });
    await send('addDoNotCallEntry', { token: key, body: { number: '+12' }, expect: 422 });
    await send('listDoNotCallEntries', { token: key, query: { number: listedNumber }, expect: 200 });
    await send('createCall', { token: key, body: { agent_id: agentId, to_number: listedNumber }, expect: 422 });
    const dncCsv = new FormData();
    dncCsv.append('file', new Blob([`number\n${sandboxNumber()}\n${listedNumber}\nnot a number\n`], { type: 'text/csv' }), 'do-not-call.csv');
    await send('importDoNotCallCsv', { token: key, form: dncCsv, expect: 200 });
    await send('removeDoNotCallEntry', { token: key, params: { entry_id: entry.entry_id }, expect: 200 });
    await send('removeDoNotCallEntry', { token: key, params: { entry_id: entry.entry_id }, expect: 404 });

    // Realtime: a text session, then its record.
    const minted = await send('createRealtimeSession', { token: key, body: { agent_id: agentId, user_id: 'prism-visitor', source: 'text' }, expect: 201 });
    const ws = connect(minted.ws_url);
    const sessionId = String((await ws.next('session_started')).session_id);
    await ws.next('turn_complete');
    ws.sendFrame('text/plain', Buffer.from('When are you open?').toString('base64'));
    await ws.next('turn_complete');
    await ws.close();
    // The record exists once the session is finalised (404 until then): waited for on the service itself.
    await waitFor(
      async () => (await t.http.get(`/api/v1/realtime/conversations/${sessionId}`).set('Authorization', `Bearer ${key}`)).status === 200,
      30_000,
      'the session record',
    );
    await send('listRealtimeConversations', { token: key, expect: 200 });
    const convParams = { conversation_id: sessionId };
    await send('getRealtimeConversation', { token: key, params: convParams, expect: 200 });
    await send('listRealtimeConversationWebhookDeliveries', { token: key, params: convParams, expect: 200 });
    const sessionStream = (await send('streamRealtimeConversationEvents', { token: key, params: convParams, expect: 200 })) as string;
    assert.match(sessionStream, /^event: end$/m);
    // A recorded voice session (the agent records from now on): its recording by API and by its signed link, deleted.
    await send('updateAgent', { token: key, params, body: { recording: { enabled: true } }, expect: 200 });
    const voice = await send('createRealtimeSession', { token: key, body: { agent_id: agentId, user_id: 'prism-voice', source: 'voice' }, expect: 201 });
    const voiceWs = connect(voice.ws_url);
    const voiceId = String((await voiceWs.next('session_started')).session_id);
    await voiceWs.next('turn_complete');
    await voiceWs.close();
    const voiceParams = { conversation_id: voiceId };
    const recorded = await until(
      'the recorded session',
      async () => (await t.http.get(`/api/v1/realtime/conversations/${voiceId}`).set('Authorization', `Bearer ${key}`)).body,
      (b) => Boolean(b?.recording),
    );
    await send('getRealtimeConversationRecording', { token: key, params: voiceParams, expect: 200 });
    const sessionLink = new URL(recorded.recording_url as string);
    await send('downloadSignedRealtimeConversationRecording', { params: voiceParams, query: Object.fromEntries(sessionLink.searchParams), expect: 200 });
    await send('deleteRealtimeConversationRecording', { token: key, params: voiceParams, expect: 200 });
    await send('deleteRealtimeConversation', { token: key, params: convParams, expect: 200 });

    // Tidy up, and end the session.
    await send('disableInbound', { token: key, params: { ...params, provider: 'provider_a' }, expect: 200 });
    await send('deleteWebhook', { token: key, params: { webhook_id: hook.webhook_id }, expect: 200 });
    await send('deleteWebhook', { token: key, params: { webhook_id: liveHook.webhook_id }, expect: 200 });
    await send('deleteTool', { token: key, params: toolParams, expect: 200 });
    await send('deleteAgent', { token: key, params, expect: 200 });
    await send('logout', { token: signup.session_token, expect: 204 });

    const missing = [...operations.keys()].filter((id) => !answered.has(id));
    assert.deepEqual(missing, [], 'every public operation went through the proxy');
  });
});
