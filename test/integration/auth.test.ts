import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { signup, uniqueEmail } from '../helpers/fixtures.js';

let t: TestService;
before(async () => {
  t = await startTestService();
});
after(() => t.close());

async function userCount(): Promise<number> {
  const [{ count }] = await t.service.db.knex('users').count({ count: '*' });
  return Number(count);
}

describe('signup', () => {
  it('creates the workspace, its owner and a session', async () => {
    const email = uniqueEmail();
    const res = await t.http.post('/api/v1/auth/signup').send({ email, password: 'long-enough-pw', workspace_name: 'Acme' });
    assert.equal(res.status, 201);
    assert.equal(res.body.user.email, email);
    assert.equal(res.body.user.role, 'owner');
    assert.match(res.body.user.id, /^usr_/);
    assert.match(res.body.workspace.id, /^ws_/);
    assert.equal(res.body.workspace.name, 'Acme');
    assert.match(res.body.session_token, /^ds_/);
    assert.ok(Date.parse(res.body.expires_at) > Date.now());
    const stored = await t.service.db.knex('users').where({ id: res.body.user.id }).first();
    assert.match(stored.password_hash, /^scrypt\$/);
    assert.ok(!stored.password_hash.includes('long-enough-pw'));
    const session = await t.service.db.knex('dashboard_sessions').where({ user_id: res.body.user.id }).first();
    assert.notEqual(session.token_hash, res.body.session_token);
  });

  it('refuses a taken email with 409, whatever its case, and creates nothing', async () => {
    const s = await signup(t);
    const before = await userCount();
    const res = await t.http.post('/api/v1/auth/signup').send({ email: s.email.toUpperCase(), password: 'long-enough-pw', workspace_name: 'Other' });
    assert.equal(res.status, 409);
    assert.equal(res.body.error.code, 'email_taken');
    assert.equal(res.body.error.param, 'email');
    assert.equal(await userCount(), before);
  });

  const bad: Array<[string, unknown, number, string, string | null]> = [
    ['unknown field', { email: uniqueEmail(), password: 'long-enough-pw', workspace_name: 'A', plan: 'enterprise' }, 422, 'unknown_field', 'plan'],
    ['missing field', { email: uniqueEmail(), password: 'long-enough-pw' }, 422, 'missing_field', 'workspace_name'],
    ['wrong type', { email: uniqueEmail(), password: 12345678, workspace_name: 'A' }, 422, 'invalid_type', 'password'],
    ['short password', { email: uniqueEmail(), password: 'short', workspace_name: 'A' }, 422, 'invalid_value', 'password'],
    ['bad email', { email: 'not-an-email', password: 'long-enough-pw', workspace_name: 'A' }, 422, 'invalid_value', 'email'],
    ['array body', [1, 2], 422, 'invalid_type', null],
  ];
  for (const [name, body, status, code, param] of bad) {
    it(`refuses ${name} with ${status} ${code} and creates nothing`, async () => {
      const before = await userCount();
      const res = await t.http.post('/api/v1/auth/signup').send(body as object);
      assert.equal(res.status, status, JSON.stringify(res.body));
      assert.equal(res.body.error.code, code);
      assert.equal(res.body.error.param, param);
      assert.equal(res.body.error.type, 'invalid_request_error');
      assert.equal(res.body.error.request_id, res.headers['x-request-id']);
      assert.ok(!JSON.stringify(res.body).includes('12345678'), 'a password is never echoed');
      assert.equal(await userCount(), before);
    });
  }

  it('refuses malformed JSON with 422 invalid_json', async () => {
    const before = await userCount();
    const res = await t.http.post('/api/v1/auth/signup').set('Content-Type', 'application/json').send('{"email": "a@b.c",');
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'invalid_json');
    assert.equal(await userCount(), before);
  });

  it('refuses a body over the limit with 413', async () => {
    const before = await userCount();
    const res = await t.http.post('/api/v1/auth/signup').send({ email: uniqueEmail(), password: 'x'.repeat(2 * 1024 * 1024), workspace_name: 'A' });
    assert.equal(res.status, 413);
    assert.equal(res.body.error.code, 'payload_too_large');
    assert.equal(await userCount(), before);
  });

  it('refuses a form-encoded body with 415', async () => {
    const res = await t.http.post('/api/v1/auth/signup').type('form').send({ email: uniqueEmail(), password: 'long-enough-pw', workspace_name: 'A' });
    assert.equal(res.status, 415);
    assert.equal(res.body.error.code, 'unsupported_media_type');
  });
});

