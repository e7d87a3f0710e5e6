/**
 * The realtime WebSocket's close-code table and its check order (4001 -> 4402 -> 4028 -> 4003 -> 4029
 * -> 1011), the token's states (issued, used, expired), the per-IP attempt limit before the upgrade,
 * and concurrency slots (released on close, reclaimed from dead peers and dead instances, shared by
 * two instances on one database). Real ws clients over real sockets, each from its own 127.x.y.z.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net, { type Socket } from 'node:net';
import { ADMIN_TOKEN, startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, connect, createAgent, expectRefusal, freshAddress, mintSession, setWorkspace, upgradeRefusal, waitFor } from '../helpers/realtime.js';
import type { Clock } from '../../src/lib/clock.js';

/** Set: the service clock stands still at this time (ms). */
let frozenAt: number | null = null;
const clock: Clock = { now: () => new Date(frozenAt ?? Date.now()) };
// Short enough to run the reclaim rules in a second or two, long enough that a live session's pong or
// lease renewal delayed by a loaded machine (CI's two shared cores) does not end it or free its slot.
const FAST = {
  REALTIME_PING_INTERVAL_MS: '400',
  REALTIME_LEASE_HEARTBEAT_MS: '250',
  REALTIME_LEASE_EXPIRY_MS: '2500',
  REALTIME_PLAN_MINUTES: 'trial=600,starter=0',
  VOICE_RETRY_MAX: '1',
  VOICE_RETRY_BASE_MS: '20',
  VOICE_CONNECT_TIMEOUT_MS: '1000',
  VOICE_SANDBOX_SPEED: '50',
  VOICE_SANDBOX_MS_PER_CHAR: '2',
  VOICE_SANDBOX_END_OF_TURN_MS: '100',
};

let t: TestService;
before(async () => {
  t = await startTestService(FAST, { clock });
});
after(() => t.close());

async function leases(s: TestService, workspaceId: string): Promise<number> {
  const [{ count }] = await s.service.db
    .knex('session_leases')
    .where({ workspace_id: workspaceId })
    .where('expires_at', '>', new Date())
    .count<{ count: string }[]>('* as count');
  return Number(count);
}

const CLOSE = {
  token: [4001, 'Invalid authentication token'],
  billing: [4402, 'Service unavailable'],
  plan: [4028, 'Plan limit'],
  credit: [4028, 'Insufficient credits'],
  camera: [4003, 'Camera is not enabled for this agent'],
  screen: [4003, 'Screen sharing is not enabled for this agent'],
  slots: [4029, 'Too many concurrent sessions for your plan'],
  start: [1011, ''],
} as const;

describe('4001 Invalid authentication token', () => {
  let a: Tenant;
  let agentId: string;
  before(async () => {
    a = await tenant(t);
    agentId = await createAgent(t, a);
  });

  it('token missing, malformed or wrong', async () => {
    const base = `${t.url.replace(/^http/, 'ws')}/ws/visitor-1`;
    await expectRefusal(base, ...CLOSE.token);
    await expectRefusal(`${base}?token=`, ...CLOSE.token);
    await expectRefusal(`${base}?token=nonsense`, ...CLOSE.token);
    await expectRefusal(`${base}?token=rts_${randomBytes(32).toString('base64url')}`, ...CLOSE.token);
  });

  it('a token is single use: the first attempt uses it, even a failed one (user_id of another path)', async () => {
    const s = await mintSession(t, a, agentId, 'text', 'visitor-1');
    const wrongUser = s.ws_url.replace('/ws/visitor-1?', '/ws/visitor-2?');
    await expectRefusal(wrongUser, ...CLOSE.token);
    await expectRefusal(s.ws_url, ...CLOSE.token);
    const used = await t.service.db.knex('realtime_tokens').where({ workspace_id: a.workspaceId, user_id: 'visitor-1' }).whereNotNull('used_at');
    assert.equal(used.length, 1);
  });

  it('a token that connected once cannot connect again', async () => {
    const s = await mintSession(t, a, agentId, 'text');
    const c = connect(s.ws_url);
    await c.next('session_started');
    assert.deepEqual(await c.close(), { code: 1000, reason: '' });
    await expectRefusal(s.ws_url, ...CLOSE.token);
    assert.ok(!t.logs.join('').includes(s.session_token), 'the token is never logged');
  });

  it('expires 60 seconds after issue (the real value, on the service clock)', async () => {
    const issuedAt = Date.now();
    frozenAt = issuedAt;
    try {
      const early = await mintSession(t, a, agentId, 'text');
      const late = await mintSession(t, a, agentId, 'text');
      frozenAt = issuedAt + 59_999;
      const c = connect(early.ws_url);
      await c.next('session_started');
      await c.close();
      frozenAt = issuedAt + 60_000;
      await expectRefusal(late.ws_url, ...CLOSE.token);
    } finally {
      frozenAt = null;
    }
  });

  it('the agent was deleted or moved to another workspace after the token was issued', async () => {
    const doomed = await createAgent(t, a);
    const s = await mintSession(t, a, doomed, 'text');
    assert.equal((await t.http.delete(`/api/v1/agents/${doomed}`).set(bearer(a.apiKey))).status, 200);
    await expectRefusal(s.ws_url, ...CLOSE.token);

    const moving = await createAgent(t, a);
    const m = await mintSession(t, a, moving, 'text');
    const other = await tenant(t);
    await t.service.db.knex('agents').where({ id: moving }).update({ workspace_id: other.workspaceId });
    await expectRefusal(m.ws_url, ...CLOSE.token);
  });
});

