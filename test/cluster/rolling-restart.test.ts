/**
 * Three instances on one database behind HAProxy, the simulators as processes of their own, traffic
 * through the balancer (phone calls on both carriers, web sessions, a batch), as an operator runs it:
 *
 * 1. One instance is killed (SIGKILL) mid-traffic and started again: every conversation still ends,
 *    each reported by exactly one `call.completed`, every batch recipient dialed once.
 * 2. Rolling restart: each instance in turn gets SIGTERM, drains (its live conversations run to their
 *    end; the balancer stops sending it work once its readiness answers 503) and starts again, while
 *    traffic runs. Every conversation ends normally (none cut, none `instance_lost`), each with exactly
 *    one `call.completed`, every batch recipient dialed once, and every request is answered or refused
 *    with a retryable status (which the client retries).
 *
 * Not in the default `npm test` (it takes minutes): `npm run test:cluster` runs it, skipped when
 * HAProxy is not installed (.ci/run installs it). Progress goes to stderr; each instance run's output
 * is written to CLUSTER_LOG_DIR when set.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { createTestDatabase } from '../helpers/database.js';
import { freePort } from '../helpers/process.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { providerConfig, providerBConfigFor, sandboxNumber } from '../helpers/calls.js';
import { connect, waitFor } from '../helpers/realtime.js';
import { openSse, type SseMessage } from '../helpers/sse.js';
import { Instance, haproxyBinary, startBalancer, startSimulator, type Balancer, type Simulator } from '../helpers/cluster.js';

const ADMIN = 'cluster-operator-token-0123456789';
const RETRYABLE = new Set([502, 503, 504]);
const TERMINAL = new Set(['completed', 'busy', 'no_answer', 'failed', 'canceled', 'voicemail']);
const skip = haproxyBinary() ? false : 'haproxy is not installed';

let db: { url: string; drop(): Promise<void> };
let knex: Knex;
let receiver: Receiver;
let carriers: Simulator;
let voice: Simulator;
let lb: Balancer;
const instances: Instance[] = [];
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-cluster-'));
const logDir = process.env.CLUSTER_LOG_DIR;
const progress = (what: string) => {
  const line = `[cluster ${new Date().toISOString().slice(11, 19)}] ${what}\n`;
  process.stderr.write(line);
  if (logDir) fs.appendFileSync(path.join(logDir, 'progress.log'), line);
};

/** Every answer the client finally got (after retrying retryable ones), for the last check. */
const outcomes: Array<{ what: string; status: number }> = [];
let retried = 0;

