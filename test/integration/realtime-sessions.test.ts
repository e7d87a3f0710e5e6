/**
 * POST /api/v1/realtime/sessions: the session-creation error table, the spec's check order, the token
 * and ws_url, and the per-workspace rate limit (counting only requests that passed every other check).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, createAgent, setWorkspace, tokenCount } from '../helpers/realtime.js';
import { sha256Hex } from '../../src/lib/tokens.js';
import type { Clock } from '../../src/lib/clock.js';

let t: TestService;
before(async () => {
  t = await startTestService();
});
after(() => t.close());

const create = (key: string | null, body: unknown) => {
  const req = t.http.post('/api/v1/realtime/sessions');
  if (key) req.set(bearer(key));
  return req.send(body as object);
};

async function expectError(res: { status: number; body: { error?: { code: string; param?: string | null } } }, status: number, code?: string, param?: string) {
  assert.equal(res.status, status, JSON.stringify(res.body));
  if (code) assert.equal(res.body.error?.code, code);
  if (param !== undefined) assert.equal(res.body.error?.param, param);
}

describe('creating a realtime session', () => {
  let a: Tenant;
  let agentId: string;
  before(async () => {
    a = await tenant(t);
    agentId = await createAgent(t, a);
  });

  it('returns a single-use token and a ws_url built from PUBLIC_BASE_URL; only the hash is stored', async () => {
    const res = await create(a.apiKey, { agent_id: agentId, user_id: 'visitor-42', source: 'voice' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.match(res.body.session_token, /^rts_[A-Za-z0-9_-]{43}$/);
    const base = t.service.url.replace(/^http/, 'ws');
    assert.equal(res.body.ws_url, `${base}/ws/visitor-42?token=${res.body.session_token}`);
    const rows = await t.service.db.knex('realtime_tokens').where({ workspace_id: a.workspaceId });
    assert.ok(rows.some((r) => r.token_hash === sha256Hex(res.body.session_token)));
    assert.ok(!JSON.stringify(rows).includes(res.body.session_token));
    assert.ok(!t.logs.join('').includes(res.body.session_token), 'the token is never logged');
    const row = rows.find((r) => r.token_hash === sha256Hex(res.body.session_token));
    assert.deepEqual([row.agent_id, row.user_id, row.source, row.used_at], [agentId, 'visitor-42', 'voice', null]);
    assert.equal(row.expires_at.getTime() - row.created_at.getTime(), 60_000);
  });

  it('accepts every source', async () => {
    for (const source of ['voice', 'camera', 'screen', 'text']) {
      const res = await create(a.apiKey, { agent_id: agentId, user_id: 'u1', source });
      assert.equal(res.status, 201, `${source}: ${JSON.stringify(res.body)}`);
    }
  });
});

describe('session-creation errors, each in the spec order, and nothing stored', () => {
  let a: Tenant;
  let b: Tenant;
  let agentId: string;
  let camOff: string;
  let screenOff: string;
  let otherAgent: string;
  before(async () => {
    a = await tenant(t);
    b = await tenant(t);
    agentId = await createAgent(t, a);
    camOff = await createAgent(t, a, { realtime: { enable_webcam: false } });
    screenOff = await createAgent(t, a, { realtime: { enable_screen_share: false } });
    otherAgent = await createAgent(t, b);
  });

  async function unchanged(fn: () => Promise<void>) {
    const before = await tokenCount(t, a.workspaceId);
    await fn();
    assert.equal(await tokenCount(t, a.workspaceId), before, 'a refused request stores nothing');
  }

  it('401 unauthorized: no key, a wrong key, an unknown dashboard token; first, whatever the body', async () => {
    await unchanged(async () => {
      await expectError(await create(null, { agent_id: agentId, user_id: 'u', source: 'voice' }), 401, 'unauthorized');
      await expectError(await create('ek_wrongwrongwrongwrongwrongwrongwrongwrong', { bogus: 1 }), 401, 'unauthorized');
      await expectError(await create(`ds_${'x'.repeat(43)}`, { agent_id: agentId, user_id: 'u', source: 'voice' }), 401, 'unauthorized');
      const bad = await t.http.post('/api/v1/realtime/sessions').set('Content-Type', 'application/json').send('{not json');
      await expectError(bad, 401, 'unauthorized');
    });
  });

  it('402 when the subscription is past_due or unpaid, before the source, agent and body checks', async () => {
    const c = await tenant(t);
    const cam = await createAgent(t, c, { realtime: { enable_webcam: false } });
    for (const status of ['past_due', 'unpaid']) {
      await setWorkspace(t, c.workspaceId, { subscription_status: status });
      for (const body of [
        { agent_id: cam, user_id: 'u', source: 'voice' },
        { agent_id: cam, user_id: 'u', source: 'camera', extra: 1 },
        { agent_id: 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9K', user_id: 'u', source: 'voice' },
        { nonsense: true },
      ]) {
        await expectError(await create(c.apiKey, body), 402, 'subscription_inactive');
      }
      const bad = await t.http.post('/api/v1/realtime/sessions').set(bearer(c.apiKey)).set('Content-Type', 'application/json').send('{not json');
      await expectError(bad, 402, 'subscription_inactive');
    }
    assert.equal(await tokenCount(t, c.workspaceId), 0);
    await setWorkspace(t, c.workspaceId, { subscription_status: 'active' });
    assert.equal((await create(c.apiKey, { agent_id: cam, user_id: 'u', source: 'voice' })).status, 201);
  });

  it('403 webcam_disabled / screen_share_disabled, before body validation (unknown field -> still 403)', async () => {
    await unchanged(async () => {
      await expectError(await create(a.apiKey, { agent_id: camOff, user_id: 'u', source: 'camera' }), 403, 'webcam_disabled', 'source');
      await expectError(await create(a.apiKey, { agent_id: camOff, user_id: 'u', source: 'camera', unknown_field: 1 }), 403, 'webcam_disabled');
      await expectError(await create(a.apiKey, { agent_id: camOff, user_id: 'not a valid id!', source: 'camera' }), 403, 'webcam_disabled');
      await expectError(await create(a.apiKey, { agent_id: screenOff, user_id: 'u', source: 'screen' }), 403, 'screen_share_disabled', 'source');
      await expectError(await create(a.apiKey, { agent_id: screenOff, user_id: 'u', source: 'screen', colour: 'red' }), 403, 'screen_share_disabled');
    });
    // The other sources of those agents are fine.
    assert.equal((await create(a.apiKey, { agent_id: camOff, user_id: 'u', source: 'screen' })).status, 201);
    assert.equal((await create(a.apiKey, { agent_id: screenOff, user_id: 'u', source: 'camera' })).status, 201);
  });

  it('404 agent_not_found and 403 for another workspace agent, before body validation', async () => {
    await unchanged(async () => {
      await expectError(
        await create(a.apiKey, { agent_id: 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9K', user_id: 'u', source: 'voice' }),
        404,
        'agent_not_found',
        'agent_id',
      );
      await expectError(
        await create(a.apiKey, { agent_id: 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9K', user_id: 'u', source: 'voice', unknown_field: 1 }),
        404,
        'agent_not_found',
      );
      await expectError(await create(a.apiKey, { agent_id: 'nonsense', user_id: 'u', source: 'camera', unknown_field: 1 }), 404, 'agent_not_found');
      // Found by the contract fuzzing: an id holding NUL reached the database (a 500).
      await expectError(await create(a.apiKey, { agent_id: 'agt_\u0000x', user_id: 'u', source: 'voice' }), 404, 'agent_not_found');
      await expectError(await create(a.apiKey, { agent_id: otherAgent, user_id: 'u', source: 'voice' }), 403, 'forbidden', 'agent_id');
      await expectError(await create(a.apiKey, { agent_id: otherAgent, user_id: 'u', source: 'camera', unknown_field: 1 }), 403, 'forbidden');
    });
  });

  it('422 for an invalid body: unknown fields, missing fields, bad source, bad user_id, wrong types', async () => {
    await unchanged(async () => {
      await expectError(await create(a.apiKey, { agent_id: agentId, user_id: 'u', source: 'voice', unknown_field: 1 }), 422, 'unknown_field', 'unknown_field');
      await expectError(await create(a.apiKey, { agent_id: agentId, source: 'voice' }), 422, 'missing_field', 'user_id');
      await expectError(await create(a.apiKey, { agent_id: agentId, user_id: 'u' }), 422, 'missing_field', 'source');
      await expectError(await create(a.apiKey, { user_id: 'u', source: 'voice' }), 422, 'missing_field', 'agent_id');
      await expectError(await create(a.apiKey, { agent_id: agentId, user_id: 'u', source: 'video' }), 422, 'invalid_value', 'source');
      await expectError(await create(a.apiKey, { agent_id: agentId, user_id: 'has\ttab', source: 'voice' }), 422, 'invalid_value', 'user_id');
      await expectError(await create(a.apiKey, { agent_id: agentId, user_id: 'x'.repeat(129), source: 'voice' }), 422, 'invalid_value', 'user_id');
      // Only dots: `/ws/..` would collapse to `/` in the ws_url.
      for (const dots of ['.', '..', '...'])
        await expectError(await create(a.apiKey, { agent_id: agentId, user_id: dots, source: 'voice' }), 422, 'invalid_value', 'user_id');
      await expectError(await create(a.apiKey, { agent_id: 42, user_id: 'u', source: 'voice' }), 422, 'invalid_type', 'agent_id');
      await expectError(await create(a.apiKey, [1, 2]), 422);
      await expectError(await create(a.apiKey, {}), 422, 'missing_field');
    });
  });

  it('user_ids with dots among other characters are accepted, and their ws_url keeps the segment', async () => {
    for (const userId of ['.a', 'a..b', '..x', 'v.1~_-']) {
      const res = await create(a.apiKey, { agent_id: agentId, user_id: userId, source: 'voice' });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(new URL(res.body.ws_url).pathname, `/ws/${userId}`);
    }
  });

  it('an unreadable body is refused at step 5: 422 invalid_json, 415, 413 — after 401 and 402', async () => {
    await unchanged(async () => {
      const bad = await t.http.post('/api/v1/realtime/sessions').set(bearer(a.apiKey)).set('Content-Type', 'application/json').send('{"agent_id": ');
      await expectError(bad, 422, 'invalid_json');
      const form = await t.http.post('/api/v1/realtime/sessions').set(bearer(a.apiKey)).set('Content-Type', 'text/plain').send('agent_id=x');
      await expectError(form, 415, 'unsupported_media_type');
      const huge = await t.http
        .post('/api/v1/realtime/sessions')
        .set(bearer(a.apiKey))
        .set('Content-Type', 'application/json')
        .send(JSON.stringify({ agent_id: agentId, user_id: 'u', source: 'voice', pad: 'x'.repeat(1024 * 1024 + 10) }));
      await expectError(huge, 413, 'payload_too_large');
    });
  });
});

describe('the session-creation rate limit', () => {
  it('at the real value: 60 per hour; the 61st gets 429 with Retry-After; refused requests do not count', async () => {
    const a = await tenant(t);
    const agentId = await createAgent(t, a);
    const camOff = await createAgent(t, a, { realtime: { enable_webcam: false } });
    for (let i = 0; i < 59; i++) assert.equal((await create(a.apiKey, { agent_id: agentId, user_id: `u${i}`, source: 'text' })).status, 201);
    // Requests refused by an earlier check use up nothing.
    await expectError(await create(a.apiKey, { agent_id: camOff, user_id: 'u', source: 'camera' }), 403, 'webcam_disabled');
    await expectError(await create(a.apiKey, { agent_id: 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9K', user_id: 'u', source: 'voice' }), 404);
    await expectError(await create(a.apiKey, { agent_id: agentId, user_id: 'u', source: 'voice', extra: 1 }), 422);
    assert.equal((await create(a.apiKey, { agent_id: agentId, user_id: 'u60', source: 'voice' })).status, 201);
    const refused = await create(a.apiKey, { agent_id: agentId, user_id: 'u61', source: 'voice' });
    await expectError(refused, 429, 'rate_limited');
    const retry = Number(refused.headers['retry-after']);
    assert.ok(retry > 3500 && retry <= 3600, `Retry-After ${refused.headers['retry-after']}`);
    assert.equal(await tokenCount(t, a.workspaceId), 60, 'the 429 stored nothing');
    // Checks before the rate limit still win over it.
    await expectError(await create(a.apiKey, { agent_id: agentId, user_id: 'u', source: 'voice', extra: 1 }), 422);
    await setWorkspace(t, a.workspaceId, { subscription_status: 'past_due' });
    await expectError(await create(a.apiKey, { agent_id: agentId, user_id: 'u', source: 'voice' }), 402);
    // Another workspace is not affected.
    const b = await tenant(t);
    assert.equal((await create(b.apiKey, { agent_id: await createAgent(t, b), user_id: 'u', source: 'voice' })).status, 201);
  });
});

describe('rate limit windows from configuration, shared by two instances on one database', () => {
  let t1: TestService;
  let t2: TestService;
  // Both instances read one clock that the test moves.
  let now = Date.now();
  const clock: Clock = { now: () => new Date(now) };
  before(async () => {
    const env = { REALTIME_SESSIONS_PER_HOUR: '3', REALTIME_HOUR_WINDOW_MS: '60000', REALTIME_SESSIONS_PER_DAY: '5', REALTIME_DAY_WINDOW_MS: '240000' };
    t1 = await startTestService(env, { clock });
    t2 = await startTestService({ ...env, DATABASE_URL: t1.service.db.url }, { clock });
  });
  after(async () => {
    await t2.close();
    await t1.close();
  });

  it('counts creations on both instances together; the windows slide; Retry-After says when the next one fits', async () => {
    const a = await tenant(t1);
    const agentId = await createAgent(t1, a);
    const on = (s: TestService) => s.http.post('/api/v1/realtime/sessions').set(bearer(a.apiKey)).send({ agent_id: agentId, user_id: 'u', source: 'voice' });
    const start = now;
    for (const s of [t1, t2, t1]) {
      assert.equal((await on(s)).status, 201);
      now += 1000;
    }
    // 3 in the "hour" (60 s here): full on both instances until the first leaves the window.
    const full = await on(t2);
    assert.equal(full.status, 429, JSON.stringify(full.body));
    assert.equal(full.headers['retry-after'], String(Math.ceil((start + 60_000 - now) / 1000)));
    assert.equal((await on(t1)).status, 429);
    now = start + 60_001;
    assert.equal((await on(t2)).status, 201);
    now += 1000;
    assert.equal((await on(t1)).status, 201);
    now += 1000;
    // 5 in the "day" (240 s here): refused until the first creation is 240 s old.
    const dayFull = await on(t2);
    assert.equal(dayFull.status, 429);
    assert.equal(dayFull.headers['retry-after'], String(Math.ceil((start + 240_000 - now) / 1000)));
    assert.equal(await tokenCount(t1, a.workspaceId), 5);
    now = start + 240_001;
    assert.equal((await on(t1)).status, 201);
  });
});

describe('the daily limit at its real value', () => {
  let td: TestService;
  let now = Date.now();
  const clock: Clock = { now: () => new Date(now) };
  before(async () => {
    td = await startTestService({}, { clock });
  });
  after(() => td.close());

  it('500 per day: spread over hours (60 per hour each), the 501st within 24 h gets 429 until the first is a day old', async () => {
    const a = await tenant(td);
    const agentId = await createAgent(td, a);
    const start = now;
    const create1 = () => td.http.post('/api/v1/realtime/sessions').set(bearer(a.apiKey)).send({ agent_id: agentId, user_id: 'u', source: 'text' });
    for (let i = 0; i < 500; i++) {
      if (i > 0 && i % 60 === 0) now += 61 * 60 * 1000;
      const res = await create1();
      assert.equal(res.status, 201, `#${i + 1}: ${JSON.stringify(res.body)}`);
      now += 10;
    }
    now += 61 * 60 * 1000; // the hourly window is empty again
    const refused = await create1();
    assert.equal(refused.status, 429);
    assert.equal(refused.headers['retry-after'], String(Math.ceil((start + 24 * 3600 * 1000 - now) / 1000)));
    assert.equal(await tokenCount(td, a.workspaceId), 500);
    now = start + 24 * 3600 * 1000 + 1;
    assert.equal((await create1()).status, 201);
  });
});