describe('4402, 4028, 4003, 4029, 1011 and their order', () => {
  it('4402 Service unavailable: subscription past_due or unpaid after the token was issued', async () => {
    const a = await tenant(t);
    const agentId = await createAgent(t, a);
    for (const status of ['past_due', 'unpaid']) {
      const s = await mintSession(t, a, agentId, 'text');
      await setWorkspace(t, a.workspaceId, { subscription_status: status });
      await expectRefusal(s.ws_url, ...CLOSE.billing);
      await setWorkspace(t, a.workspaceId, { subscription_status: 'active' });
      // The refused attempt used the token up.
      await expectRefusal(s.ws_url, ...CLOSE.token);
    }
  });

  it('4028 Insufficient credits for voice, camera and screen, never for text', async () => {
    const a = await tenant(t);
    const agentId = await createAgent(t, a);
    const tokens = await Promise.all(['voice', 'camera', 'screen', 'text'].map((src) => mintSession(t, a, agentId, src)));
    await setWorkspace(t, a.workspaceId, { credit_balance_cents: 0 });
    for (const s of tokens.slice(0, 3)) await expectRefusal(s.ws_url, ...CLOSE.credit);
    const c = connect(tokens[3].ws_url);
    assert.equal((await c.next('session_started')).source, 'text');
    await c.close();
  });

  it('4028 Plan limit: the plan has used its monthly web-session minutes (REALTIME_PLAN_MINUTES)', async () => {
    const a = await tenant(t);
    const agentId = await createAgent(t, a);
    const s = await mintSession(t, a, agentId, 'text');
    await setWorkspace(t, a.workspaceId, { plan: 'starter' });
    await expectRefusal(s.ws_url, ...CLOSE.plan);
  });

  it('4003 when the source was turned off after the token was issued', async () => {
    const a = await tenant(t);
    const agentId = await createAgent(t, a);
    const cam = await mintSession(t, a, agentId, 'camera');
    const screen = await mintSession(t, a, agentId, 'screen');
    const voice = await mintSession(t, a, agentId, 'voice');
    assert.equal(
      (
        await t.http
          .patch(`/api/v1/agents/${agentId}`)
          .set(bearer(a.apiKey))
          .send({ realtime: { enable_webcam: false, enable_screen_share: false } })
      ).status,
      200,
    );
    await expectRefusal(cam.ws_url, ...CLOSE.camera);
    await expectRefusal(screen.ws_url, ...CLOSE.screen);
    const c = connect(voice.ws_url);
    await c.next('session_started');
    await c.close();
  });

  it('4029 at the concurrent_session_limit; every kind of session holds a slot, text included; released on close', async () => {
    const a = await tenant(t);
    const agentId = await createAgent(t, a);
    await setWorkspace(t, a.workspaceId, { concurrent_session_limit: 1 });
    const first = connect((await mintSession(t, a, agentId, 'text')).ws_url);
    await first.next('session_started');
    assert.equal(await leases(t, a.workspaceId), 1);
    await expectRefusal((await mintSession(t, a, agentId, 'voice')).ws_url, ...CLOSE.slots);
    await expectRefusal((await mintSession(t, a, agentId, 'text')).ws_url, ...CLOSE.slots);
    await first.close();
    await waitFor(async () => (await leases(t, a.workspaceId)) === 0, 3000, 'slot release');
    const second = connect((await mintSession(t, a, agentId, 'voice')).ws_url);
    await second.next('session_started');
    await second.close();
  });

  it('1011 with an empty reason when the voice service session cannot start; the slot is given back', async () => {
    const a = await tenant(t);
    const agentId = await createAgent(t, a);
    const s = await mintSession(t, a, agentId, 'voice');
    t.service.sandbox.voice!.setUnavailable(true);
    try {
      await expectRefusal(s.ws_url, ...CLOSE.start);
    } finally {
      t.service.sandbox.voice!.setUnavailable(false);
    }
    assert.equal(await leases(t, a.workspaceId), 0);
  });

  it('checks run in the order 4001 -> 4402 -> 4028 -> 4003 -> 4029 -> 1011', async () => {
    const a = await tenant(t);
    const agentId = await createAgent(t, a);
    const mint = () => mintSession(t, a, agentId, 'camera', 'visitor-9');
    const tokens = await Promise.all([mint(), mint(), mint(), mint(), mint(), mint()]);
    const patch = (body: object) => t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(a.apiKey)).send(body);
    // Everything wrong at once.
    await setWorkspace(t, a.workspaceId, { subscription_status: 'past_due', credit_balance_cents: 0, concurrent_session_limit: 0 });
    await patch({ realtime: { enable_webcam: false } });
    t.service.sandbox.voice!.setUnavailable(true);
    try {
      await expectRefusal(tokens[0].ws_url.replace('/ws/visitor-9?', '/ws/visitor-8?'), ...CLOSE.token);
      await expectRefusal(tokens[1].ws_url, ...CLOSE.billing);
      await setWorkspace(t, a.workspaceId, { subscription_status: 'active' });
      await expectRefusal(tokens[2].ws_url, ...CLOSE.credit);
      await setWorkspace(t, a.workspaceId, { credit_balance_cents: 1000 });
      await expectRefusal(tokens[3].ws_url, ...CLOSE.camera);
      await patch({ realtime: { enable_webcam: true } });
      await expectRefusal(tokens[4].ws_url, ...CLOSE.slots);
      await setWorkspace(t, a.workspaceId, { concurrent_session_limit: 5 });
      await expectRefusal(tokens[5].ws_url, ...CLOSE.start);
    } finally {
      t.service.sandbox.voice!.setUnavailable(false);
    }
    // Refusals leave nothing behind: no slot, no conversation record, no credit used.
    assert.equal(await leases(t, a.workspaceId), 0);
    assert.equal((await t.service.db.knex('realtime_conversations').where({ workspace_id: a.workspaceId })).length, 0);
    assert.equal((await t.http.get(`/admin/v1/workspaces/${a.workspaceId}`).set({ Authorization: `Bearer ${ADMIN_TOKEN}` })).body.credit_balance_cents, 1000);
  });
});

