/**
 * Header values are checked when they are written: CR/LF (header injection), NUL, other control
 * characters and characters beyond U+00FF are refused with 422 naming the header, and nothing is
 * stored (they used to be accepted and then fail every call with a 500 ERR_INVALID_CHAR).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, startReceiver, type Receiver } from '../helpers/webhooks.js';

let t: TestService;
let tn: Tenant;
let receiver: Receiver;
before(async () => {
  t = await startTestService();
  tn = await tenant(t);
  receiver = await startReceiver((_req, res) => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"ok":true}'));
});
after(async () => {
  await receiver.close();
  await t.close();
});

const BAD = ['Bearer abc\r\nX-Injected: 1', 'line\nbreak', 'nul\u0000byte', 'bell\u0007', 'del\u007f', 'snow\u2603man', '\uD83D\uDE00'];

describe('tool and MCP header values', () => {
  it('refuses bad values on create and update with 422 naming the header; nothing is stored or changed', async () => {
    for (const value of BAD) {
      const res = await t.http
        .post('/api/v1/tools')
        .set(bearer(tn.apiKey))
        .send({ name: 'lookup', description: 'd', url: `${receiver.url}/t`, headers: { 'X-Api-Key': value } });
      assert.equal(res.status, 422, `${JSON.stringify(value)}: ${res.text}`);
      assert.equal(res.body.error.param, 'headers.X-Api-Key');
      assert.ok(!res.text.includes(value), 'the value is not echoed');
    }
    assert.deepEqual(await t.service.db.knex('tools').where({ workspace_id: tn.workspaceId }), []);
    const tool = (
      await t.http
        .post('/api/v1/tools')
        .set(bearer(tn.apiKey))
        .send({ name: 'lookup', description: 'd', url: `${receiver.url}/t`, headers: { 'X-Api-Key': 'good value é' } })
    ).body;
    const before = await t.service.db.knex('tools').where({ id: tool.tool_id }).first();
    for (const value of BAD) {
      const res = await t.http
        .patch(`/api/v1/tools/${tool.tool_id}`)
        .set(bearer(tn.apiKey))
        .send({ headers: { 'X-Api-Key': value } });
      assert.equal(res.status, 422, JSON.stringify(value));
      assert.equal(res.body.error.param, 'headers.X-Api-Key');
    }
    assert.deepEqual(await t.service.db.knex('tools').where({ id: tool.tool_id }).first(), before);
    const test = await t.http.post(`/api/v1/tools/${tool.tool_id}/test`).set(bearer(tn.apiKey)).send({ arguments: {} });
    assert.equal(test.status, 200, test.text);
    assert.equal(receiver.requests.at(-1)!.headers['x-api-key'], Buffer.from('good value é', 'latin1').toString('latin1'));
  });

  it('refuses bad MCP static header values and bearer tokens', async () => {
    for (const static_auth of [{ headers: { 'X-Key': 'a\r\nb' } }, { bearer_token: 'tok en' }, { bearer_token: 'tok\u2603' }]) {
      const res = await t.http
        .post('/api/v1/mcp-servers')
        .set(bearer(tn.apiKey))
        .send({ name: 'mcp', url: `${receiver.url}/mcp`, auth_type: 'static', static_auth });
      assert.equal(res.status, 422, JSON.stringify(static_auth) + res.text);
    }
    assert.deepEqual(await t.service.db.knex('mcp_servers').where({ workspace_id: tn.workspaceId }), []);
  });
});
