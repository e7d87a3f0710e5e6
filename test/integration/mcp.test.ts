import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { closedPort, startMcpPeer, startOAuthPeer, startPlainPeer, type McpPeer, type OAuthPeer } from '../helpers/mcp-peers.js';

/** A clock the test can move forward (token expiry, state expiry). */
const clock = { offset: 0, now: () => new Date(Date.now() + clock.offset) };

let t: TestService;
let open: McpPeer;
let bearer: McpPeer;
let oauth: OAuthPeer;
let oauthMcp: McpPeer;
const BEARER = `mcp_tok_${Math.random().toString(36).slice(2)}SecretValue`;
const closers: Array<() => Promise<void>> = [];
/** Every secret a test sent or a peer issued: none may appear in a response or a log line. */
const secrets: string[] = [BEARER];

before(async () => {
  // A connect timeout with room for a busy machine to take a 17 MB answer before it (only the silent server waits it out).
  t = await startTestService({ MCP_CONNECT_TIMEOUT_MS: '6000', MCP_TOKEN_REFRESH_MARGIN_MS: '60000' }, { clock });
  open = await startMcpPeer();
  bearer = await startMcpPeer({ acceptBearer: (tok) => tok === BEARER });
  oauth = await startOAuthPeer({ expiresIn: 3600 });
  oauthMcp = await startMcpPeer({ acceptBearer: (tok) => oauth.isValidAccessToken(tok) });
  secrets.push(oauth.clientSecret);
  closers.push(open.close, bearer.close, oauth.close, oauthMcp.close);
});
after(async () => {
  for (const c of closers) await c();
  await t.close();
});

const auth = (tn: Tenant) => ({ Authorization: `Bearer ${tn.apiKey}` });

/** The MCP tools the agent's published version offers a conversation. */
async function agentMcpTools(workspaceId: string, agentId: string) {
  const agent = await t.service.agents.findForRuntime(workspaceId, agentId);
  assert.ok(agent, 'the agent runs');
  return t.service.mcp.toolsForServers(workspaceId, agent.links.mcpServerIds);
}

async function rows(workspaceId: string) {
  return t.service.db.knex('mcp_servers').where({ workspace_id: workspaceId }).orderBy('id');
}

async function connect(tn: Tenant, body: Record<string, unknown>) {
  return t.http.post('/api/v1/mcp-servers').set(auth(tn)).send(body);
}

/** Sends each bad body and checks the error and that nothing was stored. */
async function refusesAll(tn: Tenant, cases: Array<[Record<string, unknown>, string, string | null]>) {
  const before = await rows(tn.workspaceId);
  for (const [body, code, param] of cases) {
    const res = await connect(tn, body);
    assert.equal(res.status, 422, `${JSON.stringify(body)} -> ${res.status} ${JSON.stringify(res.body)}`);
    assert.equal(res.body.error.code, code, JSON.stringify(res.body));
    if (param !== null) assert.equal(res.body.error.param, param, JSON.stringify(res.body));
  }
  assert.deepEqual(await rows(tn.workspaceId), before, 'nothing stored');
}

function assertNoSecrets(text: string) {
  for (const s of [...secrets, ...oauth.issued]) assert.ok(!text.includes(s), `secret leaked: ${s.slice(0, 6)}...`);
}