describe('the connected state', () => {
  it('session_started first, with the conversation id; a slot is held while connected; frames sent early are handled after it', async () => {
    const a = await tenant(t);
    const agentId = await createAgent(t, a);
    const s = await mintSession(t, a, agentId, 'voice', 'visitor-77');
    const c = connect(s.ws_url);
    c.ws.on('open', () => c.sendJson({ mime_type: 'audio/webm', data: 'AAAA' }));
    const started = await c.next();
    assert.equal(started.type, 'session_started');
    assert.match(String(started.session_id), /^conv_[0-9A-Z]{26}$/);
    assert.deepEqual(
      [started.agent_id, started.user_id, started.source, started.audio_format],
      [agentId, 'visitor-77', 'voice', { encoding: 'pcm16le', sample_rate: 24000, channels: 1 }],
    );
    const err = await c.next('error');
    assert.equal(err.code, 'unsupported_mime_type');
    assert.equal(await leases(t, a.workspaceId), 1);
    const lease = await t.service.db.knex('session_leases').where({ id: started.session_id }).first();
    assert.ok(lease, 'the lease is keyed by the session id');
    assert.deepEqual(await c.close(), { code: 1000, reason: '' });
    await waitFor(async () => (await leases(t, a.workspaceId)) === 0, 3000, 'slot release');
  });
});

