import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_TOKEN, startTestService, type TestService } from '../helpers/service.js';
import { tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';

let t: TestService;
before(async () => {
  t = await startTestService({ CORS_ORIGINS: 'http://localhost:3000,https://app.example.com' });
});
after(() => t.close());

describe('request ids', () => {
  it("echoes a client's valid X-Request-Id, in the header and in error envelopes", async () => {
    const res = await t.http.get('/api/v1/keys').set('X-Request-Id', 'client-abc_123.~');
    assert.equal(res.status, 401);
    assert.equal(res.headers['x-request-id'], 'client-abc_123.~');
    assert.equal(res.body.error.request_id, 'client-abc_123.~');
  });

  it('mints one when the given id is too long or not URL-safe', async () => {
    for (const given of ['x'.repeat(129), 'has space', 'semi;colon']) {
      const res = await t.http.get('/healthz').set('X-Request-Id', given);
      assert.notEqual(res.headers['x-request-id'], given);
      assert.match(res.headers['x-request-id'], /^req_[0-9A-Z]{26}$/);
    }
    const max = 'y'.repeat(128);
    assert.equal((await t.http.get('/healthz').set('X-Request-Id', max)).headers['x-request-id'], max);
  });
});

describe('access log', () => {
  it('writes one line per request: its id, method, path without the query, operation, status and time, never its credentials', async () => {
    const id = `access-line-${Date.now()}`;
    const res = await t.http.get('/api/v1/keys?token=query-secret-123').set('X-Request-Id', id).set('Authorization', 'Bearer ds_not-a-session-secret-456');
    assert.equal(res.status, 401);
    const lines = t.logs
      .flatMap((chunk) => chunk.split('\n'))
      .filter((l) => l.includes(id))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'request');
    assert.equal(lines.length, 1);
    const { time: _time, ms, ...line } = lines[0];
    assert.equal(typeof ms, 'number');
    assert.deepEqual(line, {
      level: 30,
      service: 'voice-agent-service',
      requestId: id,
      method: 'GET',
      path: '/api/v1/keys',
      operationId: 'listApiKeys',
      status: 401,
      msg: 'request',
    });
    assert.ok(!t.logs.some((l) => l.includes('query-secret-123') || l.includes('not-a-session-secret-456')), 'no log line holds a credential');
  });
});

