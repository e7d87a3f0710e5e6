/**
 * The per-instance caches of agents and of which event kinds a workspace's webhooks list
 * (src/db/notified-cache.ts, migration 030's triggers) through the real service and PostgreSQL:
 * - one instance: a second call to the same agent reads neither the agent nor the webhooks' kinds
 *   (every statement counted with knex's `query` event);
 * - two instances on one database: B keeps an agent for its carrier callbacks' signatures and a
 *   workspace's kinds; a credential rotation, webhook registrations and deletions made on A, raw SQL,
 *   and a workspace's cascading delete all reach B by NOTIFY (polled briefly, no fixed sleeps);
 * - before B's entries are counted, B has handled every notification of the writes that made them
 *   (a marker notified after them has reached B), since a late one rightly drops what B kept;
 * - a dropped LISTEN connection: nothing kept is used while it is down, and a change made meanwhile
 *   (which B was never notified of) is seen once it is back, because it comes back empty.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { startTestService, type TestService } from '../helpers/service.js';
import { createTestDatabase } from '../helpers/database.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { CACHE_CHANNEL } from '../../src/db/notified-cache.js';
import { twilioSignature } from '../../src/sandbox/carriers/signing.js';

const formBody = (params: Record<string, string>) => new URLSearchParams(params).toString();

/** Counts the statements of `knex` whose SQL matches each pattern, from now until `stop()`. */
function countStatements(knex: Knex, patterns: Record<string, RegExp>) {
  const counts: Record<string, number> = Object.fromEntries(Object.keys(patterns).map((k) => [k, 0]));
  let all = 0;
  const onQuery = (q: { sql: string }) => {
    all += 1;
    for (const [name, re] of Object.entries(patterns)) if (re.test(q.sql)) counts[name] += 1;
  };
  knex.on('query', onQuery);
  return {
    counts,
    get all() {
      return all;
    },
    stop: () => void knex.removeListener('query', onQuery),
  };
}

/**
 * The reads the caches stand in for: the whole agent row (the runtime agent's), and listens' (before
 * this change and now). A new call also reads the agent's published version number, never kept
 * (a publish on another instance counts before its NOTIFY): `published`.
 */
const READS = {
  agent: /select \* from "agents" where "id" = (\?|\$1)/,
  published: /select "workspace_id", "published_version" from "agents"/,
  kinds: /select "id" from "webhooks"|unnest\(events\)/,
};

describe('one instance: the reads every call repeated', () => {
  let t: TestService;
  before(async () => {
    t = await startTestService(FAST_CALLS);
  });
  after(() => t.close());

  it('a second call to the same agent reads neither the agent nor whether webhooks list call.status_changed', async (ctx) => {
    const tn = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const call = async () => {
      const placed = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber() });
      assert.equal(placed.status, 201, JSON.stringify(placed.body));
      const done = await waitForCall(t, tn, placed.body.call_id as string);
      assert.equal(done.status, 'completed');
    };
    const first = countStatements(t.service.db.knex, READS);
    await call();
    first.stop();
    const second = countStatements(t.service.db.knex, READS);
    await call();
    second.stop();
    ctx.diagnostic(`first call: ${JSON.stringify(first.counts)} of ${first.all} statements; second: ${JSON.stringify(second.counts)} of ${second.all}`);
    assert.ok(first.counts.agent >= 1 && first.counts.kinds >= 1, 'the first call reads them');
    assert.deepEqual(second.counts, { agent: 0, published: 1, kinds: 0 }, 'the second call is served from memory but for the published version number');
  });
});