describe('per-IP connection attempts', () => {
  it('at the real value: 20 attempts per 60 s per address; the 21st gets HTTP 429 + Retry-After before the upgrade; X-Forwarded-For is ignored by default', async () => {
    const ip = freshAddress();
    const url = `${t.url.replace(/^http/, 'ws')}/ws/visitor-1`;
    for (let i = 0; i < 20; i++) {
      const c = connect(url, { localAddress: ip, headers: { 'X-Forwarded-For': `198.51.100.${i}` } });
      assert.equal((await c.closed).code, 4001);
    }
    const refused = await upgradeRefusal(url, ip);
    assert.notEqual(refused, 'accepted');
    if (refused !== 'accepted') {
      assert.equal(refused.status, 429);
      const wait = Number(refused.headers['retry-after']);
      assert.ok(wait >= 1 && wait <= 60, `Retry-After ${refused.headers['retry-after']}`);
    }
    // Another address is unaffected.
    await expectRefusal(url, ...CLOSE.token);
  });
});

describe('a second instance on the same database, and instances or tabs that die', () => {
  let t2: TestService;
  before(async () => {
    t2 = await startTestService({ ...FAST, DATABASE_URL: t.service.db.url }, { clock });
  });
  after(() => t2.close());

  it('shares the concurrency slots', async () => {
    const a = await tenant(t);
    const agentId = await createAgent(t, a);
    await setWorkspace(t, a.workspaceId, { concurrent_session_limit: 2 });
    const c1 = connect((await mintSession(t, a, agentId, 'text')).ws_url);
    await c1.next('session_started');
    const c2 = connect((await mintSession(t2, a, agentId, 'text')).ws_url.replace(t.url.replace(/^http/, 'ws'), t2.url.replace(/^http/, 'ws')));
    await c2.next('session_started');
    // Full on both instances.
    const on2 = (await mintSession(t, a, agentId, 'text')).ws_url.replace(t.url.replace(/^http/, 'ws'), t2.url.replace(/^http/, 'ws'));
    await expectRefusal(on2, ...CLOSE.slots);
    await expectRefusal((await mintSession(t2, a, agentId, 'voice')).ws_url, ...CLOSE.slots);
    await c2.close();
    await waitFor(async () => (await leases(t, a.workspaceId)) === 1, 3000, 'slot release');
    const c3 = connect((await mintSession(t, a, agentId, 'voice')).ws_url);
    await c3.next('session_started');
    await Promise.all([c1.close(), c3.close()]);
  });

  it('reclaims the slot of a dead tab (no pong) and of an instance whose heartbeat stopped', async () => {
    const a = await tenant(t);
    const agentId = await createAgent(t, a);
    await setWorkspace(t, a.workspaceId, { concurrent_session_limit: 1 });
    // A tab that went away without closing: its socket stops reading, so pings go unanswered.
    const tab = connect((await mintSession(t, a, agentId, 'text')).ws_url);
    await tab.next('session_started');
    (tab.ws as unknown as { _socket: Socket })._socket.pause();
    await waitFor(async () => (await leases(t, a.workspaceId)) === 0, 3000, 'dead tab reclaimed');
    // An instance that dies: its session's lease stops being renewed and expires (2.5 s here, < 60 s).
    const wsBase2 = t2.url.replace(/^http/, 'ws');
    const onDying = connect((await mintSession(t, a, agentId, 'text')).ws_url.replace(t.url.replace(/^http/, 'ws'), wsBase2));
    await onDying.next('session_started');
    await expectRefusal((await mintSession(t, a, agentId, 'text')).ws_url, ...CLOSE.slots);
    await t2.service.realtime.leases.stop();
    // Polled by the lease, not by minting sessions: each attempt would count against the hourly limit.
    await waitFor(async () => (await leases(t, a.workspaceId)) === 0, 10_000, 'the dead instance slot to expire');
    const later = connect((await mintSession(t, a, agentId, 'text')).ws_url);
    await later.next('session_started');
    await later.close();
    await onDying.close();
    tab.ws.terminate();
  });
});

