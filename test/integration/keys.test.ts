import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { signup, tenant, uniqueEmail } from '../helpers/fixtures.js';

let t: TestService;
before(async () => {
  t = await startTestService({ KEY_LAST_USED_RESOLUTION_MS: '0' });
});
after(() => t.close());

const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

async function keyRows(workspaceId: string) {
  return t.service.db.knex('api_keys').where({ workspace_id: workspaceId }).orderBy('id');
}

/** A developer API call that every key can make (auth is checked before anything else). */
async function developerCall(key: string) {
  return t.http.get('/api/v1/agents').set(bearer(key));
}

describe('API keys', () => {
  it('creates a key shown once, stored only as a hash, listed afterwards without its value', async () => {
    const s = await signup(t);
    const res = await t.http.post('/api/v1/keys').set(bearer(s.sessionToken)).send({ name: 'Production' });
    assert.equal(res.status, 201);
    assert.match(res.body.key, /^ek_[A-Za-z0-9]{40}$/);
    assert.equal(res.body.key_prefix, res.body.key.slice(0, res.body.key_prefix.length));
    assert.ok(res.body.key_prefix.startsWith('ek_'));
    assert.equal(res.body.revoked, false);
    assert.equal(res.body.last_used_at, null);
    assert.equal(res.body.name, 'Production');

    const [row] = await keyRows(s.workspaceId);
    assert.notEqual(row.key_hash, res.body.key);
    assert.ok(!JSON.stringify(row).includes(res.body.key), 'the full key is not stored');

    const list = await t.http.get('/api/v1/keys').set(bearer(s.sessionToken));
    assert.equal(list.status, 200);
    assert.ok(Array.isArray(list.body));
    assert.equal(list.body.length, 1);
    assert.equal(list.body[0].id, res.body.id);
    assert.equal(list.body[0].key, undefined);
    assert.ok(!JSON.stringify(list.body).includes(res.body.key));
  });

  it('keeps last_used_at null until first use, then sets it', async () => {
    const tn = await tenant(t);
    let list = await t.http.get('/api/v1/keys').set(bearer(tn.sessionToken));
    assert.equal(list.body[0].last_used_at, null);
    assert.notEqual((await developerCall(tn.apiKey)).status, 401);
    for (let i = 0; i < 50; i++) {
      list = await t.http.get('/api/v1/keys').set(bearer(tn.sessionToken));
      if (list.body[0].last_used_at) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(Date.parse(list.body[0].last_used_at) > Date.now() - 60_000);
  });

  it('revokes a key: listed as revoked, refused with 401 on its next request', async () => {
    const tn = await tenant(t);
    assert.notEqual((await developerCall(tn.apiKey)).status, 401);
    const res = await t.http.delete(`/api/v1/keys/${tn.keyId}`).set(bearer(tn.sessionToken));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'revoked', id: tn.keyId });
    const refused = await developerCall(tn.apiKey);
    assert.equal(refused.status, 401);
    assert.equal(refused.body.error.code, 'unauthorized');
    const list = await t.http.get('/api/v1/keys').set(bearer(tn.sessionToken));
    assert.equal(list.body[0].revoked, true);
    const again = await t.http.delete(`/api/v1/keys/${tn.keyId}`).set(bearer(tn.sessionToken));
    assert.equal(again.status, 200, 'revoking twice is harmless');
  });

  it('refuses API keys, missing and unknown tokens on key routes with 401', async () => {
    const tn = await tenant(t);
    const before = await keyRows(tn.workspaceId);
    for (const headers of [bearer(tn.apiKey), bearer('ds_unknown'), {}, { Authorization: 'Basic abc' }]) {
      for (const res of [
        await t.http.get('/api/v1/keys').set(headers),
        await t.http.post('/api/v1/keys').set(headers).send({ name: 'x' }),
        await t.http.delete(`/api/v1/keys/${tn.keyId}`).set(headers),
      ]) {
        assert.equal(res.status, 401, JSON.stringify(res.body));
        assert.equal(res.body.error.code, 'unauthorized');
        assert.equal(res.body.error.type, 'authentication_error');
      }
    }
    assert.deepEqual(await keyRows(tn.workspaceId), before);
  });

  it('refuses missing and unknown keys on developer routes with 401', async () => {
    for (const headers of [bearer('ek_' + 'a'.repeat(40)), {}, bearer('garbage'), bearer('ds_' + 'a'.repeat(40))]) {
      const res = await t.http.get('/api/v1/agents').set(headers);
      assert.equal(res.status, 401);
      assert.equal(res.body.error.code, 'unauthorized');
    }
  });

  it('uses the list-shaped 422 body on key routes and changes nothing', async () => {
    const s = await signup(t);
    const unknown = await t.http
      .post('/api/v1/keys')
      .set(bearer(s.sessionToken))
      .send({ name: 'x', scopes: ['read'] });
    assert.equal(unknown.status, 422);
    assert.deepEqual(unknown.body.detail[0].loc, ['body', 'scopes']);
    assert.equal(unknown.body.detail[0].type, 'extra_forbidden');
    assert.equal(unknown.body.error.param, 'scopes');
    const missing = await t.http.post('/api/v1/keys').set(bearer(s.sessionToken)).send({});
    assert.equal(missing.status, 422);
    assert.deepEqual(missing.body.detail[0].loc, ['body', 'name']);
    assert.equal(missing.body.detail[0].type, 'missing');
    const wrongType = await t.http.post('/api/v1/keys').set(bearer(s.sessionToken)).send({ name: 42 });
    assert.equal(wrongType.status, 422);
    assert.equal(wrongType.body.detail[0].type, 'string_type');
    const badId = await t.http.delete('/api/v1/keys/not-a-key-id').set(bearer(s.sessionToken));
    assert.equal(badId.status, 422);
    assert.deepEqual(badId.body.detail[0].loc, ['path', 'key_id']);
    assert.equal((await keyRows(s.workspaceId)).length, 0);
  });

  it("answers 403 for another workspace's key and 404 for none, revoking nothing", async () => {
    const a = await tenant(t, 'A');
    const b = await tenant(t, 'B');
    const res = await t.http.delete(`/api/v1/keys/${b.keyId}`).set(bearer(a.sessionToken));
    assert.equal(res.status, 403);
    assert.equal(res.body.error.type, 'permission_error');
    assert.notEqual((await developerCall(b.apiKey)).status, 401);
    const none = await t.http.delete('/api/v1/keys/key_01JD5Z7Q8Y1C2B3A4N5M6K7P8R').set(bearer(a.sessionToken));
    assert.equal(none.status, 404);
    const listA = await t.http.get('/api/v1/keys').set(bearer(a.sessionToken));
    assert.deepEqual(
      listA.body.map((k: { id: string }) => k.id),
      [a.keyId],
      'a workspace sees only its own keys',
    );
  });

  it('lets developers and above create keys, not viewers', async () => {
    const owner = await signup(t);
    const make = async (role: string) => {
      const email = uniqueEmail(role);
      const created = await t.http.post('/api/v1/members').set(bearer(owner.sessionToken)).send({ email, password: 'long-enough-pw', role });
      assert.equal(created.status, 201);
      const login = await t.http.post('/api/v1/auth/login').send({ email, password: 'long-enough-pw' });
      return login.body.session_token as string;
    };
    const viewer = await make('viewer');
    const developer = await make('developer');
    const refused = await t.http.post('/api/v1/keys').set(bearer(viewer)).send({ name: 'nope' });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.code, 'insufficient_role');
    assert.equal((await keyRows(owner.workspaceId)).length, 0);
    const ok = await t.http.post('/api/v1/keys').set(bearer(developer)).send({ name: 'dev key' });
    assert.equal(ok.status, 201);
    const viewerList = await t.http.get('/api/v1/keys').set(bearer(viewer));
    assert.equal(viewerList.status, 200, 'viewers may read the list');
    const viewerRevoke = await t.http.delete(`/api/v1/keys/${ok.body.id}`).set(bearer(viewer));
    assert.equal(viewerRevoke.status, 403);
  });
});
