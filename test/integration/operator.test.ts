import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_TOKEN, startTestService, type TestService } from '../helpers/service.js';
import { signup, tenant } from '../helpers/fixtures.js';

let t: TestService;
before(async () => {
  t = await startTestService();
});
after(() => t.close());

const operator = { Authorization: `Bearer ${ADMIN_TOKEN}` };

describe('operator API', () => {
  it('shows a new workspace on the documented defaults', async () => {
    const s = await signup(t);
    const res = await t.http.get(`/admin/v1/workspaces/${s.workspaceId}`).set(operator);
    assert.equal(res.status, 200);
    assert.deepEqual(
      {
        plan: res.body.plan,
        subscription_status: res.body.subscription_status,
        credit_balance_cents: res.body.credit_balance_cents,
        concurrent_session_limit: res.body.concurrent_session_limit,
      },
      { plan: 'trial', subscription_status: 'active', credit_balance_cents: 1000, concurrent_session_limit: 5 },
    );
  });

  it('lists workspaces newest first with cursor pagination', async () => {
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await signup(t, `W${i}`)).workspaceId);
    const first = await t.http.get('/admin/v1/workspaces?limit=2').set(operator);
    assert.equal(first.status, 200);
    assert.equal(first.body.object, 'list');
    assert.deepEqual(
      first.body.data.map((w: { id: string }) => w.id),
      [ids[2], ids[1]],
    );
    assert.equal(first.body.has_more, true);
    assert.equal(first.body.next_cursor, ids[1]);
    const second = await t.http.get(`/admin/v1/workspaces?limit=2&starting_after=${first.body.next_cursor}`).set(operator);
    assert.equal(second.body.data[0].id, ids[0]);
    const bad = await t.http.get('/admin/v1/workspaces?limit=1000').set(operator);
    assert.equal(bad.status, 422);
    assert.equal(bad.body.error.param, 'limit');
    const unknown = await t.http.get('/admin/v1/workspaces?colour=red').set(operator);
    assert.equal(unknown.status, 422);
    assert.equal(unknown.body.error.code, 'unknown_field');
  });

  it('updates billing fields at the top level; only present fields change', async () => {
    const s = await signup(t);
    const res = await t.http.patch(`/admin/v1/workspaces/${s.workspaceId}`).set(operator).send({ subscription_status: 'past_due', credit_balance_cents: 0 });
    assert.equal(res.status, 200);
    assert.equal(res.body.subscription_status, 'past_due');
    assert.equal(res.body.credit_balance_cents, 0);
    assert.equal(res.body.concurrent_session_limit, 5);
    const read = await t.http.get(`/admin/v1/workspaces/${s.workspaceId}`).set(operator);
    assert.deepEqual(read.body, res.body);
  });

  it('refuses invalid updates with 422 and changes nothing', async () => {
    const s = await signup(t);
    const before = (await t.http.get(`/admin/v1/workspaces/${s.workspaceId}`).set(operator)).body;
    for (const [body, param] of [
      [{ subscription_status: 'cancelled' }, 'subscription_status'],
      [{ concurrent_session_limit: -1 }, 'concurrent_session_limit'],
      [{ credit_balance_cents: '100' }, 'credit_balance_cents'],
      [{ owner: 'x' }, 'owner'],
    ] as const) {
      const res = await t.http.patch(`/admin/v1/workspaces/${s.workspaceId}`).set(operator).send(body);
      assert.equal(res.status, 422, JSON.stringify(body));
      assert.equal(res.body.error.param, param);
    }
    const empty = await t.http.patch(`/admin/v1/workspaces/${s.workspaceId}`).set(operator).send({});
    assert.equal(empty.status, 422);
    assert.deepEqual((await t.http.get(`/admin/v1/workspaces/${s.workspaceId}`).set(operator)).body, before);
  });

  it('answers 404 for an unknown workspace', async () => {
    const res = await t.http.get('/admin/v1/workspaces/ws_01JD5Z7Q8Y1C2B3A4N5M6K7P8R').set(operator);
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'workspace_not_found');
  });

  it('refuses a missing or wrong operator token, API keys and dashboard sessions with 401', async () => {
    const tn = await tenant(t);
    for (const headers of [
      {},
      { Authorization: 'Bearer wrong-token-wrong-token' },
      { Authorization: `Bearer ${tn.apiKey}` },
      { Authorization: `Bearer ${tn.sessionToken}` },
    ]) {
      const res = await t.http.get('/admin/v1/workspaces').set(headers);
      assert.equal(res.status, 401);
      assert.equal(res.body.error.code, 'unauthorized');
    }
  });
});

describe('operator API without ADMIN_TOKEN', () => {
  it('does not exist: 404 whatever the token', async () => {
    const off = await startTestService({ ADMIN_TOKEN: '' });
    try {
      for (const headers of [{}, operator]) {
        const res = await off.http.get('/admin/v1/workspaces').set(headers);
        assert.equal(res.status, 404);
        assert.equal(res.body.error.code, 'route_not_found');
      }
    } finally {
      await off.close();
    }
  });
});