describe('trusted proxies', () => {
  let tp: TestService;
  before(async () => {
    tp = await startTestService({ ...FAST, REALTIME_IP_ATTEMPTS: '2', TRUSTED_PROXIES: '127.0.0.0/8' });
  });
  after(() => tp.close());

  it('believes X-Forwarded-For only from a configured proxy, so clients behind it are counted apart', async () => {
    const proxy = freshAddress();
    const url = `${tp.url.replace(/^http/, 'ws')}/ws/visitor-1`;
    const from = (client: string) => connect(url, { localAddress: proxy, headers: { 'X-Forwarded-For': `${client}, ${proxy}` } });
    assert.equal((await from('203.0.113.7').closed).code, 4001);
    assert.equal((await from('203.0.113.7').closed).code, 4001);
    const refused = await new Promise<number>((resolve) => {
      const c = from('203.0.113.7');
      c.ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      c.closed.then(({ code }) => resolve(code));
    });
    assert.equal(refused, 429);
    assert.equal((await from('203.0.113.8').closed).code, 4001, 'another client behind the same proxy');
  });
});

/** Sends a raw HTTP request over a plain socket; resolves with everything the server wrote before it closed the connection. */
function rawRequest(url: string, request: string, timeoutMs = 3000): Promise<{ response: string; closedByServer: boolean }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: hostname, port: Number(port), localAddress: freshAddress() }, () => socket.write(request));
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ response: Buffer.concat(chunks).toString(), closedByServer: false });
    }, timeoutMs);
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ response: Buffer.concat(chunks).toString(), closedByServer: true });
    });
  });
}