describe('routing errors', () => {
  it('answers an unknown route with 404 in the envelope', async () => {
    const res = await t.http.get('/api/v1/nothing-here');
    assert.equal(res.status, 404);
    assert.equal(res.body.error.code, 'route_not_found');
    assert.equal(res.body.error.type, 'not_found_error');
    assert.equal(res.body.error.request_id, res.headers['x-request-id']);
  });

  it('takes a malformed percent-escape in a path parameter as sent: refused by its schema or not found, naming it, never a 500', async () => {
    const tn = await tenant(t);
    for (const [path, param, status] of [
      ['/api/v1/calls/%E0%A4%A', 'call_id', 422],
      ['/api/v1/agents/%ZZ', 'agent_id', 404],
    ] as const) {
      const res = await t.http.get(path).set(bearer(tn.apiKey));
      assert.equal(res.status, status, `${path}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.param, param);
    }
  });

  it('routes before it reads a body: an unknown route or a wrong method is answered as such whatever the body', async () => {
    const unreadable = await t.http.post('/api/v1/nothing-here').set('Content-Type', 'application/json').send('{"name": ');
    assert.equal(unreadable.status, 404);
    assert.equal(unreadable.body.error.code, 'route_not_found');
    const huge = await t.http
      .post('/api/v1/nothing-here')
      .set('Content-Type', 'application/json')
      .send({ name: 'x'.repeat(2 * 1024 * 1024) });
    assert.equal(huge.status, 404, 'not 413: nothing was read for a route that does not exist');
    const wrongMethod = await t.http.put('/api/v1/keys').set('Content-Type', 'application/json').send('{"name": ');
    assert.equal(wrongMethod.status, 405);
  });

  it('answers a wrong method with 405 and Allow', async () => {
    const res = await t.http.put('/api/v1/keys').send({});
    assert.equal(res.status, 405);
    assert.equal(res.body.error.code, 'method_not_allowed');
    assert.deepEqual(res.headers.allow.split(', ').sort(), ['GET', 'HEAD', 'POST']);
  });
});

describe('HEAD', () => {
  it('answers wherever GET does, with its status and headers and no body', async () => {
    const tn = await tenant(t);
    const cases: Array<[string, Record<string, string>]> = [
      ['/healthz', {}],
      ['/openapi.json', {}],
      ['/sdk/voice-agent-client.js', {}],
      ['/api/v1/agents', bearer(tn.apiKey)],
      ['/api/v1/agents', {}],
      ['/api/v1/agents/agt_0NKNWN0000000000000000000Z', bearer(tn.apiKey)],
      ['/healthz?x=1', {}],
    ];
    for (const [url, auth] of cases) {
      const get = await t.http.get(url).set(auth);
      const head = await t.http.head(url).set(auth);
      assert.equal(head.status, get.status, url);
      for (const name of ['content-type', 'content-length', 'etag', 'cache-control']) assert.equal(head.headers[name], get.headers[name], `${name} of ${url}`);
      assert.match(head.headers['x-request-id'], /^req_/);
      assert.equal(head.text ?? '', '', `${url}: no body`);
    }
  });

  it('is 405 with Allow where there is no GET', async () => {
    const res = await t.http.head('/api/v1/auth/login');
    assert.equal(res.status, 405);
    assert.deepEqual(res.headers.allow.split(', '), ['POST']);
  });
});

describe('system routes', () => {
  it('serves health, readiness and metrics', async () => {
    assert.deepEqual((await t.http.get('/healthz')).body, { status: 'ok' });
    const ready = await t.http.get('/readyz');
    assert.equal(ready.status, 200);
    assert.deepEqual(ready.body, { status: 'ok', checks: { database: 'ok' } });
    const metrics = await t.http.get('/metrics').set('Authorization', `Bearer ${ADMIN_TOKEN}`);
    assert.equal(metrics.status, 200);
    assert.match(metrics.text, /http_requests_total\{operation="getReadiness",status="200"\}/);
    assert.match(metrics.text, /process_cpu_seconds_total/);
  });

  it('serves the contract documents and an offline API reference', async () => {
    const openapi = await t.http.get('/openapi.json');
    assert.equal(openapi.body.openapi, '3.1.0');
    assert.equal(openapi.body.info.version, '1.0.0');
    const asyncapi = await t.http.get('/asyncapi.json');
    assert.equal(asyncapi.status, 200);
    assert.match(asyncapi.body.asyncapi, /^3\./);
    const docs = await t.http.get('/docs');
    assert.equal(docs.status, 200);
    assert.match(docs.headers['content-type'], /text\/html/);
    assert.match(docs.text, /Voice Agent Calling Service API/);
    assert.doesNotMatch(docs.text, /<script[^>]+src="https?:\/\//, 'no script is loaded from a CDN');
    const asyncDocs = await t.http.get('/docs/asyncapi');
    assert.equal(asyncDocs.status, 200);
    assert.match(asyncDocs.headers['content-type'], /text\/html/);
    assert.match(asyncDocs.text, /webhooks and WebSockets/);
    assert.match(asyncDocs.text, /Invalid authentication token/, 'the close codes are in the page');
    assert.doesNotMatch(asyncDocs.text, /<script[^>]+src="https?:\/\//, 'no script is loaded from a CDN');
  });
});

describe('CORS', () => {
  it('allows configured origins', async () => {
    const res = await t.http
      .options('/api/v1/keys')
      .set('Origin', 'https://app.example.com')
      .set('Access-Control-Request-Method', 'POST')
      .set('Access-Control-Request-Headers', 'authorization,content-type');
    assert.equal(res.status, 204);
    assert.equal(res.headers['access-control-allow-origin'], 'https://app.example.com');
    assert.match(res.headers['access-control-allow-headers'], /Authorization/);
    const get = await t.http.get('/healthz').set('Origin', 'http://localhost:3000');
    assert.equal(get.headers['access-control-allow-origin'], 'http://localhost:3000');
    assert.match(get.headers['access-control-expose-headers'], /X-Request-Id/);
  });

  it('gives other origins no CORS headers and refuses their preflights', async () => {
    const pre = await t.http.options('/api/v1/keys').set('Origin', 'https://evil.example').set('Access-Control-Request-Method', 'POST');
    assert.equal(pre.status, 403);
    assert.equal(pre.body.error.code, 'origin_not_allowed');
    assert.equal(pre.headers['access-control-allow-origin'], undefined);
    const get = await t.http.get('/healthz').set('Origin', 'https://evil.example');
    assert.equal(get.headers['access-control-allow-origin'], undefined);
  });
});

describe('security headers', () => {
  it('every API answer, success or error, carries X-Content-Type-Options: nosniff', async () => {
    for (const res of [
      await t.http.get('/healthz'),
      await t.http.get('/api/v1/agents'),
      await t.http.get('/api/v1/no-such-route'),
      await t.http.post('/api/v1/auth/login').set('Content-Type', 'application/json').send('{oops'),
    ]) {
      assert.equal(res.headers['x-content-type-options'], 'nosniff', String(res.status));
    }
  });

  it("the dashboard connects only to the service's own origin (no ws:/wss: to any host), and is never framed", async () => {
    const res = await t.http.get('/dashboard');
    assert.equal(res.status, 200);
    const connect = (res.headers['content-security-policy'] as string).split('; ').find((d) => d.startsWith('connect-src '));
    assert.equal(connect, `connect-src 'self' ${t.url.replace('http:', 'ws:')}`);
    assert.equal(res.headers['x-frame-options'], 'DENY');
  });

  it('the API references run only their own inline scripts (by hash), load nothing else and are never framed', async () => {
    for (const path of ['/docs', '/docs/asyncapi', '/docs/internal']) {
      const res = await t.http.get(path);
      assert.equal(res.status, 200, path);
      assert.equal(res.headers['x-frame-options'], 'DENY', path);
      const directives = new Map(
        (res.headers['content-security-policy'] as string).split('; ').map((d) => {
          const [name, ...values] = d.split(' ');
          return [name, values] as const;
        }),
      );
      assert.deepEqual(directives.get('default-src'), ["'none'"], path);
      assert.deepEqual(directives.get('frame-ancestors'), ["'none'"], path);
      const scripts = directives.get('script-src') ?? [];
      assert.ok(scripts.length > 0, `${path}: its inline scripts are allowed`);
      for (const s of scripts) assert.match(s, /^'sha256-[A-Za-z0-9+/]{43}='$/, `${path}: scripts only by hash, not ${s}`);
    }
  });
});
