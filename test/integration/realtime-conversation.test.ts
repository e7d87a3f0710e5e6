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
  // Room for a busy machine to run the fast tool well inside it; the slow tool never answers.
  REALTIME_TOOL_TIMEOUT_MS: '3000',
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
  const res = await t.http
    .post('/api/v1/webhooks')
    .set(bearer(tn.apiKey))
    .send({ url: receiver.url, events: ['call.completed'] });
  assert.ok(res.status === 201 || res.status === 200, JSON.stringify(res.body));
  const secret = await t.http.get('/api/v1/webhooks/secret').set(bearer(tn.apiKey));
  return secret.body.webhook_secret as string;
}

async function eventFor(conversationId: string): Promise<{ body: Record<string, any>; raw: Buffer; headers: http.IncomingHttpHeaders }> {
  const found = await waitFor(
    async () => receiver.requests.find((r) => r.rawBody.toString().includes(conversationId)),
    8000,
    `call.completed of ${conversationId}`,
  );
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
    assert.deepEqual([e.provider, e.call_sid, e.to_number, e.conversation_id, e.agent_id, e.status], ['web', null, null, sessionId, agentId, 'completed']);
    assert.ok(!('call_id' in e), 'the payload has exactly the fields of the spec');
    assert.equal(e.first_message, 'Hi! Ask me anything.');
    assert.equal(e.first_message_delivered, true);
    assert.deepEqual(
      e.transcript.map((x: { role: string }) => x.role),
      ['model', 'user', 'model'],
    );
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
    assert.deepEqual(
      e.transcript.map((x: { role: string }) => x.role),
      ['model', 'user', 'model'],
      JSON.stringify(e.transcript),
    );
    assert.match(e.transcript[1].text, /speech/);
    const row = await t.service.realtime.store.getConversation(sessionId);
    assert.equal(row!.cost_cents, 10, 'one started minute at REALTIME_CENTS_PER_MINUTE');
    assert.equal(await credit(tn.workspaceId), 990);
    const [{ count }] = await t.service.db.knex('session_leases').where({ workspace_id: tn.workspaceId }).count<{ count: string }[]>('* as count');
    assert.equal(Number(count), 0);
  });
});

