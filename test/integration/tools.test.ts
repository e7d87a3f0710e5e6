import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { startHttpPeer, type HttpPeer } from '../helpers/http-peer.js';

let t: TestService;
let tn: Tenant;
let other: Tenant;
let peer: HttpPeer;
before(async () => {
  t = await startTestService();
  tn = await tenant(t);
  other = await tenant(t, 'Other Co');
  peer = await startHttpPeer(async (req, res) => {
    const u = new URL(req.url, 'http://x');
    if (u.pathname === '/slow') {
      await new Promise((r) => setTimeout(r, 1500));
      if (!res.destroyed) res.end('late');
      return;
    }
    if (u.pathname === '/fail') {
      res.writeHead(503, { 'Content-Type': 'text/plain' });
      return res.end('Service Unavailable');
    }
    if (u.pathname === '/redirect') {
      res.writeHead(302, { Location: `${peer.url}/echo` });
      return res.end();
    }
    if (u.pathname === '/big') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      return res.end(JSON.stringify({ blob: 'é'.repeat(20_000) }));
    }
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(
      JSON.stringify({
        method: req.method,
        query: Object.fromEntries(u.searchParams),
        body: req.body ? JSON.parse(req.body) : null,
        auth: req.headers.authorization ? 'present' : 'absent',
      }),
    );
  });
});
after(async () => {
  await peer.close();
  await t.close();
});

const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
const HEADER_SECRET = 'Bearer sk_live_tool_secret_51Hx9q2Example';
const ROTATED_SECRET = 'Bearer sk_live_tool_rotated_77Zq';
const seen: string[] = [];

async function api(method: 'get' | 'post' | 'patch' | 'delete' | 'put', p: string, body?: unknown, key = tn.apiKey) {
  let req = t.http[method](p).set(bearer(key));
  if (body !== undefined) req = req.send(body as object);
  const res = await req;
  seen.push(res.text);
  return res;
}

let n = 0;
async function createTool(body: Record<string, unknown> = {}, key = tn.apiKey) {
  const res = await api('post', '/api/v1/tools', { name: `tool_${++n}`, description: 'Does a thing.', url: `${peer.url}/echo`, ...body }, key);
  assert.equal(res.status, 201, res.text);
  return res.body;
}

async function createAgent(key = tn.apiKey) {
  const res = await api('post', '/api/v1/agents', { name: 'Tool user' }, key);
  assert.equal(res.status, 201);
  return res.body.agent_id as string;
}

const toolRow = (id: string) => t.service.db.knex('tools').where({ id }).first();
const toolCount = (workspaceId: string) =>
  t.service.db
    .knex('tools')
    .where({ workspace_id: workspaceId })
    .count<{ count: string }[]>('* as count')
    .then((r) => Number(r[0].count));