async function request(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const key = method === 'POST' ? randomUUID() : undefined;
  for (let attempt = 0; ; attempt++) {
    let status: number;
    let parsed: any = null;
    try {
      const res = await fetch(`${lb.url}${url}`, {
        method,
        headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      status = res.status;
      const text = await res.text();
      parsed = text ? JSON.parse(text) : null;
    } catch {
      status = 0; // the connection failed: as retryable as a 502
    }
    const again = status === 0 || RETRYABLE.has(status) || (status === 409 && parsed?.error?.code === 'idempotency_request_in_progress');
    if (!again || attempt >= 40) {
      outcomes.push({ what: `${method} ${url.split('?')[0]}`, status });
      return { status, body: parsed };
    }
    retried += 1;
    await new Promise((r) => setTimeout(r, 250));
  }
}

interface Tenant {
  auth: Record<string, string>;
  agents: { provider_a: string; provider_b: string; web: string };
}

async function setUp(): Promise<Tenant> {
  const email = `cluster-${randomBytes(4).toString('hex')}@example.com`;
  const signup = await request('POST', '/api/v1/auth/signup', { email, password: 'correct-horse-battery', workspace_name: 'Cluster' });
  assert.equal(signup.status, 201, JSON.stringify(signup.body));
  const key = await request('POST', '/api/v1/keys', { name: 'cluster' }, { authorization: `Bearer ${signup.body.session_token}` });
  const auth = { authorization: `Bearer ${key.body.key}` };
  const limit = await request(
    'PATCH',
    `/admin/v1/workspaces/${signup.body.workspace.id}`,
    // Well above what the traffic keeps live and spends, so no refusal here comes from the workspace's
    // limit or its credit (a free workspace's credit runs out within the three phases: 402).
    { concurrent_session_limit: 1000, plan: 'enterprise', credit_balance_cents: 1_000_000_000 },
    { authorization: `Bearer ${ADMIN}` },
  );
  assert.equal(limit.status, 200, JSON.stringify(limit.body));
  const policy = await request(
    'PATCH',
    `/admin/v1/workspaces/${signup.body.workspace.id}/destination-policy`,
    { daily_call_cap: null },
    { authorization: `Bearer ${ADMIN}` },
  );
  assert.equal(policy.status, 200, JSON.stringify(policy.body));
  assert.equal((await request('POST', '/api/v1/webhooks', { url: receiver.url }, auth)).status, 201);
  const agent = async (extra: Record<string, unknown>) => {
    const res = await request(
      'POST',
      '/api/v1/agents',
      {
        name: 'Receptionist',
        instruction: 'You are the receptionist of Acme Dental.',
        first_message: 'Hello! This is Acme Dental.',
        can_end_conversation: true,
        ...extra,
      },
      auth,
    );
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body.agent_id as string;
  };
  return {
    auth,
    agents: {
      provider_a: await agent(providerConfig('provider_a')),
      provider_b: await agent(providerBConfigFor(carriers.ready.providerBPublicKey)),
      web: await agent({ first_message: 'Hi! Ask me anything.' }),
    },
  };
}

/**
 * A call's live events through the balancer, from the first to `end`: a stream that closes before
 * `end` (its instance drained or was killed) is opened again with the last id received.
 */
async function follow(tn: Tenant, callId: string): Promise<SseMessage[]> {
  const got: SseMessage[] = [];
  for (let attempt = 1; attempt <= 40; attempt++) {
    const last = got.at(-1);
    try {
      const stream = await openSse(`${lb.url}/api/v1/calls/${callId}/events`, { ...tn.auth, ...(last ? { 'Last-Event-ID': String(last.id) } : {}) }, (m) =>
        got.push(m),
      );
      if (stream.status === 200) {
        await stream.ended;
        if (got.at(-1)?.event === 'end') return got;
      } else if (!RETRYABLE.has(stream.status)) {
        throw new Error(`${callId}: events answered ${stream.status} ${JSON.stringify(stream.error)}`);
      }
    } catch (err) {
      if ((err as Error).message.startsWith(`${callId}:`)) throw err;
      // The connection failed (an instance going away): as retryable as a 502.
    }
    retried += 1;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${callId}: no end event after 40 attempts; got ${got.map((m) => `${m.id}:${m.event}`).join(' ')}`);
}

/** Each followed call's events came once each, numbered 1..n, to `end`, with the call's final status. */
async function assertFollowed(follows: Map<string, Promise<SseMessage[]>>, rows: Array<Record<string, any>>): Promise<void> {
  const wrong: string[] = [];
  for (const [callId, events] of follows) {
    const got = await events;
    const ids = got.map((m) => m.id);
    const row = rows.find((r) => r.id === callId);
    if (ids.some((id, i) => id !== i + 1)) wrong.push(`${callId}: ids ${ids.join(',')}`);
    else if (got.at(-1)?.data.status !== row?.status) wrong.push(`${callId}: end says ${got.at(-1)?.data.status}, the record ${row?.status}`);
  }
  assert.deepEqual(wrong, [], 'every call followed once from its first event to its end');
}

/** Web sessions that failed on the client's side, with why (each fails the test at its end). */
const sessionErrors: string[] = [];

/** Traffic until `stop()`: a call every 600 ms (carriers alternating), a web session every 2.5 s. */
function traffic(tn: Tenant) {
  const calls: string[] = [];
  const follows = new Map<string, Promise<SseMessage[]>>();
  const sessions: Array<Promise<string | null>> = [];
  /** The instances seen running calls' media (the finalised row forgets it). */
  const bridgedOn = new Set<string>();
  let running = true;
  const sampler = setInterval(() => {
    void knex('calls')
      .whereNotNull('bridge_instance')
      .distinct('bridge_instance')
      .then((rows) => rows.forEach((r) => bridgedOn.add(r.bridge_instance)))
      .catch(() => undefined);
  }, 500);
  let n = 0;
  const callLoop = (async () => {
    while (running) {
      const provider = n++ % 2 === 0 ? 'provider_a' : 'provider_b';
      const res = await request('POST', '/api/v1/calls', { agent_id: tn.agents[provider], to_number: sandboxNumber('5555') }, tn.auth);
      if (res.status === 201) {
        calls.push(res.body.call_id);
        const events = follow(tn, res.body.call_id);
        events.catch(() => undefined);
        follows.set(res.body.call_id, events);
      }
      await new Promise((r) => setTimeout(r, 600));
    }
  })();
  const sessionLoop = (async () => {
    while (running) {
      sessions.push(
        webSession(tn).catch((err: Error) => {
          sessionErrors.push(err.message);
          return null;
        }),
      );
      await new Promise((r) => setTimeout(r, 2500));
    }
  })();
  return {
    calls,
    follows,
    sessions,
    bridgedOn,
    /** Until at least `calls` calls and `sessions` sessions were accepted (the machine may be slow). */
    async atLeast(n: { calls: number; sessions: number }) {
      await waitFor(async () => calls.length >= n.calls && sessions.length >= n.sessions, 150_000, `${n.calls} calls and ${n.sessions} sessions`);
    },
    async stop() {
      running = false;
      clearInterval(sampler);
      await Promise.all([callLoop, sessionLoop]);
    },
  };
}

/** A text web session through the balancer: a turn each second for 5 s, then the client closes. */
async function webSession(tn: Tenant): Promise<string | null> {
  // A connection cut before `session_started` (its instance was killed) spent its token: like a
  // client application, start again with a new one.
  for (let attempt = 1; ; attempt++) {
    try {
      return await webSessionOnce(tn);
    } catch (err) {
      if (attempt >= 3 || !(err instanceof NotStarted)) throw err;
      retried += 1;
    }
  }
}

class NotStarted extends Error {}

async function webSessionOnce(tn: Tenant): Promise<string | null> {
  const minted = await request(
    'POST',
    '/api/v1/realtime/sessions',
    { agent_id: tn.agents.web, user_id: `visitor-${randomBytes(3).toString('hex')}`, source: 'text' },
    tn.auth,
  );
  if (minted.status !== 201) throw new Error(`session not created: ${minted.status} ${JSON.stringify(minted.body)}`);
  const wsUrl = new URL(minted.body.ws_url);
  const c = connect(`${lb.url.replace('http', 'ws')}${wsUrl.pathname}${wsUrl.search}`);
  const started = await c.next('session_started', 30_000).catch(async (err: Error) => {
    throw new NotStarted(`${err.message}; closed ${JSON.stringify(await c.closed)} (${wsUrl.pathname})`);
  });
  for (let i = 0; i < 5; i++) {
    c.sendFrame('text/plain', Buffer.from(`Question ${i}: what are your opening hours?`).toString('base64'));
    await new Promise((r) => setTimeout(r, 1000));
  }
  await c.close();
  return String(started.session_id);
}

async function batch(tn: Tenant, size: number): Promise<string> {
  const recipients = Array.from({ length: size }, () => ({ to_number: sandboxNumber('5555') }));
  const res = await request('POST', '/api/v1/batches', { agent_id: tn.agents.provider_a, name: 'Cluster batch', recipients, concurrency: 5 }, tn.auth);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.batch_id;
}

/** call.completed deliveries per conversation id. */
function completions(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of receiver.requests) {
    const e = JSON.parse(r.rawBody.toString());
    if (e.event !== 'call.completed') continue;
    const id = e.call_id ?? e.conversation_id;
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

/** Waits until every call and the batch are over and each conversation was reported. */
async function settle(tn: Tenant, callIds: string[], sessionIds: string[], batchId: string): Promise<Array<Record<string, any>>> {
  progress(`settling: ${callIds.length} calls, ${sessionIds.length} sessions and a batch`);
  await waitFor(
    async () => {
      const b = await request('GET', `/api/v1/batches/${batchId}`, undefined, tn.auth);
      return b.body?.status === 'completed';
    },
    120_000,
    'the batch to complete',
  );
  const batchCalls = (await knex('calls').where({ batch_id: batchId }).select('id')).map((r) => r.id as string);
  const all = [...callIds, ...batchCalls];
  const rows = await waitFor(
    async () => {
      const found = await knex('calls').whereIn('id', all);
      return found.length === all.length && found.every((c) => TERMINAL.has(c.status)) ? found : null;
    },
    120_000,
    'every call to end',
  );
  await waitFor(
    async () => {
      const seen = completions();
      return [...all, ...sessionIds].every((id) => seen.has(id));
    },
    60_000,
    'a call.completed for every conversation',
  ).catch((err: Error) => {
    const seen = completions();
    throw new Error(`${err.message}; missing: ${[...all, ...sessionIds].filter((id) => !seen.has(id)).join(', ')}`);
  });
  return rows;
}

/** Runs `fn` while `load` runs; the load stops whatever happens. */
async function underLoad<T>(load: { stop(): Promise<void> }, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } finally {
    await load.stop();
  }
}

function assertOncePerConversation(ids: string[]): void {
  assert.deepEqual(sessionErrors.splice(0), [], 'every web session ran');
  const seen = completions();
  const wrong = ids.filter((id) => seen.get(id) !== 1).map((id) => `${id}: ${seen.get(id) ?? 0}`);
  assert.deepEqual(wrong, [], 'exactly one call.completed per conversation');
}

async function assertDialedOnce(batchId: string): Promise<void> {
  const recipients = await knex('batch_recipients').where({ batch_id: batchId });
  const calls = await knex('calls').where({ batch_id: batchId }).select('to_number');
  const perNumber = new Map<string, number>();
  for (const c of calls) perNumber.set(c.to_number, (perNumber.get(c.to_number) ?? 0) + 1);
  assert.equal(calls.length, recipients.length, 'one call per recipient');
  assert.ok(
    [...perNumber.values()].every((n) => n === 1),
    'no number dialed twice',
  );
}

before(
  async () => {
    if (skip) return;
    db = await createTestDatabase();
    knex = knexFactory({ client: 'pg', connection: db.url, pool: { min: 0, max: 2 } });
    receiver = await startReceiver();
    [carriers, voice] = await Promise.all([startSimulator(['carriers', '--ring-ms=200']), startSimulator(['voice'])]);
    const ports = [await freePort(), await freePort(), await freePort()];
    lb = await startBalancer(ports);
    const secretsKey = randomBytes(32).toString('base64');
    for (const [i, port] of ports.entries()) {
      const dir = path.join(dataDir, `i${i + 1}`);
      fs.mkdirSync(dir);
      instances.push(
        new Instance(
          `i${i + 1}`,
          port,
          {
            DATABASE_URL: db.url,
            DATA_DIR: dir,
            SECRETS_KEY: secretsKey,
            PUBLIC_BASE_URL: lb.url,
            TRUSTED_PROXIES: '127.0.0.1',
            PROVIDER_A_API_URL: carriers.ready.providerAUrl,
            PROVIDER_B_API_URL: carriers.ready.providerBUrl,
            VOICE_SERVICE_URL: voice.ready.url,
            ADMIN_TOKEN: ADMIN,
            LOG_LEVEL: 'warn',
            DATABASE_POOL_MAX: '8',
            JOBS_POLL_INTERVAL_MS: '200',
            // Loose enough for a loaded 2-core machine, short enough for a killed instance's calls and
            // sessions to be taken over within the test.
            CALL_DIAL_GRACE_MS: '15000',
            CALL_ORPHAN_AFTER_MS: '20000',
            CALL_HEARTBEAT_MS: '2000',
            REALTIME_LEASE_HEARTBEAT_MS: '2000',
            REALTIME_LEASE_EXPIRY_MS: '20000',
            WEBHOOK_POLL_INTERVAL_MS: '200',
            // The traffic creates more web sessions an hour than a workspace may by default.
            REALTIME_SESSIONS_PER_HOUR: '100000',
            REALTIME_SESSIONS_PER_DAY: '100000',
            // Conversations here last about 10 s: a draining instance lets them end on their own.
            SHUTDOWN_DRAIN_MS: '60000',
          },
          logDir,
        ),
      );
    }
    await Promise.all(instances.map((i) => i.start()));
    progress(`three instances behind ${lb.url}`);
  },
  { timeout: 180_000 },
);

after(async () => {
  if (skip) return;
  await Promise.all(instances.map((i) => i.stop('SIGKILL')));
  await lb?.stop();
  await Promise.all([carriers?.stop(), voice?.stop()]);
  await receiver?.close();
  await knex?.destroy();
  await db?.drop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('three instances behind a load balancer', { skip }, () => {
  let tn: Tenant;

  it('serves every kind of work through the balancer', { timeout: 400_000 }, async () => {
    tn = await setUp();
    progress('phase 1: traffic through the balancer');
    const load = traffic(tn);
    const batchId = await underLoad(load, async () => {
      const id = await batch(tn, 6);
      await load.atLeast({ calls: 4, sessions: 3 });
      return id;
    });
    const sessionIds = (await Promise.all(load.sessions)).filter((s): s is string => s !== null);
    const rows = await settle(tn, load.calls, sessionIds, batchId);
    assert.ok(load.calls.length >= 4 && sessionIds.length >= 3, `${load.calls.length} calls, ${sessionIds.length} sessions`);
    assert.deepEqual(
      rows.filter((c) => c.status !== 'completed').map((c) => [c.id, c.status, c.end_reason]),
      [],
      'every call completed',
    );
    assert.ok(load.bridgedOn.size >= 2, `media streams reached more than one instance: ${[...load.bridgedOn].join(', ')}`);
    assertOncePerConversation([...rows.map((c) => c.id), ...sessionIds]);
    await assertFollowed(load.follows, rows);
    await assertDialedOnce(batchId);
  });

  it('an instance killed mid-traffic: every conversation still ends once, every recipient is dialed once', { timeout: 300_000 }, async () => {
    const load = traffic(tn);
    const batchId = await underLoad(load, async () => {
      const id = await batch(tn, 8);
      await new Promise((r) => setTimeout(r, 3000));
      const victim = instances[1];
      progress(`phase 2: SIGKILL ${victim.name}`);
      assert.equal(await victim.stop('SIGKILL'), null);
      await new Promise((r) => setTimeout(r, 3000));
      await victim.start();
      await new Promise((r) => setTimeout(r, 2000));
      return id;
    });
    const sessionIds = (await Promise.all(load.sessions)).filter((s): s is string => s !== null);
    const rows = await settle(tn, load.calls, sessionIds, batchId);
    assertOncePerConversation([...rows.map((c) => c.id), ...sessionIds]);
    await assertFollowed(load.follows, rows);
    await assertDialedOnce(batchId);
  });

  it('a rolling restart under load ends every conversation normally', { timeout: 400_000 }, async () => {
    outcomes.splice(0);
    retried = 0;
    const load = traffic(tn);
    const batchId = await underLoad(load, async () => {
      const id = await batch(tn, 8);
      await new Promise((r) => setTimeout(r, 3000));
      for (const instance of instances) {
        progress(`phase 3: SIGTERM ${instance.name} (drains)`);
        assert.equal(await instance.stop('SIGTERM'), 0, `${instance.name} exits cleanly after draining`);
        await instance.start();
        await new Promise((r) => setTimeout(r, 1000));
      }
      return id;
    });
    const sessionIds = (await Promise.all(load.sessions)).filter((s): s is string => s !== null);
    const rows = await settle(tn, load.calls, sessionIds, batchId);
    assert.deepEqual(
      rows.filter((c) => c.status !== 'completed' || !['agent_hangup', 'remote_hangup'].includes(c.end_reason)).map((c) => [c.id, c.status, c.end_reason]),
      [],
      'no call was cut: each ended by its callee or its agent',
    );
    const web = await knex('realtime_conversations').whereIn('id', sessionIds).select('id', 'status', 'end_reason');
    assert.deepEqual(
      web.filter((s) => s.end_reason !== 'client_closed').map((s) => [s.id, s.status, s.end_reason]),
      [],
      'no web session was cut',
    );
    assertOncePerConversation([...rows.map((c) => c.id), ...sessionIds]);
    await assertFollowed(load.follows, rows);
    await assertDialedOnce(batchId);
    const statuses = new Map<number, number>();
    for (const o of outcomes) statuses.set(o.status, (statuses.get(o.status) ?? 0) + 1);
    progress(`answers: ${JSON.stringify(Object.fromEntries(statuses))}, ${retried} retried, ${sessionIds.length} sessions, ${load.calls.length} calls`);
    const failed = outcomes.filter((o) => o.status === 0 || o.status >= 400);
    assert.deepEqual(failed, [], `every request answered (${retried} retried through a restart)`);
    assert.ok(sessionIds.length >= 3, `web sessions ran during the restart: ${sessionIds.length}`);
  });
});