describe('connect an MCP server', () => {
  it('connects over Streamable HTTP without auth, lists and stores the tools', async () => {
    const tn = await tenant(t);
    const res = await connect(tn, { name: 'Orders', url: open.streamableUrl });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.match(res.body.mcp_server_id, /^mcp_[0-9A-Z]{26}$/);
    assert.equal(res.body.transport, 'streamable_http');
    assert.equal(res.body.auth_type, 'none');
    assert.equal(res.body.status, 'ok');
    assert.equal(res.body.error, null);
    assert.equal(res.body.usable, true);
    assert.equal(res.body.oauth_status, 'not_applicable');
    assert.deepEqual(res.body.tools.map((x: { name: string }) => x.name).sort(), ['add', 'lookup_order']);
    const lookup = res.body.tools.find((x: { name: string }) => x.name === 'lookup_order');
    assert.equal(lookup.description, 'Returns the shipping status of an order.');
    assert.equal(lookup.input_schema.type, 'object');
    assert.ok(lookup.input_schema.properties.order_id);
    assert.ok(res.body.tools_refreshed_at);

    const [row] = await rows(tn.workspaceId);
    assert.equal(row.id, res.body.mcp_server_id);
    assert.equal(row.tools.length, 2);
    const got = await t.http.get(`/api/v1/mcp-servers/${row.id}`).set(auth(tn));
    assert.deepEqual(got.body, res.body);
    const list = await t.http.get('/api/v1/mcp-servers').set(auth(tn));
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.data.map((s: { mcp_server_id: string }) => s.mcp_server_id),
      [row.id],
    );
  });

  it('connects over SSE with a static bearer token, which is write-only and sealed at rest', async () => {
    const tn = await tenant(t);
    const res = await connect(tn, { name: 'Orders (SSE)', url: bearer.sseUrl, transport: 'sse', auth_type: 'static', static_auth: { bearer_token: BEARER } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.status, 'ok', JSON.stringify(res.body.error));
    assert.equal(res.body.transport, 'sse');
    assert.deepEqual(res.body.static_auth, { has_credentials: true, header_names: ['Authorization'] });
    assert.equal(res.body.tools.length, 2);
    assert.ok(bearer.requests.some((r) => r.path === '/sse' && r.headers.authorization === `Bearer ${BEARER}`));
    assert.ok(bearer.requests.some((r) => r.path === '/messages' && r.headers.authorization === `Bearer ${BEARER}`));
    const [row] = await rows(tn.workspaceId);
    assert.ok(!JSON.stringify(row).includes(BEARER), 'the token is not stored in clear');
    assert.match(row.static_headers.Authorization, /^v2\./);
    assertNoSecrets(JSON.stringify(res.body));
  });

  it('sends static headers on Streamable HTTP', async () => {
    const peer = await startMcpPeer({ requireHeader: ['X-Api-Key', 'k-123-secret-header'] });
    closers.push(peer.close);
    secrets.push('k-123-secret-header');
    const tn = await tenant(t);
    const res = await connect(tn, {
      name: 'Keyed',
      url: peer.streamableUrl,
      auth_type: 'static',
      static_auth: { headers: { 'X-Api-Key': 'k-123-secret-header' } },
    });
    assert.equal(res.status, 201);
    assert.equal(res.body.status, 'ok', JSON.stringify(res.body.error));
    assert.deepEqual(res.body.static_auth, { has_credentials: true, header_names: ['X-Api-Key'] });
  });

  it('reports a refused token as unauthorized and stores no tools', async () => {
    const tn = await tenant(t);
    for (const transport of ['streamable_http', 'sse']) {
      const url = transport === 'sse' ? bearer.sseUrl : bearer.streamableUrl;
      const res = await connect(tn, { name: 'Wrong token', url, transport, auth_type: 'static', static_auth: { bearer_token: 'not-the-token' } });
      assert.equal(res.status, 201);
      assert.equal(res.body.status, 'error');
      assert.equal(res.body.error.code, 'unauthorized', JSON.stringify(res.body.error));
      assert.match(res.body.error.message, /401/);
      assert.deepEqual(res.body.tools, []);
      assert.equal(res.body.tools_refreshed_at, null);
    }
    for (const row of await rows(tn.workspaceId)) {
      assert.equal(row.status, 'error');
      assert.deepEqual(row.tools, []);
    }
  });

  it('reports unreachable servers, TLS errors, non-MCP endpoints and timeouts', async () => {
    const tn = await tenant(t);
    const port = await closedPort();
    const html = await startPlainPeer((_req, res) => res.writeHead(200, { 'Content-Type': 'text/html' }).end('<html><body>Welcome</body></html>'));
    const notFound = await startPlainPeer((_req, res) => res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":"nope"}'));
    const silent = await startPlainPeer(() => undefined);
    const huge = await startPlainPeer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(Buffer.alloc(17 * 1024 * 1024, 0x20));
    });
    closers.push(html.close, notFound.close, silent.close, huge.close);
    const cases: Array<[string, string, string, RegExp]> = [
      [`http://127.0.0.1:${port}/mcp`, 'streamable_http', 'unreachable', /refused/],
      [`http://127.0.0.1:${port}/sse`, 'sse', 'unreachable', /refused/],
      ['http://no-such-host.invalid/mcp', 'streamable_http', 'unreachable', /resolve/],
      [`https://127.0.0.1:${open.url.split(':').pop()}/mcp`, 'streamable_http', 'tls_error', /TLS/],
      [`${html.url}/mcp`, 'streamable_http', 'protocol_error', /not MCP/],
      [`${html.url}/sse`, 'sse', 'protocol_error', /not MCP|MCP/],
      [`${notFound.url}/mcp`, 'streamable_http', 'protocol_error', /404/],
      [`${silent.url}/mcp`, 'streamable_http', 'timeout', /6 seconds/],
      [`${huge.url}/mcp`, 'streamable_http', 'protocol_error', /MCP/],
    ];
    for (const [url, transport, code, message] of cases) {
      const res = await connect(tn, { name: 'Broken', url, transport });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.status, 'error');
      assert.equal(res.body.error.code, code, `${url} (${transport}): ${JSON.stringify(res.body.error)}`);
      assert.match(res.body.error.message, message);
      assert.deepEqual(res.body.tools, []);
    }
    const stored = await rows(tn.workspaceId);
    assert.equal(stored.length, cases.length);
    assert.ok(stored.every((r) => r.status === 'error' && r.tools.length === 0 && r.tools_refreshed_at === null));
  });

  it('refuses stdio, unknown fields, non-http(s) URLs and inconsistent auth settings without storing anything', async () => {
    const tn = await tenant(t);
    const res = await connect(tn, { name: 'Local', url: 'http://127.0.0.1:9/mcp', transport: 'stdio' });
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'unsupported_transport');
    assert.equal(res.body.error.param, 'transport');
    assert.match(res.body.error.message, /subprocess/);
    await refusesAll(tn, [
      [{ name: 'Local', url: open.streamableUrl, transport: 'stdio' }, 'unsupported_transport', 'transport'],
      [{ name: 'Local', url: open.streamableUrl, transport: 'websocket' }, 'invalid_value', 'transport'],
      [{ name: 'Local', url: open.streamableUrl, command: 'npx my-server' }, 'unknown_field', 'command'],
      [{ name: 'Local', url: open.streamableUrl, args: ['--x'] }, 'unknown_field', 'args'],
      [{ name: 'FTP', url: 'ftp://example.com/mcp' }, 'invalid_value', 'url'],
      [{ name: 'File', url: 'file:///etc/passwd' }, 'invalid_value', 'url'],
      [{ name: 'Relative', url: '/mcp' }, 'invalid_value', 'url'],
      [{ name: 'Creds', url: `http://user:pw@127.0.0.1:${open.url.split(':').pop()}/mcp` }, 'url_not_allowed', 'url'],
      [{ url: open.streamableUrl }, 'missing_field', 'name'],
      [{ name: 42, url: open.streamableUrl }, 'invalid_type', 'name'],
      [{ name: 'x', url: open.streamableUrl, auth_type: 'basic' }, 'invalid_value', 'auth_type'],
      [{ name: 'x', url: open.streamableUrl, auth_type: 'static' }, 'static_auth_required', 'static_auth'],
      [{ name: 'x', url: open.streamableUrl, auth_type: 'oauth2' }, 'oauth_config_required', 'oauth_config'],
      [{ name: 'x', url: open.streamableUrl, static_auth: { bearer_token: 'abc' } }, 'auth_config_mismatch', 'static_auth'],
      [{ name: 'x', url: open.streamableUrl, auth_type: 'static', static_auth: { bearer_token: 'a', headers: { A: 'b' } } }, 'invalid_value', 'static_auth'],
      [
        { name: 'x', url: open.streamableUrl, auth_type: 'static', static_auth: { headers: { 'Content-Type': 'text/plain' } } },
        'reserved_header',
        'static_auth.headers.Content-Type',
      ],
      [{ name: 'x', url: open.streamableUrl, auth_type: 'static', static_auth: { headers: { 'bad header': 'v' } } }, 'invalid_value', 'static_auth.headers'],
      [{ name: 'x', url: open.streamableUrl, auth_type: 'static', static_auth: {} }, 'invalid_value', 'static_auth'],
      [{ name: 'x', url: open.streamableUrl, auth_type: 'static', static_auth: { token: 'x' } }, 'unknown_field', 'static_auth.token'],
      [
        {
          name: 'x',
          url: open.streamableUrl,
          auth_type: 'oauth2',
          oauth_config: { client_id: 'c', authorization_url: oauth.authorizationUrl, token_url: oauth.tokenUrl, access_token: 'at_x' },
        },
        'unknown_field',
        'oauth_config.access_token',
      ],
      [
        {
          name: 'x',
          url: open.streamableUrl,
          auth_type: 'oauth2',
          oauth_config: { client_id: 'c', authorization_url: oauth.authorizationUrl, token_url: oauth.tokenUrl, refresh_token: 'rt_x' },
        },
        'unknown_field',
        'oauth_config.refresh_token',
      ],
      [
        {
          name: 'x',
          url: open.streamableUrl,
          auth_type: 'oauth2',
          oauth_config: { client_id: 'c', authorization_url: oauth.authorizationUrl, token_url: oauth.tokenUrl, expires_at: '2030-01-01T00:00:00Z' },
        },
        'unknown_field',
        'oauth_config.expires_at',
      ],
      [
        { name: 'x', url: open.streamableUrl, auth_type: 'oauth2', oauth_config: { client_id: 'c', authorization_url: oauth.authorizationUrl } },
        'missing_field',
        'oauth_config.token_url',
      ],
      [
        {
          name: 'x',
          url: open.streamableUrl,
          auth_type: 'oauth2',
          oauth_config: { client_id: 'c', authorization_url: 'javascript:alert(1)', token_url: oauth.tokenUrl },
        },
        'invalid_value',
        'oauth_config.authorization_url',
      ],
    ]);
  });
});

