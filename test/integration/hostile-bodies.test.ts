/**
 * Hostile request bodies: a JSON body with a prototype key (`__proto__`) is refused with 400 in the
 * envelope, on unauthenticated routes too, and no log line carries the body (the parser's error holds
 * the raw body, password included); the logger drops any body an error carries.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { startTestService, type TestService } from '../helpers/service.js';
import { createLogger } from '../../src/log.js';

let t: TestService;

before(async () => {
  t = await startTestService();
});

after(async () => {
  await t.close();
});

describe('prototype keys in JSON bodies', () => {
  it('are 422 invalid_json on sign-up and login, and the password is never logged', async () => {
    for (const path of ['/api/v1/auth/login', '/api/v1/auth/signup']) {
      const res = await t.http
        .post(path)
        .set('Content-Type', 'application/json')
        .send('{"email":"mallory@example.com","password":"hunter2-very-secret","workspace_name":"x","__proto__":{"admin":true}}');
      assert.equal(res.status, 422, `${path}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'invalid_json');
      assert.match(res.body.error.message, /__proto__/);
    }
    const ctor = await t.http
      .post('/api/v1/auth/login')
      .set('Content-Type', 'application/json')
      .send('{"email":"a@b.c","password":"hunter2-very-secret","constructor":{"prototype":{"x":1}}}');
    assert.equal(ctor.status, 422, 'an ordinary unknown field');
    assert.equal(ctor.body.error.code, 'unknown_field');
    assert.ok(!t.logs.some((l) => l.includes('hunter2-very-secret')), 'no log line holds the body');
  });

  it('the logger drops the body an error carries', () => {
    const lines: string[] = [];
    const log = createLogger('info', new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
    const err = Object.assign(new SyntaxError('bad'), { body: '{"password":"hunter2"}', raw: 'hunter2', status: 400 });
    log.error({ err }, 'failed');
    assert.equal(lines.length, 1);
    assert.ok(!lines[0].includes('hunter2'), lines[0]);
    assert.equal(JSON.parse(lines[0]).err.status, 400, 'the rest of the error is kept');
  });
});
