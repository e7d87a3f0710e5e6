/**
 * Web sessions, live events, batch webhooks and inbound calls carry and keep the agent version
 * (issue 35), through the real service, real `ws` clients, the sandbox voice service (whose replies
 * name the role of the instruction it was given: `As <role>, I heard: "..."`), the sandbox carriers and
 * PostgreSQL:
 * - a session token names a version or gets the one published when it is made (`RealtimeSession.agent_version`);
 *   the session runs exactly that version (first message and replies), though another is published
 *   between the token and the connection and again during the conversation;
 * - `session_started`, both of the session's `status` events, its record (read and listed) and its
 *   `call.completed` carry the version, and so does every `status` event of a phone call;
 * - an unknown version is 404 `agent_version_not_found` (param `agent_version`), a malformed one 422,
 *   another workspace's agent 403, and nothing is stored; `source` is checked against the version the
 *   session is to run;
 * - `batch.completed` carries the batch's version;
 * - inbound calls run the version published when each call comes in;
 * - two instances: a publish on A counts at once for a token made on B, whose kept agent is still the
 *   old version (its NOTIFY held back);
 * - migration 047 adds the three columns (positive or null) and is undone cleanly.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { bearer, connect, createAgent, expectRefusal, waitFor, type Client } from '../helpers/realtime.js';
import { openSse, type SseStream } from '../helpers/sse.js';
import { FAST_CALLS, createPhoneAgent, placeCall, providerConfig, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { createBatch, waitForBatch } from '../helpers/batches.js';
import { migrationDatabase, redoAll, undoFrom } from '../helpers/migrations.js';
import { publishUnheard } from '../helpers/agent-versions.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';

const ENV = { ...FAST_CALLS, VOICE_SANDBOX_SPEED: '20', VOICE_SANDBOX_MS_PER_CHAR: '5' };

let t: TestService;
let tn: Tenant;
let other: Tenant;
let receiver: Receiver;
let sandbox: SandboxCarriers;
before(async () => {
  t = await startTestService(ENV);
  tn = await tenant(t);
  other = await tenant(t, 'Other Co');
  receiver = await startReceiver();
  sandbox = t.service.sandbox.carriers!.server;
  const hook = await t.http
    .post('/api/v1/webhooks')
    .set(bearer(tn.apiKey))
    .send({ url: receiver.url, events: ['call.completed'] });
  assert.ok(hook.status === 201 || hook.status === 200, hook.text);
});
after(async () => {
  await t.close();
  await receiver.close();
});

const instruction = (n: number) => `You are version ${n}.`;
const firstMessage = (n: number) => `Hello from version ${n}.`;
const b64 = (s: string) => Buffer.from(s).toString('base64');

/** An agent with auto_publish off: version 1 published, version 2 a draft. */
async function twoVersions(svc: TestService = t, body: Record<string, unknown> = {}): Promise<string> {
  const agentId = await createAgent(svc, tn, { instruction: instruction(1), first_message: firstMessage(1), auto_publish: false, ...body });
  const draft = await svc.http
    .patch(`/api/v1/agents/${agentId}`)
    .set(bearer(tn.apiKey))
    .send({ instruction: instruction(2), first_message: firstMessage(2) });
  assert.equal(draft.status, 200, draft.text);
  assert.deepEqual([draft.body.draft_version, draft.body.published_version], [2, 1]);
  return agentId;
}

/** Writes the agent's next version `n` and publishes it (auto_publish turned on). */
async function publishNext(agentId: string, n: number, svc: TestService = t): Promise<void> {
  const res = await svc.http
    .patch(`/api/v1/agents/${agentId}`)
    .set(bearer(tn.apiKey))
    .send({ instruction: instruction(n), first_message: firstMessage(n), auto_publish: true });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.published_version, n);
}

function mint(body: Record<string, unknown>, key = tn.apiKey, svc: TestService = t) {
  return svc.http
    .post('/api/v1/realtime/sessions')
    .set(bearer(key))
    .send({ user_id: 'visitor-1', source: 'text', ...body });
}