const upgradeRequest = (path: string, headers: Record<string, string> = { 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version': '13' }) =>
  [
    `GET ${path} HTTP/1.1`,
    'Host: 127.0.0.1',
    'Upgrade: websocket',
    'Connection: Upgrade',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    '',
    '',
  ].join('\r\n');

describe('upgrade requests the realtime endpoint does not take', () => {
  it('an upgrade to any other path gets 404 with the error envelope and Connection: close, and its socket is closed', async () => {
    for (const path of ['/', '/ws', '/ws/a/b', '/api/v1/agents', '/telephony/provider_c/media?x=1']) {
      const { response, closedByServer } = await rawRequest(t.url, upgradeRequest(path));
      assert.ok(closedByServer, `${path}: the server closes the socket`);
      const [head, body] = response.split('\r\n\r\n');
      assert.match(head, /^HTTP\/1\.1 404 Not Found\r\n/, path);
      assert.match(head, /\r\nConnection: close(\r\n|$)/i);
      assert.match(head, /\r\nContent-Type: application\/json/i);
      const parsed = JSON.parse(body);
      assert.deepEqual(Object.keys(parsed.error).sort(), ['code', 'message', 'param', 'request_id', 'type']);
      assert.deepEqual([parsed.error.type, parsed.error.code, parsed.error.param, parsed.error.request_id], ['not_found_error', 'route_not_found', null, null]);
    }
    // The service itself still answers.
    assert.equal((await t.http.get('/healthz')).status, 200);
  });

  it('a malformed upgrade on /ws/... (no Sec-WebSocket-Key) gets 400 and does not keep the service from stopping', async () => {
    const s = await startTestService({ ...FAST, SHUTDOWN_GRACE_MS: '2000' });
    let stopped = false;
    try {
      const { response, closedByServer } = await rawRequest(s.url, upgradeRequest('/ws/visitor-1?token=x', { 'Sec-WebSocket-Version': '13' }));
      assert.ok(closedByServer);
      assert.match(response, /^HTTP\/1\.1 400 /);
      // A close() kept waiting by the bad upgrade would wait forever: 30 s is room for a busy machine.
      const outcome = await Promise.race([s.service.close().then(() => 'closed'), new Promise((r) => setTimeout(() => r('hung'), 30_000))]);
      assert.equal(outcome, 'closed', 'service close() finishes');
      stopped = true;
    } finally {
      // A hung close() would hang here too: then leave it (the test has failed already).
      if (stopped) await s.close().catch(() => undefined);
      else void s.close().catch(() => undefined);
    }
  });
});

describe('ping/pong while a session is being admitted', () => {
  let sp: TestService;
  before(async () => {
    // Admission takes ~1.4 s of voice-service retries (200 + 400 + 800 ms), many ping intervals.
    sp = await startTestService({
      ...FAST,
      REALTIME_PING_INTERVAL_MS: '100',
      VOICE_RETRY_MAX: '3',
      VOICE_RETRY_BASE_MS: '200',
      VOICE_RETRY_MAX_DELAY_MS: '800',
    });
  });
  after(() => sp.close());

  it('a client that answers pings is not cut while admission runs: a voice service that fails to start gives 1011, not 1006', async () => {
    const a = await tenant(sp);
    const agentId = await createAgent(sp, a);
    const s = await mintSession(sp, a, agentId, 'voice');
    sp.service.sandbox.voice!.setUnavailable(true);
    const started = Date.now();
    try {
      await expectRefusal(s.ws_url, ...CLOSE.start);
    } finally {
      sp.service.sandbox.voice!.setUnavailable(false);
    }
    assert.ok(Date.now() - started >= 1000, 'admission outlasted several ping intervals');
    assert.equal(await leases(sp, a.workspaceId), 0);
  });

  it('a slow voice service that does start: the session starts', async () => {
    const a = await tenant(sp);
    const agentId = await createAgent(sp, a);
    const s = await mintSession(sp, a, agentId, 'voice');
    sp.service.sandbox.voice!.setUnavailable(true);
    const c = connect(s.ws_url);
    setTimeout(() => sp.service.sandbox.voice!.setUnavailable(false), 500);
    assert.equal((await c.next('session_started', 5000)).type, 'session_started');
    await c.close();
  });
});

describe('leases on the database clock, shared by two instances with skewed clocks', () => {
  let ahead: TestService;
  let normal: TestService;
  const aheadClock: Clock = { now: () => new Date(Date.now() + 5 * 60_000) };
  const dbLease = async (s: TestService, id: unknown) =>
    s.service.db
      .knex('session_leases')
      .where({ id: String(id) })
      .first<{ id: string; left_ms: number } | undefined>('id', s.service.db.knex.raw('extract(epoch from expires_at - now()) * 1000 as left_ms'));
  before(async () => {
    ahead = await startTestService(FAST, { clock: aheadClock });
    normal = await startTestService({ ...FAST, DATABASE_URL: ahead.service.db.url });
  });
  after(async () => {
    await normal.close();
    await ahead.close();
  });

  it('an instance whose clock runs ahead neither deletes live leases of others nor keeps its own too long', async () => {
    const a = await tenant(normal);
    const agentId = await createAgent(normal, a);
    await setWorkspace(normal, a.workspaceId, { concurrent_session_limit: 1 });
    const c = connect((await mintSession(normal, a, agentId, 'text')).ws_url);
    const sid = (await c.next('session_started')).session_id;
    // Several heartbeats of the instance that is 5 minutes ahead.
    await new Promise((r) => setTimeout(r, 800));
    assert.ok(await dbLease(normal, sid), 'the lease of the live session survives');
    await expectRefusal((await mintSession(ahead, a, agentId, 'text')).ws_url, ...CLOSE.slots);
    await c.close();
    await waitFor(async () => (await leases(normal, a.workspaceId)) === 0, 3000, 'slot release');
    // Its own lease expires REALTIME_LEASE_EXPIRY_MS after renewal on the database clock, not 5 minutes later.
    const d = connect((await mintSession(ahead, a, agentId, 'text')).ws_url);
    const did = (await d.next('session_started')).session_id;
    const lease = await dbLease(ahead, did);
    assert.ok(lease && lease.left_ms > 0 && lease.left_ms <= 2600, `expires in ${lease?.left_ms} ms`);
    await d.close();
  });

  it('a lease deleted by another instance (heartbeat lag) is re-created by the next heartbeat, so the limit holds', async () => {
    const a = await tenant(normal);
    const agentId = await createAgent(normal, a);
    await setWorkspace(normal, a.workspaceId, { concurrent_session_limit: 1 });
    const c = connect((await mintSession(normal, a, agentId, 'text')).ws_url);
    const sid = (await c.next('session_started')).session_id;
    await normal.service.db
      .knex('session_leases')
      .where({ id: String(sid) })
      .delete();
    await waitFor(() => dbLease(normal, sid), 3000, 'the lease to be re-created');
    await expectRefusal((await mintSession(ahead, a, agentId, 'text')).ws_url, ...CLOSE.slots);
    await c.close();
  });

  it('when the slot was taken meanwhile, the session is kept and logged, and its lease comes back once a slot frees', async () => {
    const a = await tenant(normal);
    const agentId = await createAgent(normal, a);
    await setWorkspace(normal, a.workspaceId, { concurrent_session_limit: 1 });
    const c = connect((await mintSession(normal, a, agentId, 'text')).ws_url);
    const sid = (await c.next('session_started')).session_id;
    const keeper = normal.service.realtime.leases;
    // A heartbeat under way when it stops would take the lease back after the delete below.
    await keeper.stop();
    try {
      await normal.service.db
        .knex('session_leases')
        .where({ id: String(sid) })
        .delete();
      const other = connect((await mintSession(ahead, a, agentId, 'text')).ws_url);
      await other.next('session_started');
      await keeper.heartbeat();
      assert.equal(await dbLease(normal, sid), undefined, 'not re-acquired beyond the limit');
      assert.ok(normal.logs.join('').includes('session lease could not be re-acquired'), 'logged');
      assert.equal(c.ws.readyState, c.ws.OPEN, 'the session is kept');
      await c.next('turn_complete'); // the agent's first message
      c.sendFrame('text/plain', Buffer.from('still there?'));
      await c.next('turn_complete');
      await other.close();
      await waitFor(async () => (await leases(normal, a.workspaceId)) === 0, 3000, 'the other slot released');
      await keeper.heartbeat();
      assert.ok(await dbLease(normal, sid), 're-acquired once a slot was free');
    } finally {
      keeper.start();
    }
    await c.close();
    await waitFor(async () => (await leases(normal, a.workspaceId)) === 0, 3000, 'slot release');
  });
});

describe('shutdown deadline', () => {
  it('drain() waits for sessions at most SHUTDOWN_GRACE_MS, even for one stuck in admission', async () => {
    const s = await startTestService({ ...FAST, SHUTDOWN_GRACE_MS: '800' });
    const a = await tenant(s);
    const agentId = await createAgent(s, a);
    // Admission waits on the workspace's slot lock, held here until the drain has returned.
    const trx = await s.service.db.knex.transaction();
    await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`session-lease:${a.workspaceId}`]);
    try {
      const c = connect((await mintSession(s, a, agentId, 'text')).ws_url);
      await new Promise<void>((resolve) => c.ws.once('open', () => resolve()));
      await new Promise((r) => setTimeout(r, 200));
      const started = Date.now();
      // The session cannot finish while the lock is held: drain() returning at all is its deadline.
      const outcome = await Promise.race([
        s.service.realtime.drain(Promise.resolve()).then(() => 'drained'),
        new Promise((r) => setTimeout(() => r('hung'), 30_000)),
      ]);
      assert.equal(outcome, 'drained');
      const took = Date.now() - started;
      assert.ok(took >= 700, `drained after ${took} ms, before SHUTDOWN_GRACE_MS`);
      assert.notEqual((await c.closed).code, 1000);
      assert.ok(s.logs.join('').includes('still finishing after SHUTDOWN_GRACE_MS'));
    } finally {
      await trx.commit();
    }
    await s.close();
  });
});