describe('during a session', () => {
  it('the agent ends the conversation: session_ended, the socket stays open, later frames are still checked but not passed on; the client closes', async () => {
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
    // Still connected: an unusable message is answered with its error and dropped...
    c.ws.send('{not json');
    assert.equal((await c.next('error')).code, 'invalid_json');
    c.ws.send(Buffer.from('hi'), { binary: true });
    assert.equal((await c.next('error')).code, 'binary_frame_unsupported');
    c.sendJson({ mime_type: 'audio/webm', data: 'AAAA' });
    assert.equal((await c.next('error')).code, 'unsupported_mime_type');
    // ...and a valid one is not passed on (the agent has left): no answer at all.
    c.sendFrame('text/plain', b64('hello again'));
    c.sendFrame('audio/pcm', fixture('audio/caller-hello.pcm16le-16k.raw'));
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(
      c.messages.slice(count).map((m) => m.code),
      ['invalid_json', 'binary_frame_unsupported', 'unsupported_mime_type'],
      'only the errors of the unusable frames',
    );
    assert.deepEqual(await c.close(), { code: 1000, reason: '' });
    const row = await waitFor(() => t.service.realtime.store.getConversation(sessionId), 5000, 'record');
    assert.equal(row.status, 'completed');
    assert.equal(row.end_reason, 'agent_ended');
    assert.match(row.transcript.at(-1)!.text, /Goodbye/);
    assert.ok(!row.transcript.some((e) => e.text.includes('hello again')), 'not passed to the agent');
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
    // The fast tool answers at once; the slow one never does (closed with the server).
    const toolServer = http.createServer((req, res) => {
      if (!req.url?.includes('slow')) res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ found: true, time: '10:00' }));
    });
    await new Promise<void>((r) => toolServer.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(toolServer.address() as AddressInfo).port}`;
    try {
      const agentId = await createAgent(t, tn);
      for (const [name, path] of [
        ['lookup_appointment', '/fast'],
        ['slow_lookup', '/slow'],
      ]) {
        const tool = await t.http
          .post('/api/v1/tools')
          .set(bearer(tn.apiKey))
          .send({ name, description: `Looks up an appointment (${name}).`, url: `${base}${path}`, method: 'POST' });
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
      const filler = await c.next((m) => m.type === 'transcript' && m.role === 'model' && m.final === true, 15_000);
      assert.equal(filler.text, FILLER, 'a slow tool gets a spoken filler while it runs');
      assert.deepEqual(await c.next('tool_call', 15_000), { type: 'tool_call', name: 'slow_lookup', status: 'failed' });
      await c.next('turn_complete');
      await c.close();
      const { body: e } = await eventFor(sessionId);
      assert.equal(e.tool_calls.length, 2);
      const [fast, slow] = e.tool_calls;
      assert.deepEqual([fast.name, fast.source, fast.ok, fast.error, fast.result], ['lookup_appointment', 'http', true, null, { found: true, time: '10:00' }]);
      assert.ok(Number.isInteger(fast.duration_ms) && fast.started_at > 1e9);
      assert.deepEqual([slow.name, slow.ok], ['slow_lookup', false]);
      assert.ok(slow.duration_ms >= 2950, `timed out at REALTIME_TOOL_TIMEOUT_MS, not before: ${slow.duration_ms}`);
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
    const sandbox = t.service.sandbox.voice!;
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
    assert.equal(row.end_reason, 'service_error');
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
      const sandbox = s.service.sandbox.voice!;
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

describe('forward_failed in a text session', () => {
  it('a message the agent cannot take gets the agent apology (text + turn_complete), never an error code; a resend works', async () => {
    const s = await startTestService({ ...FAST, VOICE_RECONNECT_QUEUE_LIMIT: '1', VOICE_RETRY_MAX: '6', VOICE_RETRY_BASE_MS: '150' });
    try {
      const tn = await tenant(s);
      const agentId = await createAgent(s, tn);
      const c = connect((await mintSession(s, tn, agentId, 'text')).ws_url);
      await c.next('session_started');
      await c.next('turn_complete');
      const sandbox = s.service.sandbox.voice!;
      sandbox.setUnavailable(true);
      sandbox.dropConnections();
      await new Promise((r) => setTimeout(r, 50));
      const count = c.messages.length;
      c.sendFrame('text/plain', b64('first question'));
      c.sendFrame('text/plain', b64('second question'));
      const apology = await c.next('text');
      assert.equal(apology.text, "Sorry, I couldn't read that message. Could you send it again?");
      assert.equal((await c.next()).type, 'turn_complete');
      sandbox.setUnavailable(false);
      c.sendFrame('text/plain', b64('second question'));
      await waitFor(async () => c.messages.slice(count).filter((m) => m.type === 'turn_complete').length >= 3 || undefined, 5000, 'replies');
      assert.equal(c.messages.filter((m) => m.type === 'error').length, 0, 'text sessions carry no forward_failed');
      await c.close();
    } finally {
      await s.close();
    }
  });
});

describe('reading finished sessions: getRealtimeConversation and listRealtimeConversations', () => {
  it('the record carries every field of call.completed with the same values, plus user_id, source, end_reason and ended_at', async () => {
    const tn = await tenant(t);
    await withWebhook(tn);
    const agentId = await createAgent(t, tn);
    const c = connect((await mintSession(t, tn, agentId, 'text', 'reader-1')).ws_url);
    const sessionId = String((await c.next('session_started')).session_id);
    await c.next('turn_complete');
    c.sendFrame('text/plain', b64('What are your opening hours?'));
    await c.next('turn_complete');
    await c.close();
    const { body: event } = await eventFor(sessionId);
    const res = await t.http.get(`/api/v1/realtime/conversations/${sessionId}`).set(bearer(tn.apiKey));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.ok(res.headers['x-request-id']);
    const { user_id, source, end_reason, ended_at, erased_at, ...rest } = res.body;
    assert.equal(erased_at, null, 'kept until erased');
    const { event: kind, ...eventFields } = event;
    assert.equal(kind, 'call.completed');
    assert.deepEqual(rest, eventFields);
    assert.deepEqual([user_id, source, end_reason, rest.transcript_truncated], ['reader-1', 'text', 'client_closed', false]);
    assert.ok(Date.parse(ended_at) >= Date.parse(res.body.created_at));
  });

  it('lists the webhook deliveries of a session; 403 for another workspace, 404 for none', async () => {
    const tn = await tenant(t);
    const other = await tenant(t);
    await withWebhook(tn);
    const agentId = await createAgent(t, tn);
    const { c, sessionId } = await open(tn, agentId, 'text');
    await c.next('turn_complete');
    await c.close();
    await eventFor(sessionId);
    const path = `/api/v1/realtime/conversations/${sessionId}/webhook-deliveries`;
    const res = await waitFor(
      async () => {
        const r = await t.http.get(path).set(bearer(tn.apiKey));
        return r.status === 200 && r.body.data.length === 1 && r.body.data[0].status !== undefined ? r : undefined;
      },
      5000,
      'delivery recorded',
    );
    const [d] = res.body.data;
    assert.deepEqual(
      [d.event, d.call_id, d.target_url, d.status, d.status_code, d.signed],
      ['call.completed', sessionId, receiver.url, 'succeeded', 200, true],
    );
    assert.equal((await t.http.get(path).set(bearer(other.apiKey))).status, 403);
    const none = await t.http.get('/api/v1/realtime/conversations/conv_01JD5Z7Q8Y1C2B3A4N5M6K7P8R/webhook-deliveries').set(bearer(tn.apiKey));
    assert.equal(none.status, 404);
    assert.equal(none.body.error.code, 'conversation_not_found');
  });

  it('404 conversation_not_found for unknown or malformed ids; 403 for another workspace; 401 without a key', async () => {
    const tn = await tenant(t);
    const other = await tenant(t);
    const agentId = await createAgent(t, tn);
    const { c, sessionId } = await open(tn, agentId, 'text');
    await c.close();
    await waitFor(() => t.service.realtime.store.getConversation(sessionId), 5000, 'record');
    for (const id of ['conv_01JD5Z7Q8Y1C2B3A4N5M6K7P8R', 'nope', 'call_01JD5Z7Q8Y1C2B3A4N5M6K7P8R', `conv_${'Z'.repeat(80)}`, '%20', sessionId.toLowerCase()]) {
      const res = await t.http.get(`/api/v1/realtime/conversations/${id}`).set(bearer(tn.apiKey));
      assert.equal(res.status, 404, `${id}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'conversation_not_found');
      assert.equal(res.body.error.param, 'conversation_id');
    }
    const foreign = await t.http.get(`/api/v1/realtime/conversations/${sessionId}`).set(bearer(other.apiKey));
    assert.equal(foreign.status, 403);
    assert.equal(foreign.body.error.code, 'forbidden');
    assert.equal((await t.http.get(`/api/v1/realtime/conversations/${sessionId}`)).status, 401);
    assert.equal((await t.http.get('/api/v1/realtime/conversations')).status, 401);
    // Another workspace's list does not show it.
    assert.deepEqual((await t.http.get('/api/v1/realtime/conversations').set(bearer(other.apiKey))).body.data, []);
  });

  it('lists newest first with cursor pagination (limit, starting_after) and agent_id / user_id filters', async () => {
    const tn = await tenant(t);
    const agentA = await createAgent(t, tn);
    const agentB = await createAgent(t, tn);
    const ids: string[] = [];
    for (const [agent, user] of [
      [agentA, 'u-1'],
      [agentA, 'u-2'],
      [agentB, 'u-1'],
      [agentA, 'u-1'],
    ]) {
      const c = connect((await mintSession(t, tn, agent, 'text', user)).ws_url);
      ids.push(String((await c.next('session_started')).session_id));
      await c.close();
      await waitFor(() => t.service.realtime.store.getConversation(ids.at(-1)!), 5000, 'record');
    }
    const list = (query: string) => t.http.get(`/api/v1/realtime/conversations${query}`).set(bearer(tn.apiKey));
    const newest = [...ids].reverse();
    const all = await list('');
    assert.equal(all.status, 200);
    assert.deepEqual(
      all.body.data.map((x: { conversation_id: string }) => x.conversation_id),
      newest,
    );
    assert.deepEqual([all.body.object, all.body.has_more, all.body.next_cursor], ['list', false, null]);
    const p1 = await list('?limit=3');
    assert.deepEqual(
      p1.body.data.map((x: { conversation_id: string }) => x.conversation_id),
      newest.slice(0, 3),
    );
    assert.deepEqual([p1.body.has_more, p1.body.next_cursor], [true, newest[2]]);
    const p2 = await list(`?limit=3&starting_after=${p1.body.next_cursor}`);
    assert.deepEqual(
      p2.body.data.map((x: { conversation_id: string }) => x.conversation_id),
      newest.slice(3),
    );
    assert.deepEqual([p2.body.has_more, p2.body.next_cursor], [false, null]);
    const byAgent = await list(`?agent_id=${agentA}`);
    assert.deepEqual(
      byAgent.body.data.map((x: { conversation_id: string }) => x.conversation_id),
      [ids[3], ids[1], ids[0]],
    );
    const byUser = await list('?user_id=u-1');
    assert.deepEqual(
      byUser.body.data.map((x: { conversation_id: string }) => x.conversation_id),
      [ids[3], ids[2], ids[0]],
    );
    const both = await list(`?user_id=u-1&agent_id=${agentA}&limit=1`);
    assert.deepEqual([both.body.data[0].conversation_id, both.body.has_more], [ids[3], true]);
    assert.deepEqual((await list('?user_id=nobody')).body.data, []);
    assert.equal((await list('?limit=0')).status, 422);
    assert.equal((await list('?agent_id=not-an-agent')).status, 422);
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
      assert.equal(row?.end_reason, 'shutdown');
      assert.equal(await knex('realtime_live_sessions').where({ id: started.session_id }).first(), undefined, 'no live row left behind');
      assert.equal(await knex('session_leases').where({ id: started.session_id }).first(), undefined);
    } finally {
      await knex.destroy();
      await s.close().catch(() => undefined);
    }
  });
});