describe('MCP server URLs in production', () => {
  let prod: TestService;
  before(async () => {
    prod = await startTestService({
      NODE_ENV: 'production',
      VOICE_SERVICE_URL: 'ws://127.0.0.1:9',
      PROVIDER_A_API_URL: 'http://127.0.0.1:9',
      PROVIDER_B_API_URL: 'http://127.0.0.1:9/v2',
      SECRETS_KEY: Buffer.alloc(32, 7).toString('base64'),
      PUBLIC_BASE_URL: 'https://voice.example.com',
      OUTBOUND_ALLOW_LIST: 'localhost',
      MCP_CONNECT_TIMEOUT_MS: '1500',
    });
  });
  after(() => prod.close());

  it('refuses loopback, private and metadata addresses (server and OAuth URLs) and stores nothing', async () => {
    const tn = await tenant(prod);
    const count = async () => Number((await prod.service.db.knex('mcp_servers').count({ n: '*' }))[0].n);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ name: 'Loopback', url: open.streamableUrl }, 'url'],
      [{ name: 'Loopback 2', url: 'http://127.0.0.2:9/mcp' }, 'url'],
      [{ name: 'Private', url: 'http://10.0.0.5/mcp' }, 'url'],
      [{ name: 'Metadata', url: 'http://169.254.169.254/latest/meta-data' }, 'url'],
      [{ name: 'IPv6 loopback', url: 'http://[::1]:8080/mcp' }, 'url'],
      [
        {
          name: 'OAuth',
          url: 'https://93.184.215.14/mcp',
          auth_type: 'oauth2',
          oauth_config: { client_id: 'c', authorization_url: 'https://93.184.215.14/authorize', token_url: 'http://192.168.1.1/token' },
        },
        'oauth_config.token_url',
      ],
    ];
    for (const [body, param] of cases) {
      const res = await prod.http.post('/api/v1/mcp-servers').set(auth(tn)).send(body);
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.equal(res.body.error.code, 'url_not_allowed');
      assert.equal(res.body.error.param, param);
    }
    assert.equal(await count(), 0);
  });

  it('calls an internal host only when OUTBOUND_ALLOW_LIST names it; moving a server to a blocked address is refused and changes nothing', async () => {
    const tn = await tenant(prod);
    const port = open.url.split(':').pop();
    const created = await prod.http
      .post('/api/v1/mcp-servers')
      .set(auth(tn))
      .send({ name: 'Allowed', url: `http://localhost:${port}/mcp` });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.status, 'ok', JSON.stringify(created.body.error));
    const before = await prod.service.db.knex('mcp_servers').where({ id: created.body.mcp_server_id }).first();
    const moved = await prod.http
      .patch(`/api/v1/mcp-servers/${created.body.mcp_server_id}`)
      .set(auth(tn))
      .send({ url: `http://127.0.0.1:${port}/mcp` });
    assert.equal(moved.status, 422);
    assert.equal(moved.body.error.code, 'url_not_allowed');
    assert.equal(moved.body.error.param, 'url');
    assert.deepEqual(await prod.service.db.knex('mcp_servers').where({ id: created.body.mcp_server_id }).first(), before);
  });
});