describe('login and logout', () => {
  it('logs in with the right password and answers the same 401 for a wrong email or password', async () => {
    const s = await signup(t);
    const ok = await t.http.post('/api/v1/auth/login').send({ email: s.email, password: s.password });
    assert.equal(ok.status, 200);
    assert.match(ok.body.session_token, /^ds_/);
    assert.equal(ok.body.user.id, s.userId);
    assert.equal(ok.body.workspace.id, s.workspaceId);

    const wrongPassword = await t.http.post('/api/v1/auth/login').send({ email: s.email, password: 'not-the-password' });
    const wrongEmail = await t.http.post('/api/v1/auth/login').send({ email: uniqueEmail(), password: s.password });
    for (const res of [wrongPassword, wrongEmail]) {
      assert.equal(res.status, 401);
      assert.equal(res.body.error.code, 'invalid_credentials');
    }
    assert.equal(wrongPassword.body.error.message, wrongEmail.body.error.message);
  });

  it('logout revokes the session', async () => {
    const s = await signup(t);
    const me = await t.http.get('/api/v1/auth/session').auth(s.sessionToken, { type: 'bearer' });
    assert.equal(me.status, 200);
    assert.equal(me.body.user.id, s.userId);
    const out = await t.http.post('/api/v1/auth/logout').auth(s.sessionToken, { type: 'bearer' });
    assert.equal(out.status, 204);
    const again = await t.http.get('/api/v1/auth/session').auth(s.sessionToken, { type: 'bearer' });
    assert.equal(again.status, 401);
    assert.equal(again.body.error.code, 'unauthorized');
  });

  it('expires sessions after SESSION_TTL_MS (12 hours, on the service clock)', async () => {
    let now = Date.now();
    const clocked = await startTestService({}, { clock: { now: () => new Date(now) } });
    try {
      const s = await signup(clocked);
      const session = () => clocked.http.get('/api/v1/auth/session').auth(s.sessionToken, { type: 'bearer' });
      const first = await session();
      assert.equal(first.status, 200);
      assert.equal(Date.parse(first.body.expires_at), now + 12 * 60 * 60 * 1000);
      now += 12 * 60 * 60 * 1000 - 1;
      assert.equal((await session()).status, 200, 'valid until the last millisecond');
      now += 1;
      const res = await session();
      assert.equal(res.status, 401);
      assert.equal(res.body.error.code, 'unauthorized');
    } finally {
      await clocked.close();
    }
  });
});

describe('sign-up and login rate limit', () => {
  it('answers 429 with Retry-After past AUTH_RATE_LIMIT_PER_MINUTE attempts from one address, creating nothing', async () => {
    const limited = await startTestService({ AUTH_RATE_LIMIT_PER_MINUTE: '3' });
    try {
      const s = await signup(limited);
      for (let i = 0; i < 2; i++)
        assert.equal((await limited.http.post('/api/v1/auth/login').send({ email: s.email, password: 'wrong-password' })).status, 401);
      const [{ count: before }] = await limited.service.db.knex('users').count({ count: '*' });
      const refused = await limited.http.post('/api/v1/auth/signup').send({ email: uniqueEmail(), password: 'long-enough-pw', workspace_name: 'X' });
      assert.equal(refused.status, 429);
      assert.equal(refused.body.error.code, 'rate_limited');
      assert.ok(Number(refused.headers['retry-after']) >= 1 && Number(refused.headers['retry-after']) <= 60);
      const [{ count: after }] = await limited.service.db.knex('users').count({ count: '*' });
      assert.equal(after, before);
      assert.equal((await limited.http.post('/api/v1/auth/login').send({ email: s.email, password: s.password })).status, 429, 'even the right password waits');
    } finally {
      await limited.close();
    }
  });
});
