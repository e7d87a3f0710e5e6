/**
 * A tenant's regular expressions cannot stop the service: a tool's `parameters` patterns run on a
 * linear-time engine (RE2), so a catastrophic pattern is as quick as any other while `/healthz` keeps
 * answering; patterns RE2 cannot run (look-around, back-references) are refused when the tool is written.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { startHttpPeer, type HttpPeer } from '../helpers/http-peer.js';

let t: TestService;
let tn: Tenant;
let peer: HttpPeer;

before(async () => {
  t = await startTestService();
  tn = await tenant(t);
  peer = await startHttpPeer(async (_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{"ok":true}');
  });
});

after(async () => {
  await peer.close();
  await t.close();
});

const tool = (name: string, parameters: Record<string, unknown>) =>
  t.http
    .post('/api/v1/tools')
    .set(bearer(tn.apiKey))
    .send({ name, description: 'Looks things up.', url: `${peer.url}/lookup`, parameters });

describe('hostile patterns in tool parameters', () => {
  it('a catastrophic pattern is matched in linear time, and /healthz keeps answering', async () => {
    const created = await tool('nested_quantifier', {
      type: 'object',
      properties: { code: { type: 'string', pattern: '^(a+)+$' } },
      patternProperties: { '^(x+x+)+y$': { type: 'string' } },
      required: ['code'],
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const evil = `${'a'.repeat(5000)}!`;
    const running = t.http
      .post(`/api/v1/tools/${created.body.tool_id}/test`)
      .set(bearer(tn.apiKey))
      .send({ arguments: { code: evil, [`${'x'.repeat(5000)}`]: 'v' } })
      .then((r) => r);
    const t0 = Date.now();
    const health = await t.http.get('/healthz');
    assert.equal(health.status, 200);
    assert.ok(Date.now() - t0 < 1000, `/healthz within a second (${Date.now() - t0} ms)`);
    const res = await running;
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(res.body.error.code, 'invalid_arguments');
    const ok = await t.http
      .post(`/api/v1/tools/${created.body.tool_id}/test`)
      .set(bearer(tn.apiKey))
      .send({ arguments: { code: 'aaaa' } });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
  });

  it('refuses patterns a linear-time engine cannot run, when the tool is written', async () => {
    for (const pattern of ['^(?=a)a$', '^(a)\\1$', '(?<!x)y']) {
      const res = await tool(`lookaround_${Math.random().toString(36).slice(2, 8)}`, { type: 'object', properties: { v: { type: 'string', pattern } } });
      assert.equal(res.status, 422, `${pattern}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'invalid_parameters_schema');
    }
    const [{ count }] = await t.service.db
      .knex('tools')
      .where({ workspace_id: tn.workspaceId })
      .where('name', 'like', 'lookaround_%')
      .count<{ count: string }[]>('* as count');
    assert.equal(Number(count), 0, 'nothing stored');
  });
});
