import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { signup, tenant, uniqueEmail } from '../helpers/fixtures.js';

let t: TestService;
before(async () => {
  t = await startTestService();
});
after(() => t.close());

const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

describe('members', () => {
  it('owners add members who can log in; the list shows them with roles', async () => {
    const owner = await signup(t);
    const email = uniqueEmail('admin');
    const res = await t.http.post('/api/v1/members').set(bearer(owner.sessionToken)).send({ email, password: 'long-enough-pw', role: 'admin' });
    assert.equal(res.status, 201);
    assert.equal(res.body.role, 'admin');
    assert.equal(res.body.password, undefined);
    const login = await t.http.post('/api/v1/auth/login').send({ email, password: 'long-enough-pw' });
    assert.equal(login.status, 200);
    assert.equal(login.body.workspace.id, owner.workspaceId);
    const list = await t.http.get('/api/v1/members').set(bearer(login.body.session_token));
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.map((m: { role: string }) => m.role),
      ['owner', 'admin'],
    );
  });

  it('refuses developers and viewers adding members, and creates no one', async () => {
    const owner = await signup(t);
    const email = uniqueEmail('dev');
    await t.http.post('/api/v1/members').set(bearer(owner.sessionToken)).send({ email, password: 'long-enough-pw', role: 'developer' });
    const dev = (await t.http.post('/api/v1/auth/login').send({ email, password: 'long-enough-pw' })).body.session_token;
    const res = await t.http.post('/api/v1/members').set(bearer(dev)).send({ email: uniqueEmail(), password: 'long-enough-pw', role: 'admin' });
    assert.equal(res.status, 403);
    assert.equal(res.body.error.code, 'insufficient_role');
    assert.equal((await t.http.get('/api/v1/members').set(bearer(dev))).body.length, 2);
  });

  it('refuses a second owner, taken emails and API keys', async () => {
    const tn = await tenant(t);
    const owner = await t.http.post('/api/v1/members').set(bearer(tn.sessionToken)).send({ email: uniqueEmail(), password: 'long-enough-pw', role: 'owner' });
    assert.equal(owner.status, 422);
    assert.equal(owner.body.error.param, 'role');
    const taken = await t.http.post('/api/v1/members').set(bearer(tn.sessionToken)).send({ email: tn.email, password: 'long-enough-pw', role: 'viewer' });
    assert.equal(taken.status, 409);
    const withKey = await t.http.get('/api/v1/members').set(bearer(tn.apiKey));
    assert.equal(withKey.status, 401);
    assert.equal((await t.http.get('/api/v1/members').set(bearer(tn.sessionToken))).body.length, 1);
  });
});