/** Connects with the token; the session's first server message, then its spoken first message. */
async function start(wsUrl: string): Promise<{ c: Client; sessionId: string; started: Record<string, unknown>; opening: string }> {
  const c = connect(wsUrl);
  const started = await c.next('session_started');
  const opening = String((await c.next('text')).text);
  await c.next('turn_complete');
  return { c, sessionId: String(started.session_id), started, opening };
}

/** A typed turn and the agent's reply. */
async function say(c: Client, text: string): Promise<string> {
  c.sendFrame('text/plain', b64(text));
  const reply = String((await c.next('text')).text);
  await c.next('turn_complete');
  return reply;
}

const completedEvent = (conversationId: string) =>
  waitFor(
    async () =>
      receiver.requests.map((r) => JSON.parse(r.rawBody.toString())).find((e) => e.event === 'call.completed' && e.conversation_id === conversationId),
    10_000,
    `call.completed of ${conversationId}`,
  );

const statusEvents = (s: SseStream) => s.messages.filter((m) => m.event === 'status').map((m) => [m.data.status, m.data.agent_version]);

/** Everything a refused session creation could have left behind. */
async function stored(workspaceId: string) {
  const count = async (table: string) => Number((await t.service.db.knex(table).where({ workspace_id: workspaceId }).count({ n: '*' }))[0].n);
  return { tokens: await count('realtime_tokens'), live: await count('realtime_live_sessions'), records: await count('realtime_conversations') };
}