describe('tools: CRUD', () => {
  it('creates a tool with defaults; header values are sealed and never returned', async () => {
    const res = await api('post', '/api/v1/tools', {
      name: 'check_availability',
      description: 'Finds slots.',
      url: `${peer.url}/slots`,
      headers: { 'X-Clinic': '42', Authorization: HEADER_SECRET },
    });
    assert.equal(res.status, 201, res.text);
    const tool = res.body;
    assert.match(tool.tool_id, /^tool_[0-9A-Z]{26}$/);
    assert.deepEqual(tool.parameters, { type: 'object', properties: {} });
    assert.equal(tool.method, 'POST');
    assert.equal(tool.timeout_ms, 10000);
    assert.deepEqual(tool.header_names, ['Authorization', 'X-Clinic']);
    const row = await toolRow(tool.tool_id);
    assert.ok(!JSON.stringify(row).includes(HEADER_SECRET));
    assert.equal(t.service.secrets.open(row.headers.Authorization, `tools/${tool.tool_id}/headers/authorization`), HEADER_SECRET);
    const got = await api('get', `/api/v1/tools/${tool.tool_id}`);
    assert.deepEqual(got.body, tool);
  });

  it('lists newest first with pagination; 403 and 404 on another workspace tool or none', async () => {
    const mine = await tenant(t);
    const a = await createTool({}, mine.apiKey);
    const b = await createTool({}, mine.apiKey);
    const list = await api('get', '/api/v1/tools?limit=1', undefined, mine.apiKey);
    assert.deepEqual(
      list.body.data.map((x: { tool_id: string }) => x.tool_id),
      [b.tool_id],
    );
    assert.equal(list.body.has_more, true);
    const next = await api('get', `/api/v1/tools?limit=1&starting_after=${list.body.next_cursor}`, undefined, mine.apiKey);
    assert.deepEqual(
      next.body.data.map((x: { tool_id: string }) => x.tool_id),
      [a.tool_id],
    );

    const foreign = await createTool({}, other.apiKey);
    const before = await toolRow(foreign.tool_id);
    for (const [method, suffix, body] of [
      ['get', '', undefined],
      ['patch', '', { description: 'x' }],
      ['delete', '', undefined],
      ['post', '/test', { arguments: {} }],
    ] as const) {
      const res = await api(method, `/api/v1/tools/${foreign.tool_id}${suffix}`, body);
      assert.equal(res.status, 403, res.text);
      const none = await api(method, `/api/v1/tools/tool_01JD5Z7Q8Y1C2B3A4N5M6K7P9A${suffix}`, body);
      assert.equal(none.status, 404);
      assert.equal(none.body.error.code, 'tool_not_found');
    }
    assert.deepEqual(await toolRow(foreign.tool_id), before);
    assert.equal(peer.requests.length, 0, 'nothing was sent to a foreign tool');
  });

  it('updates only the fields present; headers merge by name (set, rotate, remove); headers null removes all', async () => {
    const tool = await createTool({ headers: { Authorization: HEADER_SECRET, 'X-A': '1' } });
    const r1 = await api('patch', `/api/v1/tools/${tool.tool_id}`, { timeout_ms: 8000, headers: { authorization: ROTATED_SECRET, 'X-A': null, 'X-B': '2' } });
    assert.equal(r1.status, 200, r1.text);
    assert.deepEqual({ ...r1.body, updated_at: undefined }, { ...tool, timeout_ms: 8000, header_names: ['X-B', 'authorization'], updated_at: undefined });
    const row = await toolRow(tool.tool_id);
    assert.equal(t.service.secrets.open(row.headers.authorization, `tools/${tool.tool_id}/headers/authorization`), ROTATED_SECRET);
    const r2 = await api('patch', `/api/v1/tools/${tool.tool_id}`, { headers: null });
    assert.deepEqual(r2.body.header_names, []);
    const r3 = await api('patch', `/api/v1/tools/${tool.tool_id}`, {});
    assert.deepEqual(r3.body, r2.body);
  });

  it('deletes a tool and detaches it from every agent', async () => {
    const tool = await createTool();
    const agentId = await createAgent();
    assert.equal((await api('put', `/api/v1/agents/${agentId}/tools/${tool.tool_id}`)).status, 200);
    const res = await api('delete', `/api/v1/tools/${tool.tool_id}`);
    assert.deepEqual(res.body, { status: 'deleted', tool_id: tool.tool_id });
    assert.equal(await toolRow(tool.tool_id), undefined);
    assert.deepEqual((await api('get', `/api/v1/agents/${agentId}/tools`)).body.data, []);
  });
});

