/**
 * The dashboard calls the developer API with its session: developer operations take an API key or a
 * dashboard session token, and with a session the member's role applies (a viewer only reads, and
 * does not see the webhook signing secret). Key and member routes still refuse API keys.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/webhooks.js';

let t: TestService;
let owner: Tenant;
const sessions: Record<'viewer' | 'developer', string> = { viewer: '', developer: '' };

async function memberSession(role: 'viewer' | 'developer'): Promise<string> {
  const email = `${role}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}@example.com`;
  const created = await t.http.post('/api/v1/members').set(bearer(owner.sessionToken)).send({ email, password: 'long-enough-pw', role });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const login = await t.http.post('/api/v1/auth/login').send({ email, password: 'long-enough-pw' });
  assert.equal(login.status, 200, JSON.stringify(login.body));
  return login.body.session_token as string;
}

before(async () => {
  t = await startTestService();
  owner = await tenant(t);
  sessions.viewer = await memberSession('viewer');
  sessions.developer = await memberSession('developer');
});
after(async () => {
  await t.close();
});

describe('developer operations with a dashboard session', () => {
  it("the owner's session creates, reads, updates and deletes like an API key", async () => {
    const created = await t.http.post('/api/v1/agents').set(bearer(owner.sessionToken)).send({ name: 'From the dashboard' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const byKey = await t.http.get(`/api/v1/agents/${created.body.agent_id}`).set(bearer(owner.apiKey));
    assert.equal(byKey.body.name, 'From the dashboard');
    assert.equal((await t.http.patch(`/api/v1/agents/${created.body.agent_id}`).set(bearer(owner.sessionToken)).send({ name: 'Renamed' })).status, 200);
    assert.equal((await t.http.delete(`/api/v1/agents/${created.body.agent_id}`).set(bearer(owner.sessionToken))).status, 200);
  });

  it('a viewer reads and searches but cannot create, change, delete or see the signing secret; nothing changes', async () => {
    const agent = (await t.http.post('/api/v1/agents').set(bearer(owner.apiKey)).send({ name: 'Read me' })).body;
    const viewer = bearer(sessions.viewer);
    assert.equal((await t.http.get('/api/v1/agents').set(viewer)).status, 200);
    assert.equal((await t.http.get(`/api/v1/agents/${agent.agent_id}`).set(viewer)).status, 200);
    assert.equal((await t.http.get('/api/v1/calls').set(viewer)).status, 200);
    assert.equal((await t.http.post(`/api/v1/agents/${agent.agent_id}/knowledge/search`).set(viewer).send({ query: 'hours' })).status, 200);
    const before = await t.service.db.knex('agents').where({ workspace_id: owner.workspaceId }).orderBy('id');
    for (const [method, path, body] of [
      ['post', '/api/v1/agents', { name: 'Nope' }],
      ['patch', `/api/v1/agents/${agent.agent_id}`, { name: 'Nope' }],
      ['delete', `/api/v1/agents/${agent.agent_id}`, undefined],
      ['post', '/api/v1/webhooks', { url: 'https://example.com/hooks' }],
      ['get', '/api/v1/webhooks/secret', undefined],
      ['post', '/api/v1/realtime/sessions', { agent_id: agent.agent_id, user_id: 'u', source: 'text' }],
    ] as const) {
      const req = t.http[method](path).set(viewer);
      const res = await (body ? req.send(body) : req);
      assert.equal(res.status, 403, `${method} ${path}: ${res.text}`);
      assert.equal(res.body.error.code, 'insufficient_role');
    }
    assert.deepEqual(await t.service.db.knex('agents').where({ workspace_id: owner.workspaceId }).orderBy('id'), before);
    assert.equal(await t.service.db.knex('webhooks').where({ workspace_id: owner.workspaceId }).first(), undefined);
  });

  it('uploads take a session like a key: a CSV batch and a document as multipart; a viewer is refused and nothing is stored', async () => {
    const agent = (
      await t.http
        .post('/api/v1/agents')
        .set(bearer(owner.apiKey))
        .send({ name: 'Uploads', ...{ provider_a_config: { account_sid: `AC${'1'.repeat(32)}`, auth_token: 'x'.repeat(32), phone_number: '+14155550100' } } })
    ).body;
    const csv = Buffer.from('to_number\n+14155550002\n');
    const batch = await t.http
      .post('/api/v1/batches/csv')
      .set(bearer(sessions.developer))
      .field('agent_id', agent.agent_id)
      .field('name', 'From the dashboard')
      .field('scheduled_at', new Date(Date.now() + 3_600_000).toISOString())
      .attach('file', csv, { filename: 'numbers.csv', contentType: 'text/csv' });
    assert.equal(batch.status, 201, batch.text);
    assert.equal(batch.body.total, 1);
    const doc = await t.http
      .post('/api/v1/documents')
      .set(bearer(sessions.developer))
      .attach('file', Buffer.from('Open 9 to 5.'), { filename: 'hours.txt', contentType: 'text/plain' });
    assert.equal(doc.status, 201, doc.text);

    const batches = await t.service.db.knex('batches').where({ workspace_id: owner.workspaceId }).count({ n: '*' }).first();
    const viewerBatch = await t.http
      .post('/api/v1/batches/csv')
      .set(bearer(sessions.viewer))
      .field('agent_id', agent.agent_id)
      .field('name', 'Nope')
      .attach('file', csv, { filename: 'numbers.csv', contentType: 'text/csv' });
    assert.equal(viewerBatch.status, 403, viewerBatch.text);
    assert.equal(viewerBatch.body.error.code, 'insufficient_role');
    const viewerDoc = await t.http
      .post('/api/v1/documents')
      .set(bearer(sessions.viewer))
      .attach('file', Buffer.from('x'), { filename: 'x.txt', contentType: 'text/plain' });
    assert.equal(viewerDoc.status, 403, viewerDoc.text);
    assert.deepEqual(await t.service.db.knex('batches').where({ workspace_id: owner.workspaceId }).count({ n: '*' }).first(), batches);
  });

  it('a developer writes', async () => {
    const res = await t.http.post('/api/v1/agents').set(bearer(sessions.developer)).send({ name: 'By a developer' });
    assert.equal(res.status, 201);
    assert.equal((await t.http.get('/api/v1/webhooks/secret').set(bearer(sessions.developer))).status, 200);
  });

  it('an invalid session token is refused as a session; key and member routes still refuse API keys', async () => {
    const bad = await t.http.get('/api/v1/agents').set(bearer(`ds_${'x'.repeat(43)}`));
    assert.equal(bad.status, 401);
    assert.match(bad.body.error.message, /session token is invalid/);
    const keys = await t.http.get('/api/v1/keys').set(bearer(owner.apiKey));
    assert.equal(keys.status, 401);
    assert.match(keys.body.error.message, /dashboard session/);
  });

  it("another workspace's session sees nothing of this one", async () => {
    const other = await tenant(t);
    const agent = (await t.http.post('/api/v1/agents').set(bearer(owner.apiKey)).send({ name: 'Mine' })).body;
    const res = await t.http.get(`/api/v1/agents/${agent.agent_id}`).set(bearer(other.sessionToken));
    assert.equal(res.status, 403);
    assert.ok(!res.text.includes('Mine'));
  });
});