describe('web sessions', () => {
  it('a session pinned to an old version runs it while newer ones are published; everything it reports carries it', async () => {
    const agentId = await twoVersions();
    assert.equal((await t.http.post(`/api/v1/agents/${agentId}/publish`).set(bearer(tn.apiKey)).send({})).body.published_version, 2);

    const token = await mint({ agent_id: agentId, agent_version: 1 });
    assert.equal(token.status, 201, token.text);
    assert.equal(token.body.agent_version, 1);
    // Published after the token and before the connection.
    await publishNext(agentId, 3);
    const { c, sessionId, started, opening } = await start(token.body.ws_url);
    assert.deepEqual([started.agent_id, started.agent_version], [agentId, 1]);
    assert.equal(opening, firstMessage(1));
    const sse = await openSse(`${t.url}/api/v1/realtime/conversations/${sessionId}/events`, bearer(tn.apiKey));
    assert.equal(sse.status, 200);
    assert.equal(await say(c, 'Are you there?'), 'As version 1, I heard: "Are you there?".');
    // Published during the conversation: the next reply is still version 1's.
    await publishNext(agentId, 4);
    assert.equal(await say(c, 'Still there?'), 'As version 1, I heard: "Still there?".');
    await c.close();

    await sse.ended;
    assert.deepEqual(statusEvents(sse), [
      ['in_progress', 1],
      ['ended', 1],
    ]);
    const event = await completedEvent(sessionId);
    assert.deepEqual([event.provider, event.agent_version], ['web', 1]);
    const record = await t.http.get(`/api/v1/realtime/conversations/${sessionId}`).set(bearer(tn.apiKey));
    assert.equal(record.status, 200, record.text);
    assert.equal(record.body.agent_version, 1);
    assert.deepEqual(
      record.body.transcript.map((e: { text: string }) => e.text),
      event.transcript.map((e: { text: string }) => e.text),
    );
    const listed = await t.http.get('/api/v1/realtime/conversations').query({ agent_id: agentId }).set(bearer(tn.apiKey));
    assert.deepEqual(
      listed.body.data.map((r: { conversation_id: string; agent_version: number }) => [r.conversation_id, r.agent_version]),
      [[sessionId, 1]],
    );
    const row = await t.service.db.knex('realtime_conversations').where({ id: sessionId }).first('agent_version');
    assert.equal(row.agent_version, 1);
  });

  it('a token made before a publish runs the version published when it was made; one made after runs the new one', async () => {
    const agentId = await createAgent(t, tn, { instruction: instruction(1), first_message: firstMessage(1) });
    const before = await mint({ agent_id: agentId });
    assert.equal(before.status, 201, before.text);
    assert.equal(before.body.agent_version, 1);
    await publishNext(agentId, 2);
    const after = await mint({ agent_id: agentId });
    assert.equal(after.body.agent_version, 2);

    const old = await start(before.body.ws_url);
    const fresh = await start(after.body.ws_url);
    assert.deepEqual([old.started.agent_version, old.opening], [1, firstMessage(1)]);
    assert.deepEqual([fresh.started.agent_version, fresh.opening], [2, firstMessage(2)]);
    assert.equal(await say(old.c, 'Hello?'), 'As version 1, I heard: "Hello?".');
    assert.equal(await say(fresh.c, 'Hello?'), 'As version 2, I heard: "Hello?".');
    await Promise.all([old.c.close(), fresh.c.close()]);
    assert.equal((await completedEvent(old.sessionId)).agent_version, 1);
    assert.equal((await completedEvent(fresh.sessionId)).agent_version, 2);
  });

  it("the source is checked against the session's version, and turning it off in a later published version counts at once", async () => {
    const agentId = await createAgent(t, tn, { instruction: instruction(1), auto_publish: false, realtime: { enable_webcam: false } });
    const draft = await t.http
      .patch(`/api/v1/agents/${agentId}`)
      .set(bearer(tn.apiKey))
      .send({ realtime: { enable_webcam: true } });
    assert.equal(draft.status, 200, draft.text);
    const published = await mint({ agent_id: agentId, source: 'camera' });
    assert.equal(published.status, 403, published.text);
    assert.deepEqual([published.body.error.code, published.body.error.param], ['webcam_disabled', 'source']);
    const named = await mint({ agent_id: agentId, source: 'camera', agent_version: 1 });
    assert.equal(named.status, 403, named.text);
    // A draft newer than the published version keeps its own setting: it can be tried before it is published.
    const pinned = await mint({ agent_id: agentId, source: 'camera', agent_version: 2 });
    assert.equal(pinned.status, 201, pinned.text);
    assert.equal(pinned.body.agent_version, 2);
    const c = connect(pinned.body.ws_url);
    assert.equal((await c.next('session_started')).agent_version, 2);
    await c.close();

    // Version 2 published with the camera on; a token pinned to it, then version 3 turns the camera off.
    assert.equal((await t.http.post(`/api/v1/agents/${agentId}/publish`).set(bearer(tn.apiKey)).send({})).status, 200);
    const before = await mint({ agent_id: agentId, source: 'camera', agent_version: 2 });
    assert.equal(before.status, 201, before.text);
    const off = await t.http
      .patch(`/api/v1/agents/${agentId}`)
      .set(bearer(tn.apiKey))
      .send({ realtime: { enable_webcam: false }, auto_publish: true });
    assert.equal(off.body.published_version, 3, off.text);
    await expectRefusal(before.body.ws_url, 4003, 'Camera is not enabled for this agent');
    const after = await mint({ agent_id: agentId, source: 'camera', agent_version: 2 });
    assert.equal(after.status, 403, after.text);
    assert.equal(after.body.error.code, 'webcam_disabled');
    // Voice sessions of version 2 are not affected.
    const voice = await mint({ agent_id: agentId, source: 'voice', agent_version: 2 });
    assert.equal(voice.status, 201, voice.text);
  });

  it('bad input: an unknown version 404 naming agent_version, a malformed one 422, the agent checked first; nothing stored', async () => {
    const agentId = await twoVersions();
    const before = await stored(tn.workspaceId);
    for (const agent_version of [3, 2147483647]) {
      for (const source of ['text', 'camera']) {
        const res = await mint({ agent_id: agentId, agent_version, source });
        assert.equal(res.status, 404, res.text);
        assert.deepEqual(
          [res.body.error.type, res.body.error.code, res.body.error.param],
          ['not_found_error', 'agent_version_not_found', 'agent_version'],
          `${agent_version} ${source}`,
        );
        assert.ok(res.body.error.message.includes(String(agent_version)), res.body.error.message);
      }
    }
    // Not a version number: step 5 refuses it, whatever the published version allows (its camera is off).
    for (const agent_version of [0, -1, '1', 1.5, null, 2147483648, 'two']) {
      for (const source of ['text', 'camera']) {
        const res = await mint({ agent_id: agentId, agent_version, source });
        assert.equal(res.status, 422, `${JSON.stringify(agent_version)} ${source}: ${res.text}`);
        assert.equal(res.body.error.param, 'agent_version', res.text);
      }
    }
    // The agent comes before its version: none is 404 agent_not_found, another workspace's is 403.
    const none = await mint({ agent_id: 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9K', agent_version: 3 });
    assert.equal(none.status, 404, none.text);
    assert.deepEqual([none.body.error.code, none.body.error.param], ['agent_not_found', 'agent_id']);
    const foreign = await mint({ agent_id: agentId, agent_version: 3 }, other.apiKey);
    assert.equal(foreign.status, 403, foreign.text);
    assert.deepEqual([foreign.body.error.code, foreign.body.error.param], ['forbidden', 'agent_id']);
    assert.deepEqual(await stored(tn.workspaceId), before);
    assert.deepEqual(await stored(other.workspaceId), { tokens: 0, live: 0, records: 0 });
  });
});

/** A phone number the sandbox answers, hears the agent's first message on, then hangs up. */
function listener(): string {
  const number = sandboxNumber();
  sandbox.setScript(number, [{ waitForAgent: true }, { hangup: true }]);
  return number;
}

describe('phone calls and batches', () => {
  it('every status event of a call carries the version it runs, though another one is published', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { instruction: instruction(1), first_message: firstMessage(1), auto_publish: false });
    const placed = await placeCall(t, tn, { agent_id: agentId, agent_version: 1, to_number: listener() });
    assert.equal(placed.status, 201, placed.text);
    const sse = await openSse(`${t.url}/api/v1/calls/${placed.body.call_id}/events`, bearer(tn.apiKey));
    assert.equal(sse.status, 200);
    await publishNext(agentId, 2);
    const done = await waitForCall(t, tn, placed.body.call_id);
    assert.deepEqual([done.status, done.agent_version, done.first_message], ['completed', 1, firstMessage(1)]);
    await sse.ended;
    const seen = statusEvents(sse);
    assert.ok(seen.some(([status]) => status === 'in_progress') && seen.at(-1)?.[0] === 'ended', JSON.stringify(seen));
    for (const [status, version] of seen) assert.equal(version, 1, `${status}: ${JSON.stringify(seen)}`);
  });

  it("batch.completed carries the batch's version: named, else the one published at its creation", async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { instruction: instruction(1), first_message: firstMessage(1), auto_publish: false });
    const draft = await t.http
      .patch(`/api/v1/agents/${agentId}`)
      .set(bearer(tn.apiKey))
      .send({ instruction: instruction(2), first_message: firstMessage(2) });
    assert.equal(draft.status, 200, draft.text);
    const named = await createBatch(t, tn, {
      agent_id: agentId,
      agent_version: 2,
      name: 'Named',
      recipients: [{ to_number: listener() }],
      webhook_url: receiver.url,
    });
    const plain = await createBatch(t, tn, { agent_id: agentId, name: 'Plain', recipients: [{ to_number: listener() }], webhook_url: receiver.url });
    assert.equal(named.status, 201, named.text);
    assert.equal(plain.status, 201, plain.text);
    for (const [batch, version] of [
      [named.body, 2],
      [plain.body, 1],
    ] as const) {
      const done = await waitForBatch(t, tn, batch.batch_id);
      const event = await waitFor(
        async () => receiver.requests.map((r) => JSON.parse(r.rawBody.toString())).find((e) => e.event === 'batch.completed' && e.batch_id === batch.batch_id),
        10_000,
        `batch.completed of ${batch.batch_id}`,
      );
      assert.deepEqual([event.status, event.agent_version, done.agent_version], ['completed', version, version], batch.name);
    }
  });
});