describe('tools: bad input changes nothing', () => {
  it('refuses names taken, invalid schemas, reserved headers, blocked URLs and unknown fields', async () => {
    const ws = await tenant(t);
    const existing = await createTool({ name: 'taken_name' }, ws.apiKey);
    const cases: Array<[Record<string, unknown>, number, string, string | null]> = [
      [{ name: 'taken_name' }, 409, 'tool_name_taken', 'name'],
      [{ parameters: { type: 'object', properties: { date: { type: 'dat' } } } }, 422, 'invalid_parameters_schema', 'parameters.properties.date.type'],
      [{ parameters: { type: 'object', required: 'date' } }, 422, 'invalid_parameters_schema', 'parameters.required'],
      [{ parameters: { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } } }, 422, 'invalid_parameters_schema', 'parameters'],
      [{ parameters: { type: 'array' } }, 422, 'invalid_value', 'parameters.type'],
      [{ headers: { Host: 'example.com' } }, 422, 'reserved_header', 'headers.Host'],
      [{ headers: { 'content-length': '5' } }, 422, 'reserved_header', 'headers.content-length'],
      [{ headers: { 'Bad Header': 'x' } }, 422, 'invalid_value', 'headers'],
      [{ url: 'http://169.254.169.254/latest/meta-data' }, 422, 'url_not_allowed', 'url'],
      [{ url: 'http://10.1.2.3/hook' }, 422, 'url_not_allowed', 'url'],
      [{ url: 'ftp://example.com/x' }, 422, 'invalid_value', 'url'],
      [{ method: 'TRACE' }, 422, 'invalid_value', 'method'],
      [{ timeout_ms: 50 }, 422, 'invalid_value', 'timeout_ms'],
      [{ colour: 'red' }, 422, 'unknown_field', 'colour'],
      [{ name: 'has space' }, 422, 'invalid_value', 'name'],
    ];
    for (const [extra, status, code, param] of cases) {
      const res = await api('post', '/api/v1/tools', { name: `fresh_${++n}`, description: 'x', url: `${peer.url}/echo`, ...extra }, ws.apiKey);
      assert.equal(res.status, status, `${JSON.stringify(extra)}: ${res.text}`);
      assert.equal(res.body.error.code, code, `${JSON.stringify(extra)}: ${res.text}`);
      if (param) assert.equal(res.body.error.param, param, `${JSON.stringify(extra)}: ${res.text}`);
    }
    assert.equal(await toolCount(ws.workspaceId), 1);

    const other2 = await createTool({ name: 'second_name' }, ws.apiKey);
    const before = await toolRow(other2.tool_id);
    for (const [body, status, code] of [
      [{ name: 'taken_name' }, 409, 'tool_name_taken'],
      [{ url: 'http://169.254.169.254/' }, 422, 'url_not_allowed'],
      [{ parameters: { type: 'object', properties: { x: { minimum: 'one' } } } }, 422, 'invalid_parameters_schema'],
      [{ headers: { Connection: 'close' } }, 422, 'reserved_header'],
      [{ headers: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, 'v'])) }, 422, 'invalid_value'],
      [{ description: null }, 422, 'invalid_type'],
      [{ colour: 'red' }, 422, 'unknown_field'],
    ] as const) {
      const res = await api('patch', `/api/v1/tools/${other2.tool_id}`, body, ws.apiKey);
      assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.body.error.code, code, `${JSON.stringify(body)}: ${res.text}`);
    }
    assert.deepEqual(await toolRow(other2.tool_id), before);
    assert.deepEqual((await toolRow(existing.tool_id)).name, 'taken_name');
  });
});

describe('tools: attach to agents', () => {
  it('attaches idempotently, lists the agent tools, detaches idempotently', async () => {
    const agentId = await createAgent();
    const a = await createTool();
    const b = await createTool();
    for (let i = 0; i < 2; i++) {
      const res = await api('put', `/api/v1/agents/${agentId}/tools/${a.tool_id}`);
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, a);
    }
    await api('put', `/api/v1/agents/${agentId}/tools/${b.tool_id}`);
    const list = await api('get', `/api/v1/agents/${agentId}/tools`);
    assert.deepEqual(
      list.body.data.map((x: { tool_id: string }) => x.tool_id),
      [b.tool_id, a.tool_id],
    );
    const page = await api('get', `/api/v1/agents/${agentId}/tools?limit=1`);
    assert.equal(page.body.has_more, true);
    assert.equal(page.body.next_cursor, b.tool_id);
    for (let i = 0; i < 2; i++) {
      const res = await api('delete', `/api/v1/agents/${agentId}/tools/${a.tool_id}`);
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { status: 'detached', tool_id: a.tool_id });
    }
    assert.deepEqual(
      (await api('get', `/api/v1/agents/${agentId}/tools`)).body.data.map((x: { tool_id: string }) => x.tool_id),
      [b.tool_id],
    );
    assert.ok(await toolRow(a.tool_id), 'the workspace tool stays');
  });

  it('refuses foreign and unknown agents or tools (403/404) and attaches nothing', async () => {
    const agentId = await createAgent();
    const tool = await createTool();
    const foreignAgent = await createAgent(other.apiKey);
    const foreignTool = await createTool({}, other.apiKey);
    const checks: Array<[string, number, string]> = [
      [`/api/v1/agents/${foreignAgent}/tools/${tool.tool_id}`, 403, 'forbidden'],
      [`/api/v1/agents/${agentId}/tools/${foreignTool.tool_id}`, 403, 'forbidden'],
      [`/api/v1/agents/agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8V/tools/${tool.tool_id}`, 404, 'agent_not_found'],
      [`/api/v1/agents/${agentId}/tools/tool_01JD5Z7Q8Y1C2B3A4N5M6K7P9A`, 404, 'tool_not_found'],
    ];
    for (const [p, status, code] of checks) {
      for (const method of ['put', 'delete'] as const) {
        const res = await api(method, p);
        assert.equal(res.status, status, `${method} ${p}: ${res.text}`);
        assert.equal(res.body.error.code, code);
      }
    }
    assert.equal((await api('get', `/api/v1/agents/${foreignAgent}/tools`)).status, 403);
    assert.equal((await t.service.db.knex('agent_tools').whereIn('agent_id', [agentId, foreignAgent])).length, 0);
  });
});