describe('the connect timeout at its real value', () => {
  it('gives up on a silent server after 10 seconds', async () => {
    const real = await startTestService();
    const silent = await startPlainPeer(() => undefined);
    try {
      const tn = await tenant(real);
      const started = Date.now();
      const res = await real.http
        .post('/api/v1/mcp-servers')
        .set(auth(tn))
        .send({ name: 'Silent', url: `${silent.url}/mcp` });
      const elapsed = Date.now() - started;
      assert.equal(res.status, 201);
      assert.equal(res.body.error.code, 'timeout');
      assert.match(res.body.error.message, /10 seconds/);
      // Not before the timeout; how long after it depends on the machine, and is not asserted.
      assert.ok(elapsed >= 10_000, `gave up after ${elapsed} ms`);
    } finally {
      await silent.close();
      await real.close();
    }
  });
});

async function serverOf(tn: Tenant, body: Record<string, unknown>) {
  const res = await connect(tn, body);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body as { mcp_server_id: string; [k: string]: unknown };
}

async function rowOf(id: string) {
  return t.service.db.knex('mcp_servers').where({ id }).first();
}

describe('update, refresh, delete', () => {
  it('renames without reconnecting, rotates a bearer token with a reconnect, keeps tools when a new URL fails', async () => {
    const tn = await tenant(t);
    const s = await serverOf(tn, { name: 'Orders', url: bearer.streamableUrl, auth_type: 'static', static_auth: { bearer_token: 'old-token' } });
    assert.equal((s.error as { code: string }).code, 'unauthorized');

    const before = bearer.requests.length;
    const renamed = await t.http.patch(`/api/v1/mcp-servers/${s.mcp_server_id}`).set(auth(tn)).send({ name: 'Order lookup' });
    assert.equal(renamed.status, 200);
    assert.equal(renamed.body.name, 'Order lookup');
    assert.equal(renamed.body.status, 'error', 'no reconnect on a rename');
    assert.equal(bearer.requests.length, before);

    const rotated = await t.http
      .patch(`/api/v1/mcp-servers/${s.mcp_server_id}`)
      .set(auth(tn))
      .send({ static_auth: { bearer_token: BEARER } });
    assert.equal(rotated.status, 200);
    assert.equal(rotated.body.status, 'ok', JSON.stringify(rotated.body.error));
    assert.equal(rotated.body.tools.length, 2);
    assert.equal(rotated.body.name, 'Order lookup');

    const port = await closedPort();
    // Another origin: the credentials must come along (they are never moved to a new host on their own).
    const moved = await t.http
      .patch(`/api/v1/mcp-servers/${s.mcp_server_id}`)
      .set(auth(tn))
      .send({ url: `http://127.0.0.1:${port}/mcp`, static_auth: { bearer_token: BEARER } });
    assert.equal(moved.status, 200);
    assert.equal(moved.body.status, 'error');
    assert.equal(moved.body.error.code, 'unreachable');
    assert.equal(moved.body.tools.length, 2, 'the last successful listing is kept');
    assert.equal(moved.body.tools_refreshed_at, rotated.body.tools_refreshed_at);
    assert.equal(moved.body.usable, true);

    const empty = await t.http.patch(`/api/v1/mcp-servers/${s.mcp_server_id}`).set(auth(tn)).send({});
    assert.equal(empty.status, 200);
    assert.deepEqual(empty.body, moved.body, 'an empty object changes nothing');
  });

  it('refuses bad updates without changing anything', async () => {
    const tn = await tenant(t);
    const s = await serverOf(tn, { name: 'Orders', url: open.streamableUrl });
    const before = await rowOf(s.mcp_server_id);
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ transport: 'stdio' }, 'unsupported_transport', 'transport'],
      [{ command: 'x' }, 'unknown_field', 'command'],
      [{ url: 'gopher://example.com' }, 'invalid_value', 'url'],
      [{ name: '' }, 'invalid_value', 'name'],
      [{ static_auth: { bearer_token: 'x' } }, 'auth_config_mismatch', 'static_auth'],
      [{ auth_type: 'static' }, 'static_auth_required', 'static_auth'],
      [{ auth_type: 'oauth2' }, 'oauth_config_required', 'oauth_config'],
      [{ auth_type: 'oauth2', oauth_config: { client_id: 'c' } }, 'oauth_config_required', 'oauth_config.authorization_url'],
      [{ oauth_config: { client_id: 'c' } }, 'auth_config_mismatch', 'oauth_config'],
      [
        { auth_type: 'oauth2', oauth_config: { client_id: 'c', authorization_url: oauth.authorizationUrl, token_url: oauth.tokenUrl, access_token: 'x' } },
        'unknown_field',
        'oauth_config.access_token',
      ],
    ];
    for (const [body, code, param] of cases) {
      const res = await t.http.patch(`/api/v1/mcp-servers/${s.mcp_server_id}`).set(auth(tn)).send(body);
      assert.equal(res.status, 422, `${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, code, JSON.stringify(res.body));
      assert.equal(res.body.error.param, param, JSON.stringify(res.body));
    }
    assert.deepEqual(await rowOf(s.mcp_server_id), before);
  });

  it('refreshes the tool list, and keeps it when the server is down', async () => {
    const peer = await startMcpPeer();
    const tn = await tenant(t);
    const s = await serverOf(tn, { name: 'Changing', url: peer.sseUrl, transport: 'sse' });
    assert.equal((s.tools as unknown[]).length, 2);
    peer.setTools(['lookup_order', 'add', 'cancel_order']);
    const res = await t.http.post(`/api/v1/mcp-servers/${s.mcp_server_id}/refresh`).set(auth(tn));
    assert.equal(res.status, 200);
    assert.equal(res.body.status, 'ok');
    assert.deepEqual(res.body.tools.map((x: { name: string }) => x.name).sort(), ['add', 'cancel_order', 'lookup_order']);
    await peer.close();
    const down = await t.http.post(`/api/v1/mcp-servers/${s.mcp_server_id}/refresh`).set(auth(tn));
    assert.equal(down.status, 200);
    assert.equal(down.body.status, 'error');
    assert.equal(down.body.error.code, 'unreachable');
    assert.deepEqual(down.body.tools, res.body.tools);
    assert.equal(down.body.tools_refreshed_at, res.body.tools_refreshed_at);
  });

  it('deletes a server; other workspaces get 403 and unknown ids 404 on every operation', async () => {
    const tn = await tenant(t);
    const other = await tenant(t);
    const s = await serverOf(tn, { name: 'Orders', url: open.streamableUrl });
    const agent = await t.http.post('/api/v1/agents').set(auth(other)).send({ name: 'Other agent' });
    const id = s.mcp_server_id;
    const before = await rowOf(id);
    const ops = (who: Tenant, sid: string) => [
      t.http.get(`/api/v1/mcp-servers/${sid}`).set(auth(who)),
      t.http.patch(`/api/v1/mcp-servers/${sid}`).set(auth(who)).send({ name: 'Hijacked' }),
      t.http.post(`/api/v1/mcp-servers/${sid}/refresh`).set(auth(who)),
      t.http.post(`/api/v1/mcp-servers/${sid}/oauth/authorize`).set(auth(who)),
      t.http.put(`/api/v1/agents/${agent.body.agent_id}/mcp-servers/${sid}`).set(auth(who)),
      t.http.delete(`/api/v1/mcp-servers/${sid}`).set(auth(who)),
    ];
    for (const res of await Promise.all(ops(other, id))) {
      assert.equal(res.status, 403, JSON.stringify(res.body));
      assert.equal(res.body.error.code, 'forbidden');
    }
    assert.deepEqual(await rowOf(id), before);
    for (const res of await Promise.all(ops(other, 'mcp_01JD5Z7Q8Y1C2B3A4N5M6K7P9Z'))) {
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'mcp_server_not_found');
    }
    const del = await t.http.delete(`/api/v1/mcp-servers/${id}`).set(auth(tn));
    assert.equal(del.status, 200);
    assert.deepEqual(del.body, { status: 'deleted', mcp_server_id: id });
    assert.equal(await rowOf(id), undefined);
    assert.equal((await t.http.get(`/api/v1/mcp-servers/${id}`).set(auth(tn))).status, 404);
  });
});

describe('agents and their MCP servers', () => {
  it('attaches and detaches servers; the agent offers the tools of usable servers and calls them', async () => {
    const tn = await tenant(t);
    const agent = (await t.http.post('/api/v1/agents').set(auth(tn)).send({ name: 'Support' })).body;
    const s = await serverOf(tn, { name: 'Orders', url: bearer.sseUrl, transport: 'sse', auth_type: 'static', static_auth: { bearer_token: BEARER } });
    const pending = await serverOf(tn, {
      name: 'Calendar',
      url: oauthMcp.streamableUrl,
      auth_type: 'oauth2',
      oauth_config: { client_id: oauth.clientId, authorization_url: oauth.authorizationUrl, token_url: oauth.tokenUrl },
    });
    for (const sid of [s.mcp_server_id, pending.mcp_server_id, s.mcp_server_id]) {
      const res = await t.http.put(`/api/v1/agents/${agent.agent_id}/mcp-servers/${sid}`).set(auth(tn));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.mcp_server_id, sid);
    }
    const list = await t.http.get(`/api/v1/agents/${agent.agent_id}/mcp-servers`).set(auth(tn));
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.data.map((x: { mcp_server_id: string }) => x.mcp_server_id).sort(), [s.mcp_server_id, pending.mcp_server_id].sort());

    const tools = await agentMcpTools(tn.workspaceId, agent.agent_id);
    assert.deepEqual(tools.map((x) => x.name).sort(), ['add', 'lookup_order'], 'the oauth2 server is not usable before consent');
    assert.ok(tools.every((x) => x.mcpServerId === s.mcp_server_id && x.serverName === 'Orders'));
    assert.equal(tools.find((x) => x.name === 'add')!.inputSchema.type, 'object');

    const streams = () => bearer.requests.filter((r) => r.path === '/sse').length;
    const streamsBefore = streams();
    const ok = await t.service.mcp.callTool(tn.workspaceId, s.mcp_server_id, 'add', { a: 2, b: 40 }, { timeoutMs: 20_000 });
    assert.deepEqual(ok, { ok: true, result: '42', error: null, errorCode: null });
    assert.deepEqual(bearer.calls.at(-1), ['add', { a: 2, b: 40 }]);
    const second = await t.service.mcp.callTool(tn.workspaceId, s.mcp_server_id, 'lookup_order', { order_id: 'B-7' }, { timeoutMs: 20_000 });
    assert.deepEqual(second, { ok: true, result: 'Order B-7 has shipped.', error: null, errorCode: null });
    assert.equal(streams() - streamsBefore, 1, 'the calls of a conversation share one connection');
    bearer.dropSessions();
    const afterDrop = await t.service.mcp.callTool(tn.workspaceId, s.mcp_server_id, 'add', { a: 1, b: 2 }, { timeoutMs: 20_000 });
    assert.equal(afterDrop.result, '3', 'a session the server forgot is replaced transparently');
    assert.equal(streams() - streamsBefore, 2);
    const unknown = await t.service.mcp.callTool(tn.workspaceId, s.mcp_server_id, 'no_such_tool', {}, { timeoutMs: 20_000 });
    assert.equal(unknown.ok, false);
    assert.equal(unknown.errorCode, 'tool_error');
    const foreign = await t.service.mcp.callTool((await tenant(t)).workspaceId, s.mcp_server_id, 'add', { a: 1, b: 1 }, { timeoutMs: 20_000 });
    assert.equal(foreign.errorCode, 'not_found');
    const notYet = await t.service.mcp.callTool(tn.workspaceId, pending.mcp_server_id, 'add', { a: 1, b: 1 }, { timeoutMs: 20_000 });
    assert.equal(notYet.errorCode, 'consent_required');
    const silent = await startPlainPeer(() => undefined);
    closers.push(silent.close);
    await t.service.db
      .knex('mcp_servers')
      .where({ id: s.mcp_server_id })
      .update({ url: `${silent.url}/sse` });
    const slow = await t.service.mcp.callTool(tn.workspaceId, s.mcp_server_id, 'add', { a: 1, b: 1 }, { timeoutMs: 300 });
    assert.equal(slow.errorCode, 'timeout');

    const detached = await t.http.delete(`/api/v1/agents/${agent.agent_id}/mcp-servers/${s.mcp_server_id}`).set(auth(tn));
    assert.equal(detached.status, 200);
    assert.deepEqual(detached.body, { status: 'detached', mcp_server_id: s.mcp_server_id });
    const again = await t.http.delete(`/api/v1/agents/${agent.agent_id}/mcp-servers/${s.mcp_server_id}`).set(auth(tn));
    assert.equal(again.status, 200, 'detaching twice is harmless');
    assert.deepEqual(await agentMcpTools(tn.workspaceId, agent.agent_id), []);
    assert.ok(await rowOf(s.mcp_server_id), 'the workspace server stays');
  });

  it('refuses unknown and foreign agents', async () => {
    const tn = await tenant(t);
    const other = await tenant(t);
    const foreignAgent = (await t.http.post('/api/v1/agents').set(auth(other)).send({ name: 'Theirs' })).body;
    const s = await serverOf(tn, { name: 'Orders', url: open.streamableUrl });
    const unknown = 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9K';
    for (const [agentId, status, code] of [
      [unknown, 404, 'agent_not_found'],
      [foreignAgent.agent_id, 403, 'forbidden'],
    ] as const) {
      for (const res of [
        await t.http.put(`/api/v1/agents/${agentId}/mcp-servers/${s.mcp_server_id}`).set(auth(tn)),
        await t.http.delete(`/api/v1/agents/${agentId}/mcp-servers/${s.mcp_server_id}`).set(auth(tn)),
        await t.http.get(`/api/v1/agents/${agentId}/mcp-servers`).set(auth(tn)),
      ]) {
        assert.equal(res.status, status, JSON.stringify(res.body));
        assert.equal(res.body.error.code, code);
      }
    }
    assert.equal(Number((await t.service.db.knex('agent_mcp_servers').count({ n: '*' }).where({ mcp_server_id: s.mcp_server_id }))[0].n), 0);
  });
});

/** Plays the person's browser: opens the authorization URL and follows the redirect to our callback. */
async function consent(authorizationUrl: string) {
  const res = await fetch(authorizationUrl, { redirect: 'manual' });
  assert.equal(res.status, 302, await res.text());
  const location = new URL(res.headers.get('location')!);
  for (const name of ['code', 'state']) if (location.searchParams.get(name)) secrets.push(location.searchParams.get(name)!);
  assert.equal(location.pathname, '/api/v1/mcp-servers/oauth/callback');
  return t.http.get(`${location.pathname}${location.search}`);
}

describe('OAuth 2.0 MCP servers', () => {
  const oauthBody = () => ({
    name: 'Clinic <calendar>',
    url: oauthMcp.streamableUrl,
    auth_type: 'oauth2',
    oauth_config: {
      client_id: oauth.clientId,
      client_secret: oauth.clientSecret,
      authorization_url: oauth.authorizationUrl,
      token_url: oauth.tokenUrl,
      scopes: ['calendar.read', 'calendar.write'],
    },
  });

  it('is not usable until consent; consent with PKCE stores sealed tokens, lists tools, refreshes before expiry', async () => {
    const tn = await tenant(t);
    const s = await serverOf(tn, oauthBody());
    assert.equal(s.status, 'error');
    assert.deepEqual(s.error, { code: 'consent_required', message: (s.error as { message: string }).message });
    assert.equal(s.oauth_status, 'consent_required');
    assert.equal(s.usable, false);
    assert.deepEqual(s.oauth_config, {
      client_id: oauth.clientId,
      has_client_secret: true,
      authorization_url: oauth.authorizationUrl,
      token_url: oauth.tokenUrl,
      scopes: ['calendar.read', 'calendar.write'],
      expires_at: null,
    });
    assert.equal(oauthMcp.requests.length, 0, 'nothing is tried before consent');

    const started = await t.http.post(`/api/v1/mcp-servers/${s.mcp_server_id}/oauth/authorize`).set(auth(tn));
    assert.equal(started.status, 200, JSON.stringify(started.body));
    const authUrl = new URL(started.body.authorization_url);
    assert.equal(`${authUrl.origin}${authUrl.pathname}`, oauth.authorizationUrl);
    const q = authUrl.searchParams;
    assert.equal(q.get('response_type'), 'code');
    assert.equal(q.get('client_id'), oauth.clientId);
    assert.equal(q.get('code_challenge_method'), 'S256');
    assert.match(q.get('code_challenge')!, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(q.get('scope'), 'calendar.read calendar.write');
    assert.match(q.get('redirect_uri')!, /\/api\/v1\/mcp-servers\/oauth\/callback$/);
    const state = q.get('state')!;
    assert.ok(state.length >= 32);
    assert.ok(Math.abs(Date.parse(started.body.state_expires_at) - (clock.now().getTime() + 10 * 60 * 1000)) < 5000, 'the state lives 10 minutes');
    const stateRow = await t.service.db.knex('mcp_oauth_states').where({ mcp_server_id: s.mcp_server_id }).first();
    assert.notEqual(stateRow.state_hash, state, 'only a hash of the state is stored');
    assert.ok(!JSON.stringify(stateRow).includes(state));

    const page = await consent(started.body.authorization_url);
    assert.equal(page.status, 200, JSON.stringify(page.body));
    assert.match(page.headers['content-type'], /text\/html/);
    assert.match(page.text, /Clinic &#60;calendar&#62; is connected/);
    const exchange = oauth.grants.at(-1)!;
    assert.equal(exchange.grant_type, 'authorization_code');
    assert.equal(exchange.clientAuth, 'basic');

    const got = (await t.http.get(`/api/v1/mcp-servers/${s.mcp_server_id}`).set(auth(tn))).body;
    assert.equal(got.oauth_status, 'authorized');
    assert.equal(got.usable, true);
    assert.equal(got.status, 'ok', JSON.stringify(got.error));
    assert.equal(got.tools.length, 2);
    assert.ok(Math.abs(Date.parse(got.oauth_config.expires_at) - (clock.now().getTime() + 3600 * 1000)) < 5000);
    const row = await rowOf(s.mcp_server_id);
    assert.match(row.oauth_access_token, /^v2\./);
    assert.match(row.oauth_refresh_token, /^v2\./);
    assert.match(row.oauth_client_secret, /^v2\./);
    for (const token of oauth.issued) assert.ok(!JSON.stringify(row).includes(token), 'tokens are sealed');

    const replay = await t.http.get(`/api/v1/mcp-servers/oauth/callback?state=${encodeURIComponent(state)}&code=whatever`);
    assert.equal(replay.status, 400);
    assert.equal(replay.body.error.code, 'invalid_oauth_state', 'the state is single use');

    // Later updates keep the tokens: a rename and a client secret rotation.
    const updated = await t.http
      .patch(`/api/v1/mcp-servers/${s.mcp_server_id}`)
      .set(auth(tn))
      .send({ name: 'Clinic calendar', oauth_config: { client_secret: oauth.clientSecret, scopes: ['calendar.read', 'calendar.write'] } });
    assert.equal(updated.status, 200);
    assert.equal(updated.body.oauth_status, 'authorized');
    assert.equal(updated.body.status, 'ok');
    const afterUpdate = await rowOf(s.mcp_server_id);
    assert.equal(afterUpdate.oauth_access_token, row.oauth_access_token);
    assert.equal(afterUpdate.oauth_refresh_token, row.oauth_refresh_token);

    // An hour later the token is about to expire: the next use refreshes it first.
    const grantsBefore = oauth.grants.length;
    clock.offset += 3600 * 1000 - 30_000;
    try {
      const refreshed = await t.http.post(`/api/v1/mcp-servers/${s.mcp_server_id}/refresh`).set(auth(tn));
      assert.equal(refreshed.status, 200);
      assert.equal(refreshed.body.status, 'ok', JSON.stringify(refreshed.body.error));
      const grants = oauth.grants.slice(grantsBefore);
      assert.deepEqual(
        grants.map((g) => g.grant_type),
        ['refresh_token'],
      );
      const newest = oauth.issued.at(-2)!;
      assert.equal(oauthMcp.requests.at(-1)!.headers.authorization, `Bearer ${newest}`);
      assert.ok(Date.parse(refreshed.body.oauth_config.expires_at) > clock.now().getTime() + 3500 * 1000);
      assert.notEqual((await rowOf(s.mcp_server_id)).oauth_access_token, row.oauth_access_token);

      // The agent's tools work with the refreshed token.
      const agent = (await t.http.post('/api/v1/agents').set(auth(tn)).send({ name: 'Receptionist' })).body;
      await t.http.put(`/api/v1/agents/${agent.agent_id}/mcp-servers/${s.mcp_server_id}`).set(auth(tn));
      assert.deepEqual((await agentMcpTools(tn.workspaceId, agent.agent_id)).map((x) => x.name).sort(), ['add', 'lookup_order']);
      const call = await t.service.mcp.callTool(tn.workspaceId, s.mcp_server_id, 'lookup_order', { order_id: 'A-1' }, { timeoutMs: 20_000 });
      assert.deepEqual(call, { ok: true, result: 'Order A-1 has shipped.', error: null, errorCode: null });

      // The provider refuses the next refresh: consent is needed again and the tools are no longer offered.
      oauth.options.refuseRefresh = true;
      clock.offset += 3600 * 1000;
      const refused = await t.http.post(`/api/v1/mcp-servers/${s.mcp_server_id}/refresh`).set(auth(tn));
      assert.equal(refused.status, 200);
      assert.equal(refused.body.oauth_status, 'refresh_failed');
      assert.equal(refused.body.usable, false);
      assert.equal(refused.body.error.code, 'consent_required');
      assert.equal(refused.body.tools.length, 2, 'the last listing is kept');
      assert.deepEqual(await agentMcpTools(tn.workspaceId, agent.agent_id), []);
      const blocked = await t.service.mcp.callTool(tn.workspaceId, s.mcp_server_id, 'add', { a: 1, b: 2 }, { timeoutMs: 20_000 });
      assert.equal(blocked.errorCode, 'consent_required');
    } finally {
      oauth.options.refuseRefresh = false;
    }
    assertNoSecrets(JSON.stringify([s, got, updated.body]));
  });

  it('answers the callback errors: missing, unknown and expired state, denied consent, missing code, failed exchange', async () => {
    const tn = await tenant(t);
    const s = await serverOf(tn, oauthBody());
    const start = async () =>
      new URL((await t.http.post(`/api/v1/mcp-servers/${s.mcp_server_id}/oauth/authorize`).set(auth(tn))).body.authorization_url).searchParams.get('state')!;
    const callback = (q: Record<string, string>) => t.http.get(`/api/v1/mcp-servers/oauth/callback?${new URLSearchParams(q)}`);
    const before = await rowOf(s.mcp_server_id);

    for (const [q, status, code] of [
      [{}, 400, 'invalid_oauth_state'],
      [{ state: 'st_unknown', code: 'x' }, 400, 'invalid_oauth_state'],
      [{ state: await start(), error: 'access_denied', error_description: 'The user declined.' }, 400, 'oauth_consent_denied'],
      [{ state: await start() }, 400, 'missing_authorization_code'],
      [{ state: await start(), code: 'code_forged' }, 502, 'oauth_token_exchange_failed'],
      [{ state: 'x'.repeat(300), code: 'x' }, 422, 'invalid_value'],
    ] as const) {
      const res = await callback(q as Record<string, string>);
      assert.equal(res.status, status, `${JSON.stringify(q)}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, code);
    }
    const expired = await start();
    clock.offset += 10 * 60 * 1000 + 1000;
    const late = await callback({ state: expired, code: 'x' });
    assert.equal(late.status, 400);
    assert.equal(late.body.error.code, 'invalid_oauth_state');
    assert.deepEqual(await rowOf(s.mcp_server_id), before, 'the server still waits for consent, unchanged');

    const notOauth = await serverOf(tn, { name: 'Plain', url: open.streamableUrl });
    const refused = await t.http.post(`/api/v1/mcp-servers/${notOauth.mcp_server_id}/oauth/authorize`).set(auth(tn));
    assert.equal(refused.status, 409);
    assert.equal(refused.body.error.code, 'not_oauth2');
    assert.equal(await t.service.db.knex('mcp_oauth_states').where({ mcp_server_id: notOauth.mcp_server_id }).first(), undefined);
  });

  it('switching auth_type away from oauth2 discards the OAuth settings and tokens', async () => {
    const tn = await tenant(t);
    const s = await serverOf(tn, oauthBody());
    const started = await t.http.post(`/api/v1/mcp-servers/${s.mcp_server_id}/oauth/authorize`).set(auth(tn));
    assert.equal((await consent(started.body.authorization_url)).status, 200);
    const res = await t.http.patch(`/api/v1/mcp-servers/${s.mcp_server_id}`).set(auth(tn)).send({ auth_type: 'none', url: open.streamableUrl });
    assert.equal(res.status, 200);
    assert.equal(res.body.oauth_config, null);
    assert.equal(res.body.oauth_status, 'not_applicable');
    assert.equal(res.body.status, 'ok');
    const row = await rowOf(s.mcp_server_id);
    for (const col of ['oauth_client_id', 'oauth_client_secret', 'oauth_access_token', 'oauth_refresh_token', 'oauth_expires_at'])
      assert.equal(row[col], null, col);
  });
});

describe('secrets', () => {
  it('never appear in the service logs', () => {
    const logs = t.logs.join('\n');
    assert.ok(logs.length > 0);
    assertNoSecrets(logs);
  });
});