describe('inbound calls', () => {
  it('run the version published when each call comes in, never a draft', async () => {
    const number = sandboxNumber('5300');
    const agentId = await createPhoneAgent(t, tn, 'provider_a', {
      ...providerConfig('provider_a', number),
      instruction: instruction(1),
      first_message: firstMessage(1),
      auto_publish: false,
    });
    const on = await t.http.post(`/api/v1/agents/${agentId}/telephony/provider_a/inbound`).set(bearer(tn.apiKey));
    assert.equal(on.status, 200, on.text);
    const ring = async () => {
      const res = await t.http.post('/api/v1/sandbox/inbound-calls').set(bearer(tn.apiKey)).send({ to_number: number });
      assert.equal(res.status, 201, res.text);
      return waitForCall(t, tn, res.body.call_id);
    };
    // A draft after the published version does not answer calls.
    const draft = await t.http
      .patch(`/api/v1/agents/${agentId}`)
      .set(bearer(tn.apiKey))
      .send({ instruction: 'You are the draft.', first_message: 'Hello from the draft.' });
    assert.equal(draft.status, 200, draft.text);
    const published = draft.body.published_version as number;
    const first = await ring();
    assert.deepEqual([first.status, first.agent_version, first.transcript[0]?.text], ['completed', published, firstMessage(1)]);

    const now = await t.http.post(`/api/v1/agents/${agentId}/publish`).set(bearer(tn.apiKey)).send({});
    assert.equal(now.status, 200, now.text);
    const second = await ring();
    assert.deepEqual([second.status, second.agent_version, second.transcript[0]?.text], ['completed', draft.body.draft_version, 'Hello from the draft.']);
    const stored = await t.service.db.knex('calls').where({ id: second.call_id }).first('instruction');
    assert.equal(stored.instruction, 'You are the draft.');
  });
});

