/**
 * A session from start to call.completed: the conversation record (transcript with roles model/user and
 * Unix-second timestamps, duration, counts, latency, analysis), usage metered against credit, the
 * signed call.completed to registered webhooks; the agent ending the conversation (session_ended, the
 * socket left open), barge-in, tool calls through the ToolRunner, upstream_unavailable -> 1011, and
 * sessions closed gracefully on shutdown.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import http from 'node:http';
import { FILLER } from '../../src/realtime/bridge.js';
import type { AddressInfo } from 'node:net';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { bearer, connect, createAgent, fixture, mintSession, operator, waitFor, type Client } from '../helpers/realtime.js';

const FAST = {
  VOICE_SANDBOX_SPEED: '20',
  VOICE_SANDBOX_MS_PER_CHAR: '5',
  // Longer than the pauses between the fixture's words, so one clip is one turn.
  VOICE_SANDBOX_END_OF_TURN_MS: '600',
  VOICE_RETRY_MAX: '1',
  VOICE_RETRY_BASE_MS: '20',
  VOICE_CONNECT_TIMEOUT_MS: '1000',
  REALTIME_TOOL_TIMEOUT_MS: '400',
  REALTIME_TOOL_FILLER_MS: '150',
};

let t: TestService;
let receiver: Receiver;
before(async () => {
  t = await startTestService(FAST);
  receiver = await startReceiver();
});
after(async () => {
  await receiver.close();
  await t.close();
});

const b64 = (s: string) => Buffer.from(s).toString('base64');

async function withWebhook(tn: Tenant): Promise<string> {
  const res = await t.http.post('/api/v1/webhooks').set(bearer(tn.apiKey)).send({ url: receiver.url, events: ['call.completed'] });
  assert.ok(res.status === 201 || res.status === 200, JSON.stringify(res.body));
  const secret = await t.http.get('/api/v1/webhooks/secret').set(bearer(tn.apiKey));
  return secret.body.webhook_secret as string;
}

async function eventFor(conversationId: string): Promise<{ body: Record<string, any>; raw: Buffer; headers: http.IncomingHttpHeaders }> {
  const found = await waitFor(async () => receiver.requests.find((r) => r.rawBody.toString().includes(conversationId)), 8000, `call.completed of ${conversationId}`);
  return { body: JSON.parse(found.rawBody.toString()), raw: found.rawBody, headers: found.headers };
}

async function credit(workspaceId: string): Promise<number> {
  return (await t.http.get(`/admin/v1/workspaces/${workspaceId}`).set(operator)).body.credit_balance_cents;
}

async function open(tn: Tenant, agentId: string, source: string): Promise<{ c: Client; sessionId: string }> {
  const c = connect((await mintSession(t, tn, agentId, source)).ws_url);
  const started = await c.next('session_started');
  return { c, sessionId: String(started.session_id) };
}

describe('a finished session', () => {
  it('text session: record, call.completed (provider web, nulls, conv_ id, created_at = start), signed', async () => {
    const tn = await tenant(t);
    const secret = await withWebhook(tn);
    const agentId = await createAgent(t, tn, { instruction: 'You are the receptionist of Acme Dental.', first_message: 'Hi! Ask me anything.' });
    const before = Date.now() / 1000;
    const { c, sessionId } = await open(tn, agentId, 'text');
    const opening = await c.next('text');
    assert.equal(opening.text, 'Hi! Ask me anything.');
    await c.next('turn_complete');
    c.sendFrame('text/plain', b64('What are your opening hours on Saturday?'));
    const reply = await c.next('text');
    assert.match(String(reply.text), /Saturday/);
    await c.next('turn_complete');
    await c.close();

    const { body: e, raw, headers } = await eventFor(sessionId);
    assert.equal(headers['x-webhook-signature'], createHmac('sha256', secret).update(raw).digest('hex'));
    assert.equal(e.event, 'call.completed');
    assert.deepEqual([e.provider, e.call_id, e.call_sid, e.to_number, e.conversation_id, e.agent_id, e.status], ['web', null, null, null, sessionId, agentId, 'completed']);
    assert.equal(e.first_message, 'Hi! Ask me anything.');
    assert.equal(e.first_message_delivered, true);
    assert.deepEqual(e.transcript.map((x: { role: string }) => x.role), ['model', 'user', 'model']);
    assert.equal(e.transcript[1].text, 'What are your opening hours on Saturday?');
    for (const x of e.transcript) assert.ok(x.timestamp >= before - 1 && x.timestamp <= Date.now() / 1000 + 1, `Unix seconds: ${x.timestamp}`);
    assert.equal(e.message_count, 3);
    assert.equal(e.interruption_count, 0);
    assert.ok(e.latency_avg_ms > 0, `latency ${e.latency_avg_ms}`);
    assert.ok(Number.isInteger(e.duration));
    assert.ok(Math.abs(Date.parse(e.created_at) / 1000 - before) < 2);
    assert.ok(!('tool_calls' in e));
    for (const k of ['summary', 'sentiment', 'goal_met', 'needs_review', 'unanswered_questions']) assert.ok(k in e, k);

    const row = await t.service.realtime.store.getConversation(sessionId);
    assert.ok(row);
    assert.deepEqual([row.status, row.message_count, row.source, row.user_id, row.workspace_id], ['completed', 3, 'text', 'visitor-1', tn.workspaceId]);
    assert.equal(row.started_at.toISOString(), e.created_at);
    assert.equal(row.summary, e.summary);
    // Text sessions are not metered by default.
    assert.equal(await credit(tn.workspaceId), 1000);
  });

  it('voice session: spoken turn transcribed, usage metered against credit, slot released', async () => {
    const tn = await tenant(t);
    await withWebhook(tn);
    const agentId = await createAgent(t, tn);
    const { c, sessionId } = await open(tn, agentId, 'voice');
    await c.next('turn_complete');
    const speech = fixture('audio/caller-hello.pcm16le-16k.raw');
    const silence = fixture('audio/silence-1s.pcm16le-16k.raw');
    for (const clip of [speech, silence]) for (let i = 0; i < clip.length; i += 640) c.sendFrame('audio/pcm', clip.subarray(i, i + 640));
    await c.next((m) => m.type === 'transcript' && m.role === 'user' && m.final === true);
    await c.next((m) => m.type === 'transcript' && m.role === 'model' && m.final === true);
    await c.next('turn_complete');
    await c.close();
    const { body: e } = await eventFor(sessionId);
    assert.deepEqual(e.transcript.map((x: { role: string }) => x.role), ['model', 'user', 'model'], JSON.stringify(e.transcript));
    assert.match(e.transcript[1].text, /speech/);
    const row = await t.service.realtime.store.getConversation(sessionId);
    assert.equal(row!.cost_cents, 10, 'one started minute at REALTIME_CENTS_PER_MINUTE');
    assert.equal(await credit(tn.workspaceId), 990);
    const [{ count }] = await t.service.db.knex('session_leases').where({ workspace_id: tn.workspaceId }).count<{ count: string }[]>('* as count');
    assert.equal(Number(count), 0);
  });
});

describe('during a session', () => {
  it('the agent ends the conversation: session_ended, the socket stays open, later frames are ignored; the client closes', async () => {
    const tn = await tenant(t);
    const agentId = await createAgent(t, tn, { can_end_conversation: true });
    const { c, sessionId } = await open(tn, agentId, 'voice');
    await c.next('turn_complete');
    c.sendFrame('text/plain', b64('Thanks, goodbye!'));
    const ended = await c.next('session_ended');
    assert.equal(ended.reason, 'agent_ended');
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(c.ws.readyState, c.ws.OPEN, 'the server does not close the socket');
    const count = c.messages.length;
    c.ws.send('{not json');
    c.sendFrame('text/plain', b64('hello again'));
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(c.messages.length, count, 'frames after session_ended are ignored');
    assert.deepEqual(await c.close(), { code: 1000, reason: '' });
    const row = await waitFor(() => t.service.realtime.store.getConversation(sessionId), 5000, 'record');
    assert.equal(row.status, 'completed');
    assert.match(row.transcript.at(-1)!.text, /Goodbye/);
  });

  it('a text session is never ended by the agent', async () => {
    const tn = await tenant(t);
    const agentId = await createAgent(t, tn, { can_end_conversation: true });
    const { c } = await open(tn, agentId, 'text');
    await c.next('turn_complete');
    c.sendFrame('text/plain', b64('goodbye'));
    await c.next('turn_complete');
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(c.messages.filter((m) => m.type === 'session_ended').length, 0);
    await c.close();
  });

  it('barge-in: interrupted is sent and counted', async () => {
    const tn = await tenant(t);
    const agentId = await createAgent(t, tn, { first_message: 'Welcome to Acme Dental. '.repeat(30) });
    const { c, sessionId } = await open(tn, agentId, 'voice');
    await c.next('audio');
    const speech = fixture('audio/caller-question.pcm16le-16k.raw');
    for (let i = 0; i < speech.length; i += 640) c.sendFrame('audio/pcm', speech.subarray(i, i + 640));
    await c.next('interrupted');
    await c.close();
    const row = await waitFor(() => t.service.realtime.store.getConversation(sessionId), 5000, 'record');
    assert.equal(row.interruption_count, 1);
    assert.equal(row.first_message_delivered, false);
  });

  it('tool calls run through the ToolRunner: tool_call messages, results and durations in the record and event', async () => {
    const tn = await tenant(t);
    await withWebhook(tn);
    const toolServer = http.createServer((req, res) => {
      const slow = req.url?.includes('slow');
      setTimeout(() => res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ found: true, time: '10:00' })), slow ? 1500 : 10);
    });
    await new Promise<void>((r) => toolServer.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(toolServer.address() as AddressInfo).port}`;
    try {
      const agentId = await createAgent(t, tn);
      for (const [name, path] of [['lookup_appointment', '/fast'], ['slow_lookup', '/slow']]) {
        const tool = await t.http.post('/api/v1/tools').set(bearer(tn.apiKey)).send({ name, description: `Looks up an appointment (${name}).`, url: `${base}${path}`, method: 'POST' });
        assert.equal(tool.status, 201, JSON.stringify(tool.body));
        assert.equal((await t.http.put(`/api/v1/agents/${agentId}/tools/${tool.body.tool_id ?? tool.body.id}`).set(bearer(tn.apiKey))).status, 200);
      }
      const { c, sessionId } = await open(tn, agentId, 'voice');
      await c.next('turn_complete');
      c.sendFrame('text/plain', b64('Please lookup_appointment for Ada'));
      assert.deepEqual(await c.next('tool_call'), { type: 'tool_call', name: 'lookup_appointment', status: 'started' });
      assert.deepEqual(await c.next('tool_call'), { type: 'tool_call', name: 'lookup_appointment', status: 'completed' });
      const said = await c.next((m) => m.type === 'transcript' && m.role === 'model' && m.final === true);
      assert.match(String(said.text), /lookup_appointment returned/);
      await c.next('turn_complete');
      c.sendFrame('text/plain', b64('Now slow_lookup please'));
      assert.deepEqual(await c.next('tool_call'), { type: 'tool_call', name: 'slow_lookup', status: 'started' });
      const filler = await c.next((m) => m.type === 'transcript' && m.role === 'model' && m.final === true, 3000);
      assert.equal(filler.text, FILLER, 'a slow tool gets a spoken filler while it runs');
      assert.deepEqual(await c.next('tool_call', 3000), { type: 'tool_call', name: 'slow_lookup', status: 'failed' });
      await c.next('turn_complete');
      await c.close();
      const { body: e } = await eventFor(sessionId);
      assert.equal(e.tool_calls.length, 2);
      const [fast, slow] = e.tool_calls;
      assert.deepEqual([fast.name, fast.source, fast.ok, fast.error, fast.result], ['lookup_appointment', 'http', true, null, { found: true, time: '10:00' }]);
      assert.ok(Number.isInteger(fast.duration_ms) && fast.started_at > 1e9);
      assert.deepEqual([slow.name, slow.ok], ['slow_lookup', false]);
      assert.ok(slow.duration_ms >= 350 && slow.duration_ms < 1500, `timed out at REALTIME_TOOL_TIMEOUT_MS: ${slow.duration_ms}`);
      assert.equal(e.needs_review, true, 'a failing tool needs review');
      const row = await t.service.realtime.store.getConversation(sessionId);
      assert.deepEqual(row!.tool_calls, e.tool_calls);
    } finally {
      toolServer.closeAllConnections();
      await new Promise<void>((r) => toolServer.close(() => r()));
    }
  });

  it('upstream_unavailable after the retries: error message, then close 1011; recorded as failed', async () => {
    const tn = await tenant(t);
    const agentId = await createAgent(t, tn);
    const { c, sessionId } = await open(tn, agentId, 'voice');
    await c.next('turn_complete');
    const sandbox = t.service.voice.sandbox!;
    sandbox.setUnavailable(true);
    try {
      sandbox.dropConnections();
      const err = await c.next('error');
      assert.equal(err.code, 'upstream_unavailable');
      assert.deepEqual(await c.closed, { code: 1011, reason: '' });
    } finally {
      sandbox.setUnavailable(false);
    }
    const row = await waitFor(() => t.service.realtime.store.getConversation(sessionId), 5000, 'record');
    assert.equal(row.status, 'failed');
  });
});

describe('forward_failed', () => {
  it('a message the voice session cannot take while it reconnects gets forward_failed; the session stays open and a resend works', async () => {
    // A queue of two messages, and retries slow enough that the session is still reconnecting.
    const s = await startTestService({ ...FAST, VOICE_RECONNECT_QUEUE_LIMIT: '2', VOICE_RETRY_MAX: '6', VOICE_RETRY_BASE_MS: '150' });
    try {
      const tn = await tenant(s);
      const agentId = await createAgent(s, tn);
      const c = connect((await mintSession(s, tn, agentId, 'voice')).ws_url);
      const sessionId = String((await c.next('session_started')).session_id);
      await c.next('turn_complete');
      const sandbox = s.service.voice.sandbox!;
      sandbox.setUnavailable(true);
      sandbox.dropConnections();
      await new Promise((r) => setTimeout(r, 50));
      c.sendFrame('text/plain', b64('first question'));
      c.sendFrame('text/plain', b64('second question'));
      c.sendFrame('text/plain', b64('third question'));
      const err = await c.next('error');
      assert.equal(err.code, 'forward_failed');
      assert.match(String(err.error), /send it again/);
      sandbox.setUnavailable(false);
      // The queued turns reach the agent after the reconnection; the refused one can be sent again.
      await c.next((m) => m.type === 'transcript' && m.role === 'model' && m.final === true, 5000);
      c.sendFrame('text/plain', b64('third question'));
      const heard = await c.next((m) => m.type === 'transcript' && m.role === 'user' && m.text === 'third question', 5000);
      assert.equal(heard.final, true);
      await c.close();
      const row = await waitFor(() => s.service.realtime.store.getConversation(sessionId), 5000, 'record');
      const said = (row.transcript as Array<{ role: string; text: string }>).filter((x) => x.role === 'user').map((x) => x.text);
      assert.deepEqual(said, ['first question', 'second question', 'third question'], 'the refused message was not passed on; its resend was');
    } finally {
      await s.close();
    }
  });
});

describe('shutdown', () => {
  it('closes live sessions with 1001 and finalises them before the service stops', async () => {
    const s = await startTestService(FAST);
    const tn = await tenant(s);
    const agentId = await createAgent(s, tn);
    const c = connect((await mintSession(s, tn, agentId, 'text')).ws_url);
    const started = await c.next('session_started');
    const url = s.service.db.url;
    const closing = s.service.close();
    assert.deepEqual(await c.closed, { code: 1001, reason: 'Server shutting down' });
    await closing;
    // The record was written before the database closed (read it through a fresh connection).
    const { createKnex } = await import('../../src/db/database.js');
    const knex = createKnex(url);
    try {
      const row = await knex('realtime_conversations').where({ id: started.session_id }).first();
      assert.equal(row?.status, 'completed');
      assert.equal(await knex('session_leases').where({ id: started.session_id }).first(), undefined);
    } finally {
      await knex.destroy();
      await s.close().catch(() => undefined);
    }
  });
});