describe('two instances on one database', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let a: TestService;
  let b: TestService;
  before(async () => {
    db = await createTestDatabase();
    // B opens a lost LISTEN connection again only when the test says (the dropped-connection test).
    [a, b] = await Promise.all([startTestService({ DATABASE_URL: db.url }), startTestService({ DATABASE_URL: db.url, LISTEN_RETRY_MS: '3600000' })]);
  });
  after(async () => {
    await Promise.all([a.close(), b.close()]);
    await db.drop();
  });

  /** A provider_a agent answering inbound calls on a number of its own (made on A), with its credentials. */
  async function inboundAgent(tn: Tenant) {
    const token = randomBytes(16).toString('hex');
    const sid = `AC${randomBytes(16).toString('hex')}`;
    const number = sandboxNumber();
    const agentId = await createPhoneAgent(a, tn, 'provider_a', { provider_a_config: { account_sid: sid, auth_token: token, phone_number: number } });
    assert.equal((await a.http.post(`/api/v1/agents/${agentId}/telephony/provider_a/inbound`).set(bearer(tn.apiKey))).status, 200);
    // The writes above are notified to B after their commits: an entry B kept before a notification
    // arrived would be dropped by it (rightly), so B must have had them all before the test reads.
    await caughtUp(b);
    return { agentId, token, sid, number };
  }

  /**
   * Resolves once `s` has handled every cache notification committed before the call: a marker is
   * notified last, and PostgreSQL delivers notifications in the order their transactions committed.
   */
  async function caughtUp(s: TestService) {
    const marker = randomBytes(8).toString('hex');
    const cache = s.service.caches.of<never>('test_barrier');
    const invalidate = cache.invalidate;
    const seen = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the marker notification never reached the instance')), 10_000);
      cache.invalidate = (key: string) => {
        if (key !== marker) return invalidate.call(cache, key);
        clearTimeout(timer);
        resolve();
      };
    });
    try {
      await a.service.db.knex.raw('select pg_notify(?, ?)', [CACHE_CHANNEL, `test_barrier ${marker}`]);
      await seen;
    } finally {
      cache.invalidate = invalidate;
    }
  }

  /** An inbound call to `number`, announced to `s` by the carrier's signed voice webhook: its id and CallSid. */
  async function inboundCall(s: TestService, agent: { token: string; sid: string; number: string }) {
    const callSid = `CA${randomBytes(16).toString('hex')}`;
    const params = { CallSid: callSid, AccountSid: agent.sid, From: '+14155550199', To: agent.number, CallStatus: 'ringing', Direction: 'inbound' };
    const path = '/telephony/provider_a/voice';
    const res = await s.http
      .post(path)
      .type('form')
      .set('X-Twilio-Signature', twilioSignature(agent.token, `${s.url}${path}`, params))
      .send(formBody(params));
    assert.equal(res.status, 200, res.text);
    return { callId: /name="call_id" value="([^"]+)"/.exec(res.text)![1], callSid };
  }

  /** A `ringing` status callback to `s` signed with `token`; its HTTP status (the signature is checked with the agent `s` finds). */
  async function statusCallback(s: TestService, call: { callId: string; callSid: string }, sid: string, token: string): Promise<number> {
    const path = `/telephony/provider_a/status?call_id=${call.callId}`;
    const params = { CallSid: call.callSid, AccountSid: sid, CallStatus: 'ringing', SequenceNumber: '1' };
    const res = await s.http
      .post(path)
      .type('form')
      .set('X-Twilio-Signature', twilioSignature(token, `${s.url}${path}`, params))
      .send(formBody(params));
    return res.status;
  }

  it("B keeps the agent its carrier callbacks are verified with, and follows A's rotation of its auth token", async () => {
    const tn = await tenant(a);
    const agent = await inboundAgent(tn);
    const call = await inboundCall(b, agent);
    assert.equal(await statusCallback(b, call, agent.sid, agent.token), 204);
    const kept = countStatements(b.service.db.knex, READS);
    assert.equal(await statusCallback(b, call, agent.sid, agent.token), 204);
    kept.stop();
    assert.equal(kept.counts.agent, 0, 'the second callback found the agent in memory');

    const rotated = randomBytes(16).toString('hex');
    const patched = await a.http
      .patch(`/api/v1/agents/${agent.agentId}`)
      .set(bearer(tn.apiKey))
      .send({ provider_a_config: { auth_token: rotated } });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    await waitFor(async () => (await statusCallback(b, call, agent.sid, rotated)) === 204, 5000, 'B to take the rotated token');
    assert.equal(await statusCallback(b, call, agent.sid, agent.token), 403, 'the old token no longer signs');
    assert.ok(!b.logs.join('').includes(rotated) && !b.logs.join('').includes(agent.token), 'no credential is logged');

    // Another workspace asking for the kept agent is told it is not its own, as before.
    const other = await tenant(a);
    assert.equal(await b.service.agents.runtimeOf(other.workspaceId, agent.agentId), 'other_workspace');
    assert.equal(await b.service.agents.findForRuntime(other.workspaceId, agent.agentId), null);
  });

  it("B's answer to whether a workspace's webhooks list call.status_changed follows registrations, changes and deletions on A, and raw SQL", async () => {
    const tn = await tenant(a);
    const listens = () => b.service.events.listens(tn.workspaceId, 'call.status_changed');
    const becomes = (want: boolean, what: string) => waitFor(async () => (await listens()) === want, 5000, what);
    assert.equal(await listens(), false);
    const kept = countStatements(b.service.db.knex, READS);
    assert.equal(await listens(), false);
    kept.stop();
    assert.equal(kept.counts.kinds, 0, 'the second answer came from memory');

    const registered = await a.http
      .post('/api/v1/webhooks')
      .set(bearer(tn.apiKey))
      .send({ url: 'http://127.0.0.1:9/hooks/live', events: ['call.status_changed'] });
    assert.equal(registered.status, 201, JSON.stringify(registered.body));
    await becomes(true, 'B to see the registration');
    const deleted = await a.http.delete(`/api/v1/webhooks/${registered.body.webhook_id}`).set(bearer(tn.apiKey));
    assert.equal(deleted.status, 200);
    await becomes(false, 'B to see the deletion');

    // A write that no code of ours makes: the trigger tells B all the same.
    await a.service.db.knex('webhooks').insert({
      id: `whk_${randomBytes(8).toString('hex')}`,
      workspace_id: tn.workspaceId,
      url: 'http://127.0.0.1:9/raw',
      url_key: 'raw',
      events: ['call.status_changed'],
    });
    await becomes(true, 'B to see a row inserted by raw SQL');
  });

  it("a workspace's cascading delete drops B's entries of its agents and webhooks", async () => {
    const tn = await tenant(a);
    const agent = await inboundAgent(tn);
    const registered = await a.http
      .post('/api/v1/webhooks')
      .set(bearer(tn.apiKey))
      .send({ url: 'http://127.0.0.1:9/hooks/live', events: ['call.status_changed'] });
    assert.equal(registered.status, 201);
    await waitFor(async () => b.service.events.listens(tn.workspaceId, 'call.status_changed'), 5000, 'B to see the registration');
    assert.ok(await b.service.agents.findForRuntime(tn.workspaceId, agent.agentId));
    await a.service.db.knex('workspaces').where({ id: tn.workspaceId }).delete();
    await waitFor(async () => (await b.service.agents.findForRuntime(tn.workspaceId, agent.agentId)) === null, 5000, 'B to see the agent gone');
    await waitFor(async () => !(await b.service.events.listens(tn.workspaceId, 'call.status_changed')), 5000, 'B to see the webhook gone');
  });

  it('a dropped LISTEN connection: nothing kept is used while it is down, and it comes back empty', async () => {
    const tn = await tenant(a);
    const agent = await inboundAgent(tn);
    const name = async () => (await b.service.agents.findForRuntime(tn.workspaceId, agent.agentId))!.name;
    assert.equal(await name(), 'Receptionist');
    const kept = countStatements(b.service.db.knex, READS);
    assert.equal(await name(), 'Receptionist');
    kept.stop();
    assert.equal(kept.counts.agent, 0, 'B keeps the agent');

    // Both instances' LISTEN connections are cut; while B's is down its cache is not used.
    const knex = a.service.db.knex;
    const dbName = new URL(a.service.db.url).pathname.slice(1);
    const listeners = () =>
      knex('pg_stat_activity')
        .where({ datname: dbName, application_name: 'vas-listen' })
        .whereLike('query', '%listen cache_invalidations%')
        .pluck('pid') as Promise<number[]>;
    const cut = await listeners();
    assert.equal(cut.length, 2, 'one LISTEN connection per instance');
    const all = await knex('pg_stat_activity').where({ datname: dbName, application_name: 'vas-listen' }).pluck('pid');
    assert.equal(all.length, 2, 'one for every channel: call signals, live events, webhooks, caches');
    await knex.raw('select pg_terminate_backend(pid) from unnest(?::int[]) as pid', [cut]);
    await waitFor(async () => !b.service.caches.listening, 5000, 'B to notice its LISTEN connection is gone');
    // Committed while B is not listening (it tries again only when told, below): B is never notified of it.
    await knex('agents').where({ id: agent.agentId }).update({ name: 'Changed while B was not listening' });
    assert.equal(b.service.caches.listening, false, 'the change was made while B was not listening');
    const down = countStatements(b.service.db.knex, READS);
    assert.equal(await name(), 'Changed while B was not listening', 'while down, B reads the database');
    down.stop();
    assert.equal(down.counts.agent, 1);
    void b.service.listener.start(); // what its retry timer does after LISTEN_RETRY_MS
    await waitFor(async () => b.service.caches.listening, 10_000, 'B to listen again');
    // A listens again by its own timer (LISTEN_RETRY_MS, 2 s).
    const back = await waitFor(
      async () => {
        const pids = await listeners();
        return pids.length === 2 ? pids : null;
      },
      20_000,
      'both instances to listen again',
    );
    assert.ok(
      back.every((pid) => !cut.includes(pid)),
      'new connections',
    );
    assert.equal(await name(), 'Changed while B was not listening', 'the entry kept before the drop was not used again');
  });
});
