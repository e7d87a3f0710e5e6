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
import { assertNoStall } from '../helpers/event-loop.js';
import { branchingSchema, wideSchema } from '../helpers/hostile-schemas.js';

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

describe('tool parameters held to a budget (issue 32), measured by /healthz beside the request', () => {
  let made = 0;
  const ordinaryCreate = () => tool(`ordinary_${made++}`, { type: 'object', properties: { day: { type: 'string' } } }).expect(201);
  const stored = async () =>
    Number((await t.service.db.knex('tools').where({ workspace_id: tn.workspaceId }).count<{ count: string }[]>('* as count'))[0].count);

  it('1,500 plain properties (the 109 KB schema) are refused at once with 422 parameters_schema_too_large, storing nothing', async () => {
    const before = await stored();
    const madeBefore = made;
    const res = await assertNoStall(t.url, () => tool('wide', wideSchema(1500)), ordinaryCreate, 'creating a tool of 1,500 properties');
    assert.equal(res.status, 422, JSON.stringify(res.body).slice(0, 500));
    assert.equal(res.body.error.code, 'parameters_schema_too_large');
    assert.equal(res.body.error.param, 'parameters');
    assert.equal(await stored(), before + made - madeBefore, 'nothing stored but the ordinary tools');
  });

  it('two $refs per level for 20 levels are refused with 422 parameters_schema_too_complex naming a $ref, on create and on update', async () => {
    const before = await stored();
    const madeBefore = made;
    const res = await assertNoStall(t.url, () => tool('branching', branchingSchema(20)), ordinaryCreate, 'creating a tool that branches 2^20 ways');
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(res.body.error.code, 'parameters_schema_too_complex');
    assert.match(res.body.error.param, /^parameters\.\$defs\.l\d+\.anyOf\.\d\.\$ref$/);
    assert.equal(await stored(), before + made - madeBefore, 'nothing stored but the ordinary tools');

    const kept = (await tool('kept', branchingSchema(4)).expect(201)).body;
    const update = await t.http
      .patch(`/api/v1/tools/${kept.tool_id}`)
      .set(bearer(tn.apiKey))
      .send({ parameters: branchingSchema(20) });
    assert.equal(update.status, 422, JSON.stringify(update.body));
    assert.equal(update.body.error.code, 'parameters_schema_too_complex');
    assert.deepEqual((await t.http.get(`/api/v1/tools/${kept.tool_id}`).set(bearer(tn.apiKey))).body.parameters, branchingSchema(4), 'the tool is unchanged');
  });

  it('a schema that refers to itself is refused with 422 parameters_schema_too_complex naming the $ref', async () => {
    const res = await tool('recursive', { type: 'object', properties: { a: { $ref: '#' } } });
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(res.body.error.code, 'parameters_schema_too_complex');
    assert.equal(res.body.error.param, 'parameters.properties.a.$ref');
  });

  it('the largest schema the budget allows is compiled, and arguments checked, off the event loop', async () => {
    let attempt = 0; // a stall measurement may run the create again: a new name each time
    const wide = await assertNoStall(
      t.url,
      () => tool(`widest_allowed_${attempt++}`, wideSchema(200, 'w')),
      ordinaryCreate,
      'creating a tool of 200 properties',
    );
    assert.equal(wide.status, 201, JSON.stringify(wide.body).slice(0, 500));
    const small = (await tool('small', { type: 'object', properties: { field_w0: { type: 'string' } } }).expect(201)).body;
    const testOf = (toolId: string) => () =>
      t.http
        .post(`/api/v1/tools/${toolId}/test`)
        .set(bearer(tn.apiKey))
        .send({ arguments: { field_w0: 7 } });
    const refused = await assertNoStall(t.url, testOf(wide.body.tool_id), testOf(small.tool_id), 'testing a tool of 200 properties');
    assert.equal(refused.status, 422, JSON.stringify(refused.body));
    assert.equal(refused.body.error.code, 'invalid_arguments');
    assert.equal(refused.body.error.param, 'arguments.field_w0');
  });
});