describe('tools: test runs against a real endpoint', () => {
  it('GET sends the arguments in the query string, with the stored headers', async () => {
    const tool = await createTool({
      method: 'GET',
      headers: { Authorization: HEADER_SECRET },
      parameters: { type: 'object', properties: { date: { type: 'string' }, filter: { type: 'object' } }, required: ['date'] },
    });
    const before = peer.requests.length;
    const res = await api('post', `/api/v1/tools/${tool.tool_id}/test`, { arguments: { date: '2026-11-24', filter: { room: 2 } } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.ok, true);
    assert.equal(res.body.status_code, 200);
    assert.equal(res.body.error, null);
    assert.equal(res.body.response_truncated, false);
    assert.deepEqual(res.body.response_body, { method: 'GET', query: { date: '2026-11-24', filter: '{"room":2}' }, body: null, auth: 'present' });
    assert.equal(peer.requests.length, before + 1);
    assert.equal(peer.requests.at(-1)!.headers.authorization, HEADER_SECRET);
  });

  it('POST sends the arguments as the JSON body', async () => {
    const tool = await createTool({ method: 'POST' });
    const res = await api('post', `/api/v1/tools/${tool.tool_id}/test`, { arguments: { slot: '09:30', n: 2 } });
    assert.equal(res.body.ok, true);
    assert.deepEqual(res.body.response_body, { method: 'POST', query: {}, body: { slot: '09:30', n: 2 }, auth: 'absent' });
    assert.equal(peer.requests.at(-1)!.headers['content-type'], 'application/json');
  });

  it('reports failures as data: http_error, redirect not followed, timeout, connection failure, truncation', async () => {
    const fail = await createTool({ url: `${peer.url}/fail` });
    let res = await api('post', `/api/v1/tools/${fail.tool_id}/test`, {});
    assert.equal(res.status, 200);
    assert.deepEqual(
      { ...res.body, duration_ms: 0 },
      {
        ok: false,
        status_code: 503,
        duration_ms: 0,
        response_body: 'Service Unavailable',
        response_truncated: false,
        error: { code: 'http_error', message: 'The endpoint answered 503.' },
      },
    );

    const redirect = await createTool({ url: `${peer.url}/redirect`, method: 'GET' });
    const before = peer.requests.length;
    res = await api('post', `/api/v1/tools/${redirect.tool_id}/test`, {});
    assert.equal(res.body.ok, false);
    assert.equal(res.body.status_code, 302);
    assert.equal(res.body.error.code, 'http_error');
    assert.equal(peer.requests.length, before + 1, 'the redirect was not followed');

    const slow = await createTool({ url: `${peer.url}/slow`, timeout_ms: 200 });
    res = await api('post', `/api/v1/tools/${slow.tool_id}/test`, {});
    assert.equal(res.body.ok, false);
    assert.equal(res.body.status_code, null);
    assert.deepEqual(res.body.error, { code: 'timeout', message: 'No response within 200 ms.' });
    assert.ok(res.body.duration_ms >= 190 && res.body.duration_ms < 1400, String(res.body.duration_ms));

    const closed = await startHttpPeer(() => undefined);
    const closedUrl = closed.url;
    await closed.close();
    const down = await createTool({ url: `${closedUrl}/x` });
    res = await api('post', `/api/v1/tools/${down.tool_id}/test`, {});
    assert.equal(res.body.ok, false);
    assert.equal(res.body.error.code, 'connection_failed');

    const big = await createTool({ url: `${peer.url}/big`, method: 'GET' });
    res = await api('post', `/api/v1/tools/${big.tool_id}/test`, {});
    assert.equal(res.body.ok, true);
    assert.equal(res.body.response_truncated, true);
    assert.equal(typeof res.body.response_body, 'string');
    assert.ok(Buffer.byteLength(res.body.response_body) <= 16 * 1024);
    assert.ok(!res.body.response_body.includes('\uFFFD'), 'cut at a character boundary');
  });

  it('reports a TLS failure (self-signed certificate) as tls_error', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tls-'));
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        path.join(dir, 'key.pem'),
        '-out',
        path.join(dir, 'cert.pem'),
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    const server = https.createServer({ key: fs.readFileSync(path.join(dir, 'key.pem')), cert: fs.readFileSync(path.join(dir, 'cert.pem')) }, (_req, res) =>
      res.end('{}'),
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const tool = await createTool({ url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/x` });
      const res = await api('post', `/api/v1/tools/${tool.tool_id}/test`, {});
      assert.equal(res.body.ok, false);
      assert.equal(res.body.error.code, 'tls_error', res.text);
    } finally {
      server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('checks the URL again at call time (url_not_allowed)', async () => {
    const tool = await createTool();
    // As if DNS or the stored URL changed after registration.
    await t.service.db.knex('tools').where({ id: tool.tool_id }).update({ url: 'http://169.254.169.254/latest' });
    const res = await api('post', `/api/v1/tools/${tool.tool_id}/test`, {});
    assert.equal(res.status, 200);
    assert.equal(res.body.ok, false);
    assert.equal(res.body.error.code, 'url_not_allowed');
  });

  it('refuses arguments that do not match the parameters (422 invalid_arguments) without calling', async () => {
    const tool = await createTool({
      parameters: { type: 'object', properties: { date: { type: 'string' } }, required: ['date'], additionalProperties: false },
    });
    const before = peer.requests.length;
    for (const [args, param] of [
      [{}, 'arguments.date'],
      [{ date: 5 }, 'arguments.date'],
      [{ date: 'x', extra: 1 }, 'arguments.extra'],
    ] as const) {
      const res = await api('post', `/api/v1/tools/${tool.tool_id}/test`, { arguments: args });
      assert.equal(res.status, 422, res.text);
      assert.equal(res.body.error.code, 'invalid_arguments');
      assert.equal(res.body.error.param, param);
    }
    const unknown = await api('post', `/api/v1/tools/${tool.tool_id}/test`, { args: {} });
    assert.equal(unknown.body.error.code, 'unknown_field');
    assert.equal(peer.requests.length, before);
  });

  it('never shows or logs a header value', () => {
    for (const secret of [HEADER_SECRET, ROTATED_SECRET]) {
      for (const text of seen) assert.ok(!text.includes(secret), `a response contains a header value: ${text.slice(0, 200)}`);
      for (const line of t.logs) assert.ok(!line.includes(secret), `a log line contains a header value: ${line.slice(0, 200)}`);
    }
  });
});

describe('tools: the outbound guard in production', () => {
  it('refuses loopback tool URLs unless allowed, at write and at call time', async () => {
    const prodEnv = {
      NODE_ENV: 'production',
      SECRETS_KEY: '0'.repeat(64),
      PUBLIC_BASE_URL: 'https://voice.example.com',
      VOICE_SERVICE_URL: 'ws://127.0.0.1:9',
      PROVIDER_A_API_URL: 'http://127.0.0.1:9',
      PROVIDER_B_API_URL: 'http://127.0.0.1:9/v2',
    };
    const prod = await startTestService(prodEnv);
    try {
      const owner = await tenant(prod);
      const body = { name: 'local_tool', description: 'Local.', url: `${peer.url}/echo` };
      const refused = await prod.http.post('/api/v1/tools').set(bearer(owner.apiKey)).send(body);
      assert.equal(refused.status, 422, refused.text);
      assert.equal(refused.body.error.code, 'url_not_allowed');
      assert.equal(refused.body.error.param, 'url');
      assert.equal((await prod.service.db.knex('tools')).length, 0);
      // A tool stored before the address became internal is refused when it runs.
      const [row] = await prod.service.db
        .knex('tools')
        .insert({
          id: 'tool_01JD5Z7Q8Y1C2B3A4N5M6K7P9Z',
          workspace_id: owner.workspaceId,
          name: 'stale',
          description: 'x',
          parameters: JSON.stringify({ type: 'object' }),
          url: `${peer.url}/echo`,
          method: 'POST',
          headers: '{}',
          timeout_ms: 1000,
        })
        .returning('id');
      const before = peer.requests.length;
      const run = await prod.http.post(`/api/v1/tools/${row.id}/test`).set(bearer(owner.apiKey)).send({});
      assert.equal(run.body.ok, false);
      assert.equal(run.body.error.code, 'url_not_allowed');
      assert.equal(peer.requests.length, before);
    } finally {
      await prod.close();
    }
    const allowed = await startTestService({ ...prodEnv, OUTBOUND_ALLOW_LIST: '127.0.0.1' });
    try {
      const owner = await tenant(allowed);
      const created = await allowed.http
        .post('/api/v1/tools')
        .set(bearer(owner.apiKey))
        .send({ name: 'local_tool', description: 'Local.', url: `${peer.url}/echo` });
      assert.equal(created.status, 201, created.text);
      const run = await allowed.http
        .post(`/api/v1/tools/${created.body.tool_id}/test`)
        .set(bearer(owner.apiKey))
        .send({ arguments: { a: 1 } });
      assert.equal(run.body.ok, true, run.text);
    } finally {
      await allowed.close();
    }
  });
});