describe('two instances on one database', () => {
  let b: TestService;
  before(async () => {
    b = await startTestService({ ...ENV, DATABASE_URL: t.service.db.url });
  });
  after(() => b.close());

  it("a session token made on B right after a publish on A runs the new version, though B's kept agent is the old one", async () => {
    const agentId = await twoVersions();
    // B keeps version 1 and does not hear of the publish (its NOTIFY held back, as if not yet arrived).
    const release = await publishUnheard(t, b, tn, agentId);
    try {
      const token = await mint({ agent_id: agentId }, tn.apiKey, b);
      assert.equal(token.status, 201, token.text);
      assert.equal(token.body.agent_version, 2);
      const { c, sessionId, started, opening } = await start(token.body.ws_url);
      assert.deepEqual([started.agent_version, opening], [2, firstMessage(2)]);
      assert.equal(await say(c, 'Which one?'), 'As version 2, I heard: "Which one?".');
      await c.close();
      assert.equal((await completedEvent(sessionId)).agent_version, 2);
    } finally {
      release();
    }
  });
});

describe('migration 047', () => {
  const database = migrationDatabase();
  const TABLES = ['realtime_tokens', 'realtime_live_sessions', 'realtime_conversations'];

  it('adds agent_version (null for rows from before, never below 1) to tokens, live sessions and records; undone cleanly', async () => {
    const knex = database.knex();
    await undoFrom(knex, '047');
    for (const table of TABLES) assert.equal(await knex.schema.hasColumn(table, 'agent_version'), false, table);
    await redoAll(knex);
    for (const table of TABLES) {
      assert.equal(await knex.schema.hasColumn(table, 'agent_version'), true, table);
      const { rows } = await knex.raw(`select pg_get_constraintdef(oid) as def from pg_constraint where conname = ?`, [`${table}_agent_version_positive`]);
      assert.deepEqual(rows, [{ def: 'CHECK ((agent_version >= 1))' }], table);
    }
    await undoFrom(knex, '047');
    for (const table of TABLES) assert.equal(await knex.schema.hasColumn(table, 'agent_version'), false, table);
    await redoAll(knex);
  });
});
