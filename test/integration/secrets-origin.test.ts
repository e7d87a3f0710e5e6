/**
 * Write-only secrets are bound to the origin they were given for: moving a tool's `url`, an MCP
 * server's `url` or an OAuth `token_url` to another scheme, host or port drops the stored secrets unless
 * the same request sends them again, so a key holder cannot redirect them to a host of their choosing.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { startHttpPeer, type HttpPeer } from '../helpers/http-peer.js';
import { startMcpPeer, startOAuthPeer, type McpPeer, type OAuthPeer } from '../helpers/mcp-peers.js';

let t: TestService;
let tn: Tenant;
let home: HttpPeer;
let elsewhere: HttpPeer;
const seen: Array<{ peer: string; auth: string | undefined; path: string }> = [];
let mcpHome: McpPeer;
let mcpElsewhere: McpPeer;
let oauth: OAuthPeer;
let oauthElsewhere: OAuthPeer;

const SECRET = 'Bearer sk_live_bound_to_home_0123';

before(async () => {
  t = await startTestService();
  tn = await tenant(t);
  const record =
    (peer: string) => async (req: { url: string; headers: Record<string, string | string[] | undefined> }, res: import('node:http').ServerResponse) => {
      seen.push({ peer, auth: req.headers.authorization as string | undefined, path: req.url });
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{}');
    };
  home = await startHttpPeer(record('home'));
  elsewhere = await startHttpPeer(record('elsewhere'));
  mcpHome = await startMcpPeer({ acceptBearer: (tok) => tok === 'mcp-static-secret' });
  mcpElsewhere = await startMcpPeer();
  oauth = await startOAuthPeer();
  oauthElsewhere = await startOAuthPeer();
});

after(async () => {
  for (const p of [home, elsewhere, mcpHome, mcpElsewhere, oauth, oauthElsewhere]) await p.close();
  await t.close();
});

const api = (method: 'post' | 'patch', path: string, body: Record<string, unknown>) => t.http[method](path).set(bearer(tn.apiKey)).send(body);

describe('tool headers', () => {
  it('stay with a path change on the same origin, are dropped when the url moves elsewhere, and go along only when sent again', async () => {
    const tool = (await api('post', '/api/v1/tools', { name: 'bound_tool', description: 'x', url: `${home.url}/a`, headers: { Authorization: SECRET } })).body;
    assert.equal((await api('patch', `/api/v1/tools/${tool.tool_id}`, { url: `${home.url}/b` })).status, 200);
    await api('post', `/api/v1/tools/${tool.tool_id}/test`, { arguments: {} });
    assert.equal(seen.at(-1)?.auth, SECRET, 'same origin: the header is kept');

    const moved = await api('patch', `/api/v1/tools/${tool.tool_id}`, { url: `${elsewhere.url}/collect` });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    await api('post', `/api/v1/tools/${tool.tool_id}/test`, { arguments: {} });
    assert.deepEqual(seen.at(-1), { peer: 'elsewhere', auth: undefined, path: '/collect' }, 'the stored secret did not follow the url');

    await api('patch', `/api/v1/tools/${tool.tool_id}`, { url: `${home.url}/c`, headers: { Authorization: 'Bearer resent' } });
    await api('post', `/api/v1/tools/${tool.tool_id}/test`, { arguments: {} });
    assert.equal(seen.at(-1)?.auth, 'Bearer resent', 'headers sent with the move go along');
  });
});

describe('MCP credentials', () => {
  it('static credentials are not moved to another origin without being sent again', async () => {
    const server = (
      await api('post', '/api/v1/mcp-servers', {
        name: 'Bound',
        url: mcpHome.streamableUrl,
        auth_type: 'static',
        static_auth: { bearer_token: 'mcp-static-secret' },
      })
    ).body;
    const refused = await api('patch', `/api/v1/mcp-servers/${server.mcp_server_id}`, { url: mcpElsewhere.streamableUrl });
    assert.equal(refused.status, 422, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'static_auth_required');
    assert.ok(!mcpElsewhere.requests.some((r) => String(r.headers.authorization ?? '').includes('mcp-static-secret')), 'nothing reached the new host');
    const row = await t.service.db.knex('mcp_servers').where({ id: server.mcp_server_id }).first('url', 'static_headers');
    assert.equal(row.url, mcpHome.streamableUrl, 'unchanged');
    assert.ok(row.static_headers);
  });

  it('OAuth tokens and the client secret are dropped when the token endpoint moves to another origin', async () => {
    const created = await api('post', '/api/v1/mcp-servers', {
      name: 'OAuth bound',
      url: mcpHome.streamableUrl,
      auth_type: 'oauth2',
      oauth_config: { client_id: oauth.clientId, client_secret: oauth.clientSecret, authorization_url: oauth.authorizationUrl, token_url: oauth.tokenUrl },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.mcp_server_id as string;
    // As if consent had happened: tokens stored.
    const seal = (v: string, field: string) => t.service.secrets.seal(v, `mcp_servers/${id}/${field}`);
    await t.service.db
      .knex('mcp_servers')
      .where({ id })
      .update({ oauth_access_token: seal('at-1', 'oauth_access_token'), oauth_refresh_token: seal('rt-1', 'oauth_refresh_token'), oauth_status: 'authorized' });
    const sameHost = await api('patch', `/api/v1/mcp-servers/${id}`, { oauth_config: { token_url: `${oauth.tokenUrl}?v=2` } });
    assert.equal(sameHost.status, 200, JSON.stringify(sameHost.body));
    let row = await t.service.db.knex('mcp_servers').where({ id }).first();
    assert.ok(row.oauth_client_secret && row.oauth_refresh_token, 'same origin: secret and tokens kept');
    const moved = await api('patch', `/api/v1/mcp-servers/${id}`, { oauth_config: { token_url: oauthElsewhere.tokenUrl } });
    assert.equal(moved.status, 200, JSON.stringify(moved.body));
    row = await t.service.db.knex('mcp_servers').where({ id }).first();
    assert.deepEqual([row.oauth_client_secret, row.oauth_access_token, row.oauth_refresh_token, row.oauth_status], [null, null, null, 'consent_required']);
    assert.equal(oauthElsewhere.grants.length, 0, 'no token request went to the new endpoint');
  });
});
