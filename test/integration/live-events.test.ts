/**
 * Live events (issue 22) through the real service, real PostgreSQL, real HTTP and the sandbox carriers
 * and voice service: a phone call's Server-Sent Events through both carriers (status moves, the
 * caller's fixture lines as transcript finals, `end` after the record, the stream closed), resuming
 * with Last-Event-ID (header and query) with exactly the missing events, a stream on the other of two
 * instances on one database, the opt-in webhooks (a registration without `events` still gets only
 * `call.completed`; one listing the new kinds gets status changes and transcripts, signed), a web
 * session's stream with a real `ws` client, keep-alives and the stream cap, and bad input refused
 * before the stream starts with nothing changed. Every SSE message is checked against AsyncAPI.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';
import { createTestDatabase } from '../helpers/database.js';
import { startHttpPeer } from '../helpers/http-peer.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { bearer, connect, createAgent, mintSession, waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall, type Provider } from '../helpers/calls.js';
import { openSse, type SseMessage, type SseStream } from '../helpers/sse.js';
import { asyncapiPayloadValidator } from '../../src/contract/documents.js';
import { newId } from '../../src/lib/ids.js';
import { LIVE_EVENT_MESSAGES } from '../../src/events/writer.js';
import { LiveEventStore, type LiveEventType } from '../../src/events/store.js';

const ENV = { ...FAST_CALLS, EVENTS_HEARTBEAT_MS: '300', EVENTS_MAX_STREAMS_PER_WORKSPACE: '3' };
/** The default sandbox callee's lines (src/sandbox/carriers/callee.ts DEFAULT_PERSON). */
const CALLER_LINES = ['Hello, this is Sam.', 'Can you tell me about my appointment?', 'Thanks, goodbye.'];

/** Every message: its AsyncAPI schema, `id` = `seq`, `event` = `type`, one conversation, consecutive ids from `from`, `end` last. */
function assertWellFormed(messages: SseMessage[], conversationId: string, from = 1): void {
  messages.forEach((m, i) => {
    const validate = asyncapiPayloadValidator(LIVE_EVENT_MESSAGES[m.event as LiveEventType] ?? 'none');
    assert.ok(validate(m.data), `${m.event} does not match AsyncAPI: ${JSON.stringify(validate.errors)} in ${JSON.stringify(m.data)}`);
    assert.equal(m.data.type, m.event);
    assert.equal(m.data.seq, m.id);
    assert.equal(m.id, from + i, `ids are consecutive: ${messages.map((x) => x.id).join(',')}`);
    assert.equal(m.data.conversation_id, conversationId);
  });
  const ends = messages.filter((m) => m.event === 'end');
  assert.equal(ends.length, 1, 'one end');
  assert.equal(messages.at(-1)!.event, 'end', 'end is the last event');
}

const statuses = (s: SseStream) => s.messages.filter((m) => m.event === 'status').map((m) => m.data.status as string);
const finals = (s: SseStream, role: string) =>
  s.messages.filter((m) => m.event === 'transcript' && m.data.final && m.data.role === role).map((m) => m.data.text);

let t: TestService;
let plain: Receiver;
let live: Receiver;

before(async () => {
  t = await startTestService(ENV);
  [plain, live] = await Promise.all([startReceiver(), startReceiver()]);
});
after(async () => {
  await Promise.all([plain.close(), live.close()]);
  await t.close();
});

const eventsUrl = (s: TestService, callId: string, query = '') => `${s.url}/api/v1/calls/${callId}/events${query}`;

async function register(tn: Tenant, url: string, events?: string[]): Promise<void> {
  const res = await t.http
    .post('/api/v1/webhooks')
    .set(bearer(tn.apiKey))
    .send(events ? { url, events } : { url });
  assert.equal(res.status, 201, JSON.stringify(res.body));
}

/** A call whose callee answers and then says nothing for a minute: live until hung up. */
async function placeSilentCall(tn: Tenant): Promise<string> {
  const agentId = await createPhoneAgent(t, tn, 'provider_a');
  const to = sandboxNumber();
  t.service.sandbox.carriers!.server.setScript(to, [{ waitForAgent: true }, { pause: 60_000 }]);
  const placed = await placeCall(t, tn, { agent_id: agentId, to_number: to });
  assert.equal(placed.status, 201, JSON.stringify(placed.body));
  return placed.body.call_id as string;
}

const bodiesFor = (r: Receiver, callId: string) =>
  r.requests.map((q) => ({ body: JSON.parse(q.rawBody.toString()), q })).filter(({ body }) => body.call_id === callId || body.conversation_id === callId);

for (const provider of ['provider_a', 'provider_b'] as Provider[]) {
  describe(`${provider}: a phone call's event stream`, () => {
    it('streams status, the caller lines as finals and end after the record; closes; resumes with exactly the missing events; opt-in webhooks', async () => {
      const tn = await tenant(t);
      await register(tn, plain.url);
      await register(tn, live.url, ['call.status_changed', 'call.transcript']);
      const secret = (await t.http.get('/api/v1/webhooks/secret').set(bearer(tn.apiKey))).body.webhook_secret as string;
      const agentId = await createPhoneAgent(t, tn, provider);
      const placed = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber() });
      assert.equal(placed.status, 201, JSON.stringify(placed.body));
      const callId = placed.body.call_id as string;

      const sse = await openSse(eventsUrl(t, callId), bearer(tn.apiKey));
      assert.equal(sse.status, 200);
      assert.match(String(sse.headers['content-type']), /^text\/event-stream/);
      assert.equal(sse.headers['cache-control'], 'no-cache');
      await sse.ended;
      // The stream ended after `end`: by then the record is final.
      const call = await waitForCall(t, tn, callId, () => true);
      assert.equal(call.status, 'completed');

      assertWellFormed(sse.messages, callId);
      const moves = statuses(sse);
      assert.equal(moves[0], 'queued');
      assert.equal(moves.at(-1), 'ended');
      assert.ok(moves.indexOf('in_progress') > 0, `moves: ${moves}`);
      assert.deepEqual(
        moves.filter((m) => m !== 'ringing'),
        ['queued', 'in_progress', 'ended'],
      );
      const ended = sse.messages.find((m) => m.event === 'status' && m.data.status === 'ended')!;
      assert.deepEqual([ended.data.call_status, ended.data.end_reason], [call.status, call.end_reason]);
      assert.deepEqual(finals(sse, 'user'), CALLER_LINES);
      assert.deepEqual(
        finals(sse, 'model'),
        call.transcript.filter((e: { role: string }) => e.role === 'model').map((e: { text: string }) => e.text),
      );
      assert.ok(
        sse.messages.some((m) => m.event === 'transcript' && !m.data.final),
        'partials stream before the finals',
      );
      const end = sse.messages.at(-1)!;
      assert.deepEqual([end.data.status, end.data.end_reason], [call.status, call.end_reason]);

      // Resume: the header, then the query parameter, then both (the header wins).
      const n = sse.messages.length;
      const k = Math.floor(n / 2);
      const resumed = await openSse(eventsUrl(t, callId), { ...bearer(tn.apiKey), 'Last-Event-ID': String(k) });
      await resumed.ended;
      assert.deepEqual(resumed.messages, sse.messages.slice(k));
      const byQuery = await openSse(eventsUrl(t, callId, `?last_event_id=${n - 1}`), bearer(tn.apiKey));
      await byQuery.ended;
      assert.deepEqual(byQuery.messages, sse.messages.slice(n - 1));
      const both = await openSse(eventsUrl(t, callId, '?last_event_id=1'), { ...bearer(tn.apiKey), 'Last-Event-ID': String(n - 2) });
      await both.ended;
      assert.deepEqual(both.messages, sse.messages.slice(n - 2));
      const all = await openSse(eventsUrl(t, callId), { ...bearer(tn.apiKey), 'Last-Event-ID': '0' });
      await all.ended;
      assert.deepEqual(all.messages, sse.messages, 'a finished call replays everything and ends');

      // Webhooks: the registration without `events` gets call.completed only; the one listing the
      // new kinds gets every status move and every transcript entry, signed, and not call.completed.
      await waitFor(async () => bodiesFor(plain, callId).length >= 1, 10_000, 'call.completed');
      const liveHooks = await waitFor(
        async () => {
          const got = bodiesFor(live, callId);
          const s = got.filter(({ body }) => body.event === 'call.status_changed');
          const tr = got.filter(({ body }) => body.event === 'call.transcript');
          return s.some(({ body }) => body.status === 'ended') && tr.length >= call.transcript.length ? got : null;
        },
        10_000,
        'the live webhooks',
      );
      assert.deepEqual(
        bodiesFor(plain, callId).map(({ body }) => body.event),
        ['call.completed'],
      );
      for (const { body, q } of liveHooks) {
        assert.ok(['call.status_changed', 'call.transcript'].includes(body.event), body.event);
        assert.equal(q.headers['x-webhook-signature'], createHmac('sha256', secret).update(q.rawBody).digest('hex'));
        assert.equal(body.agent_id, agentId);
      }
      const hookMoves = liveHooks.filter(({ body }) => body.event === 'call.status_changed').map(({ body }) => body);
      assert.deepEqual([...new Set(hookMoves.map((b) => b.status))].filter((s) => s !== 'ringing').sort(), ['ended', 'in_progress', 'queued']);
      const hookEnded = hookMoves.find((b) => b.status === 'ended');
      assert.deepEqual([hookEnded.call_status, hookEnded.end_reason, hookEnded.batch_id], [call.status, call.end_reason, null]);
      const transcripts = liveHooks.filter(({ body }) => body.event === 'call.transcript').map(({ body }) => body);
      assert.deepEqual(
        transcripts.sort((a, b) => a.timestamp - b.timestamp).map((b) => [b.role, b.text]),
        call.transcript.map((e: { role: string; text: string }) => [e.role, e.text]),
      );
    });
  });
}

describe('what happens during a call', () => {
  it('streams the tool call and its result, the barge-in, the keys pressed and the transfer', async () => {
    const peer = await startHttpPeer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ order: 'A-42', status: 'shipped yesterday' }));
    });
    try {
      const tn = await tenant(t);
      const tool = await t.http
        .post('/api/v1/tools')
        .set(bearer(tn.apiKey))
        .send({
          name: 'check_order_live',
          description: 'Looks an order up.',
          url: `${peer.url}/orders`,
          parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
        });
      assert.equal(tool.status, 201, JSON.stringify(tool.body));
      const agentId = await createPhoneAgent(t, tn, 'provider_a', {
        first_message: 'Hello! This is Acme Dental, calling about your appointment next week with doctor Smith at our Main Street clinic.',
        transfer_phone_number: '+14155550199',
        transfer_criteria: 'The caller asks for a person.',
      });
      assert.equal((await t.http.put(`/api/v1/agents/${agentId}/tools/${tool.body.tool_id}`).set(bearer(tn.apiKey))).status, 200);
      const to = sandboxNumber();
      t.service.sandbox.carriers!.server.setScript(to, [
        { sayWhileAgentSpeaks: 'Sorry to interrupt, when do you open?' },
        { waitForAgent: true },
        { say: 'Please run check_order_live for A-42.' },
        { waitForAgent: true },
        { pressDigits: '42#' },
        { waitForAgent: true },
        { say: 'Please transfer call to a person.' },
        { pause: 5000 },
      ]);
      const placed = await placeCall(t, tn, { agent_id: agentId, to_number: to });
      const callId = placed.body.call_id as string;
      const sse = await openSse(eventsUrl(t, callId), bearer(tn.apiKey));
      await sse.ended;
      assertWellFormed(sse.messages, callId);
      const of = (type: string) => sse.messages.filter((m) => m.event === type).map((m) => m.data);
      assert.ok(of('interrupted').length >= 1, 'the barge-in');
      const tools = of('tool_call');
      assert.ok(
        tools.some((x) => x.name === 'check_order_live'),
        JSON.stringify(tools),
      );
      const result = of('tool_result').find((x) => x.name === 'check_order_live')!;
      assert.deepEqual([result.ok, result.result, result.error], [true, { order: 'A-42', status: 'shipped yesterday' }, null]);
      assert.deepEqual(
        of('dtmf').map((x) => [x.role, x.keys]),
        [['user', '42#']],
      );
      assert.ok(
        sse.messages.some((m) => m.event === 'transcript' && m.data.final && m.data.dtmf === '42#'),
        'the keys are a transcript entry too',
      );
      assert.deepEqual(
        of('transfer').map((x) => [x.destination, x.to, x.status, x.outcome]),
        [['default', '+14155550199', 'started', null]],
      );
      const record = (await t.http.get(`/api/v1/calls/${callId}`).set(bearer(tn.apiKey))).body;
      assert.deepEqual(
        of('transfer').map((x) => x.transfer_id),
        record.transfers.map((x: Record<string, unknown>) => x.transfer_id),
        'the event names the attempt the record keeps',
      );
      assert.ok(of('tool_call').some((x) => x.name === 'transfer_call'));
      const moves = statuses(sse);
      assert.ok(moves.indexOf('transferring') > moves.indexOf('in_progress') && moves.indexOf('transferring') < moves.indexOf('ended'), `moves: ${moves}`);
      assert.deepEqual([sse.messages.at(-1)!.data.status, sse.messages.at(-1)!.data.end_reason], ['completed', 'transferred']);
    } finally {
      await peer.close();
    }
  });
});

describe('a live stream', () => {
  it('sends keep-alives while nothing happens; the stream cap answers 429 in the envelope; a hang-up ends it', async () => {
    const tn = await tenant(t);
    const callId = await placeSilentCall(tn);
    const streams = await Promise.all([1, 2, 3].map(() => openSse(eventsUrl(t, callId), bearer(tn.apiKey))));
    assert.deepEqual(
      streams.map((s) => s.status),
      [200, 200, 200],
    );
    await streams[0].waitFor((m) => m.event === 'status' && m.data.status === 'in_progress');
    await streams[0].waitForComments(3);
    assert.ok(streams[0].comments.includes('keepalive'), `comments: ${streams[0].comments}`);
    const refused = await openSse(eventsUrl(t, callId), bearer(tn.apiKey));
    assert.equal(refused.status, 429);
    assert.equal(refused.error?.error.code, 'event_stream_limit_reached');
    assert.ok(refused.headers['retry-after']);
    // Another workspace is not limited by this one's streams.
    const other = await tenant(t);
    const otherAgent = await createPhoneAgent(t, other, 'provider_a');
    const otherCall = await placeCall(t, other, { agent_id: otherAgent, to_number: sandboxNumber() });
    const otherStream = await openSse(eventsUrl(t, otherCall.body.call_id), bearer(other.apiKey));
    assert.equal(otherStream.status, 200);
    otherStream.close();
    // A closed stream frees its place.
    streams[2].close();
    await streams[2].ended;
    const again = await waitFor(
      async () => {
        const s = await openSse(eventsUrl(t, callId), bearer(tn.apiKey));
        return s.status === 200 ? s : null;
      },
      5000,
      'a free stream place',
    );
    const hungUp = await t.http.post(`/api/v1/calls/${callId}/hangup`).set(bearer(tn.apiKey));
    assert.equal(hungUp.status, 200, JSON.stringify(hungUp.body));
    await Promise.all([streams[0].ended, streams[1].ended, again.ended]);
    for (const s of [streams[0], streams[1], again]) {
      assertWellFormed(s.messages, callId);
      assert.deepEqual(s.messages, streams[0].messages);
    }
    assert.equal(streams[0].messages.at(-1)!.data.end_reason, 'api_hangup');
  });

  it('bad input is refused before the stream starts, in the envelope, and changes nothing', async () => {
    const tn = await tenant(t);
    const other = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_b');
    const placed = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber() });
    const callId = placed.body.call_id as string;
    await waitForCall(t, tn, callId);
    const count = async () => Number((await t.service.db.knex('conversation_events').where({ conversation_id: callId }).count('* as n'))[0].n);
    const before = await count();
    // An id past the largest event id (the database's integer): before, 15 digits were taken and then failed there.
    const tooLarge: Array<[string, Record<string, string>, string]> = [
      [eventsUrl(t, callId), { 'Last-Event-ID': '2147483648' }, 'Last-Event-ID'],
      [eventsUrl(t, callId), { 'Last-Event-ID': '999999999999999' }, 'Last-Event-ID'],
      [eventsUrl(t, callId, '?last_event_id=999999999999999'), {}, 'last_event_id'],
      [eventsUrl(t, callId, '?last_event_id=2147483648'), { 'Last-Event-ID': '3' }, 'last_event_id'],
    ];
    for (const [url, headers, param] of tooLarge) {
      const s = await openSse(url, { ...bearer(tn.apiKey), ...headers });
      assert.equal(s.status, 422, `${url} ${JSON.stringify(headers)}: ${JSON.stringify(s.error)}`);
      assert.deepEqual([s.error?.error.code, s.error?.error.param], ['invalid_value', param]);
      assert.ok(s.error?.error.request_id);
    }
    const cases: Array<[string, Record<string, string>, number, string]> = [
      [eventsUrl(t, callId), { ...bearer(tn.apiKey), 'Last-Event-ID': 'abc' }, 422, 'invalid_value'],
      [eventsUrl(t, callId), { ...bearer(tn.apiKey), 'Last-Event-ID': '-1' }, 422, 'invalid_value'],
      [eventsUrl(t, callId, '?last_event_id=1.5'), bearer(tn.apiKey), 422, 'invalid_value'],
      [eventsUrl(t, callId), bearer(other.apiKey), 403, 'forbidden'],
      [eventsUrl(t, newId('call')), bearer(tn.apiKey), 404, 'call_not_found'],
      [eventsUrl(t, 'not-a-call'), bearer(tn.apiKey), 422, 'invalid_value'],
      [eventsUrl(t, callId), {}, 401, 'unauthorized'],
      [`${t.url}/api/v1/realtime/conversations/${newId('conversation')}/events`, bearer(tn.apiKey), 404, 'conversation_not_found'],
      [`${t.url}/api/v1/realtime/conversations/${callId}/events`, bearer(tn.apiKey), 404, 'conversation_not_found'],
    ];
    for (const [url, headers, status, code] of cases) {
      const s = await openSse(url, headers);
      assert.equal(s.status, status, `${url} ${JSON.stringify(headers)}: ${JSON.stringify(s.error)}`);
      assert.match(String(s.headers['content-type']), /^application\/json/);
      assert.ok(s.error?.error.code === code || (status === 401 && s.error?.error), `${code}: ${JSON.stringify(s.error)}`);
    }
    assert.equal(await count(), before);
  });
});

/**
 * Resolves once the stream ended; fails if it idles on keep-alives instead (five heartbeats: a stream
 * left open, which before held one of the workspace's places for ever).
 */
async function endsWithoutIdling(s: SseStream, what: string): Promise<void> {
  const idle = s.waitForComments(1 + 5, 60_000).then(
    () => 'idled',
    () => 'ended',
  );
  assert.equal(await Promise.race([s.ended.then(() => 'ended'), idle]), 'ended', `${what}: the stream stays open; comments ${s.comments}`);
}

describe('resuming at the edges', () => {
  it("a finished call's stream resumed at or past its end replays nothing and ends, freeing its place", async () => {
    const tn = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_b');
    const placed = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber() });
    const callId = placed.body.call_id as string;
    await waitForCall(t, tn, callId);
    const all = await openSse(eventsUrl(t, callId), bearer(tn.apiKey));
    await all.ended;
    const last = all.messages.at(-1)!.id;
    // More resumes than the workspace's 3 places: each must have ended and given its place back.
    for (const id of [last, last + 1, last + 1000, 2_147_483_647, last]) {
      const s = await openSse(eventsUrl(t, callId), { ...bearer(tn.apiKey), 'Last-Event-ID': String(id) });
      assert.equal(s.status, 200, JSON.stringify(s.error));
      await endsWithoutIdling(s, `resumed after ${id}`);
      assert.deepEqual(s.messages, [], `resumed after ${id}`);
    }
    const byQuery = await openSse(eventsUrl(t, callId, `?last_event_id=${last + 7}`), bearer(tn.apiKey));
    await endsWithoutIdling(byQuery, 'by query');
    assert.deepEqual(byQuery.messages, []);
    const before = await openSse(eventsUrl(t, callId), { ...bearer(tn.apiKey), 'Last-Event-ID': String(last - 1) });
    await before.ended;
    assert.deepEqual(before.messages, all.messages.slice(-1), 'one before the end replays the end');
  });

  it("a finished web session's stream resumed past its end ends", async () => {
    const tn = await tenant(t);
    const agentId = await createAgent(t, tn, { instruction: 'You are the receptionist of Acme Dental.', first_message: 'Hi!' });
    const c = connect((await mintSession(t, tn, agentId, 'text')).ws_url);
    const sessionId = String((await c.next('session_started')).session_id);
    await c.next('turn_complete');
    await c.close();
    const url = `${t.url}/api/v1/realtime/conversations/${sessionId}/events`;
    const all = await openSse(url, bearer(tn.apiKey));
    await all.ended;
    for (const id of [all.messages.at(-1)!.id, all.messages.at(-1)!.id + 50]) {
      const s = await openSse(url, { ...bearer(tn.apiKey), 'Last-Event-ID': String(id) });
      assert.equal(s.status, 200);
      await endsWithoutIdling(s, `resumed after ${id}`);
      assert.deepEqual(s.messages, []);
    }
  });

  it('an id past the last event of a live conversation is 422 naming where it came from; the stream then resumes from an id received', async () => {
    const tn = await tenant(t);
    const callId = await placeSilentCall(tn);
    const watching = await openSse(eventsUrl(t, callId), bearer(tn.apiKey));
    const inProgress = await watching.waitFor((m) => m.event === 'status' && m.data.status === 'in_progress');
    watching.close();
    await watching.ended;
    const cases: Array<[string, Record<string, string>, string]> = [
      ['', { 'Last-Event-ID': '2147483647' }, 'Last-Event-ID'],
      ['?last_event_id=100000', {}, 'last_event_id'],
    ];
    for (const [query, headers, param] of cases) {
      const s = await openSse(eventsUrl(t, callId, query), { ...bearer(tn.apiKey), ...headers });
      assert.equal(s.status, 422, `${query} ${JSON.stringify(headers)}: ${JSON.stringify(s.error)}`);
      assert.equal(s.error?.error.code, 'invalid_value');
      assert.equal(s.error?.error.param, param);
      assert.ok(s.error?.error.request_id);
    }
    // What was received resumes; the call goes on and its end ends the stream.
    const resumed = await openSse(eventsUrl(t, callId), { ...bearer(tn.apiKey), 'Last-Event-ID': String(inProgress.id) });
    assert.equal(resumed.status, 200);
    assert.equal((await t.http.post(`/api/v1/calls/${callId}/hangup`).set(bearer(tn.apiKey))).status, 200);
    await resumed.ended;
    assert.equal(resumed.messages.at(-1)!.event, 'end');
  });
});

describe('the credential a stream was opened with', () => {
  it("revoking the API key ends its streams, logging the session out ends the session's; streams of other credentials go on", async () => {
    const tn = await tenant(t);
    const callId = await placeSilentCall(tn);
    const other = (await t.http.post('/api/v1/keys').set(bearer(tn.sessionToken)).send({ name: 'other' })).body.key as string;
    const [byKey, byOther, bySession] = await Promise.all([tn.apiKey, other, tn.sessionToken].map((c) => openSse(eventsUrl(t, callId), bearer(c))));
    assert.deepEqual([byKey.status, byOther.status, bySession.status], [200, 200, 200]);
    const ended = new Set<SseStream>();
    for (const s of [byKey, byOther, bySession]) void s.ended.then(() => ended.add(s));
    await Promise.all([byKey, byOther, bySession].map((s) => s.waitFor((m) => m.event === 'status' && m.data.status === 'in_progress')));

    assert.equal((await t.http.delete(`/api/v1/keys/${tn.keyId}`).set(bearer(tn.sessionToken))).status, 200);
    await byKey.ended;
    // The others go on: two more keep-alives each, and not ended.
    await Promise.all([byOther, bySession].map((s) => s.waitForComments(s.comments.length + 2)));
    assert.deepEqual([ended.has(byOther), ended.has(bySession)], [false, false]);
    assert.equal((await openSse(eventsUrl(t, callId), bearer(tn.apiKey))).status, 401, 'the revoked key cannot reopen it');

    assert.ok((await t.http.post('/api/v1/auth/logout').set(bearer(tn.sessionToken))).status < 300);
    await bySession.ended;
    await byOther.waitForComments(byOther.comments.length + 2);
    assert.equal(ended.has(byOther), false);
    assert.ok(!byKey.messages.some((m) => m.event === 'end') && !bySession.messages.some((m) => m.event === 'end'), 'ended by the credential, not the call');

    assert.equal((await t.http.post(`/api/v1/calls/${callId}/hangup`).set(bearer(other))).status, 200);
    await byOther.ended;
    assert.equal(byOther.messages.at(-1)!.event, 'end');
  });
});

describe('a web session', () => {
  it('streams its status, transcript finals and end to an SSE client while a real ws client talks', async () => {
    const tn = await tenant(t);
    const agentId = await createAgent(t, tn, { instruction: 'You are the receptionist of Acme Dental.', first_message: 'Hi! Ask me anything.' });
    const c = connect((await mintSession(t, tn, agentId, 'text')).ws_url);
    const started = await c.next('session_started');
    const sessionId = String(started.session_id);
    const url = `${t.url}/api/v1/realtime/conversations/${sessionId}/events`;
    const sse = await openSse(url, bearer(tn.apiKey));
    assert.equal(sse.status, 200);
    // The workspace's cap of open streams (3 here) holds for a web session's streams as for a call's.
    const more = await Promise.all([1, 2].map(() => openSse(url, bearer(tn.apiKey))));
    assert.deepEqual(
      more.map((s) => s.status),
      [200, 200],
    );
    const refused = await openSse(url, bearer(tn.apiKey));
    assert.equal(refused.status, 429);
    assert.equal(refused.error?.error.code, 'event_stream_limit_reached');
    assert.ok(refused.headers['retry-after']);
    for (const s of more) s.close();
    await c.next('turn_complete');
    c.sendFrame('text/plain', Buffer.from('What are your opening hours on Saturday?').toString('base64'));
    await sse.waitFor((m) => m.event === 'transcript' && m.data.role === 'user' && m.data.final);
    await c.next('turn_complete');
    await c.close();
    await sse.ended;
    assertWellFormed(sse.messages, sessionId);
    assert.deepEqual(statuses(sse), ['in_progress', 'ended']);
    assert.deepEqual(finals(sse, 'user'), ['What are your opening hours on Saturday?']);
    const record = (await t.http.get(`/api/v1/realtime/conversations/${sessionId}`).set(bearer(tn.apiKey))).body;
    assert.deepEqual(
      finals(sse, 'model'),
      record.transcript.filter((e: { role: string }) => e.role === 'model').map((e: { text: string }) => e.text),
    );
    assert.deepEqual([sse.messages.at(-1)!.data.status, sse.messages.at(-1)!.data.end_reason], [record.status, record.end_reason]);
    const other = await tenant(t);
    const foreign = await openSse(url, bearer(other.apiKey));
    assert.equal(foreign.status, 403);
    const replay = await openSse(url, { ...bearer(tn.apiKey), 'Last-Event-ID': '2' });
    await replay.ended;
    assert.deepEqual(replay.messages, sse.messages.slice(2));
  });
});

describe('two instances on one database', () => {
  it('a stream on the instance not bridging the call gets every event, the same as one on the bridging instance', async () => {
    // A database of their own: no third instance (the file's service) takes their jobs.
    const db = await createTestDatabase();
    const env = { ...ENV, DATABASE_URL: db.url };
    const [a, b] = await Promise.all([startTestService(env), startTestService(env)]);
    try {
      const tn = await tenant(a);
      const agentId = await createPhoneAgent(a, tn, 'provider_a');
      const to = sandboxNumber();
      // Either instance's dial job may place the call (through its own sandbox carriers, which connect
      // the media stream back to it): both sandboxes play the same caller.
      for (const s of [a, b]) s.service.sandbox.carriers!.server.setScript(to, [{ waitForAgent: true }, { say: CALLER_LINES[0] }, { pause: 60_000 }]);
      const placed = await placeCall(a, tn, { agent_id: agentId, to_number: to });
      const callId = placed.body.call_id as string;
      const [bridging, other] = await waitFor(
        async () => (a.service.telephony.media.size > 0 ? [a, b] : b.service.telephony.media.size > 0 ? [b, a] : null),
        20_000,
        'the call to be bridged',
      );
      const [onBridging, onOther] = await Promise.all([
        openSse(eventsUrl(bridging, callId), bearer(tn.apiKey)),
        openSse(eventsUrl(other, callId), bearer(tn.apiKey)),
      ]);
      // A third client drops mid-call and resumes, while the call goes on, on the other instance.
      const dropped = await openSse(eventsUrl(bridging, callId), bearer(tn.apiKey));
      await dropped.waitFor((m) => m.event === 'status' && m.data.status === 'in_progress');
      dropped.close();
      await dropped.ended;
      const received = [...dropped.messages];
      const resumed = await openSse(eventsUrl(other, callId), { ...bearer(tn.apiKey), 'Last-Event-ID': String(received.at(-1)!.id) });
      await onOther.waitFor((m) => m.event === 'transcript' && m.data.role === 'user' && m.data.final);
      // A stream on one instance ends when its key is revoked on the other.
      const key = (await bridging.http.post('/api/v1/keys').set(bearer(tn.sessionToken)).send({ name: 'watcher' })).body;
      const watcher = await openSse(eventsUrl(other, callId), bearer(key.key));
      assert.equal(watcher.status, 200);
      assert.equal((await bridging.http.delete(`/api/v1/keys/${key.id}`).set(bearer(tn.sessionToken))).status, 200);
      await watcher.ended;
      assert.ok(!watcher.messages.some((m) => m.event === 'end'));
      const hungUp = await bridging.http.post(`/api/v1/calls/${callId}/hangup`).set(bearer(tn.apiKey));
      assert.equal(hungUp.status, 200, JSON.stringify(hungUp.body));
      await Promise.all([onBridging.ended, onOther.ended, resumed.ended]);
      assertWellFormed(onOther.messages, callId);
      assert.deepEqual(onOther.messages, onBridging.messages);
      assert.deepEqual([...received, ...resumed.messages], onBridging.messages, 'the resumed stream has exactly the events the dropped one missed');
      assert.deepEqual(finals(onOther, 'user'), [CALLER_LINES[0]]);
      assert.equal(onOther.messages.at(-1)!.data.end_reason, 'api_hangup');
    } finally {
      await Promise.all([a.close(), b.close()]);
      await db.drop();
    }
  });
});

describe('storage limits', () => {
  it('past the cap per conversation only `end` is stored; retention removes old events; a finished call whose events are gone streams just its end', async () => {
    const tn = await tenant(t);
    const knex = t.service.db.knex;
    const capped = new LiveEventStore(knex, 3);
    const id = newId('conversation');
    const event = (type: LiveEventType, data: Record<string, unknown>) => ({ workspaceId: tn.workspaceId, conversationId: id, type, data });
    await capped.insert([1, 2, 3, 4, 5].map((i) => event('interrupted', { timestamp: i })));
    await capped.insert([event('end', { status: 'completed', end_reason: 'client_closed', timestamp: 6 })]);
    const rows = await knex('conversation_events').where({ conversation_id: id }).orderBy('seq');
    assert.deepEqual(
      rows.map((r) => [r.seq, r.type]),
      [
        [1, 'interrupted'],
        [2, 'interrupted'],
        [3, 'interrupted'],
        [6, 'end'],
      ],
      'the numbers of the events not kept are skipped (the contract promises no gaps only under the cap)',
    );

    // A finished call, its events then expired by the retention job's sweep.
    const agentId = await createPhoneAgent(t, tn, 'provider_b');
    const placed = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber() });
    const callId = placed.body.call_id as string;
    const call = await waitForCall(t, tn, callId);
    const longAgo = new Date(Date.now() - 8 * 24 * 3600 * 1000);
    await knex('conversation_events').whereIn('conversation_id', [id, callId]).update({ created_at: longAgo });
    await knex('conversation_event_heads').whereIn('conversation_id', [id, callId]).update({ updated_at: longAgo });
    const fresh = newId('conversation');
    await capped.insert([{ workspaceId: tn.workspaceId, conversationId: fresh, type: 'interrupted', data: { timestamp: 1 } }]);
    assert.ok((await t.service.liveEvents.sweep()) >= 4);
    assert.equal(Number((await knex('conversation_events').whereIn('conversation_id', [id, callId]).count('* as n'))[0].n), 0);
    assert.equal((await knex('conversation_events').where({ conversation_id: fresh })).length, 1, 'recent events are kept');
    assert.deepEqual(
      (await knex('conversation_event_heads').whereIn('conversation_id', [id, callId, fresh]).pluck('conversation_id')).sort(),
      [fresh],
      'the heads of conversations with no events left are removed with them',
    );
    const sse = await openSse(eventsUrl(t, callId), bearer(tn.apiKey));
    await sse.ended;
    assert.deepEqual(
      sse.messages.map((m) => [m.id, m.event, m.data.status, m.data.end_reason]),
      [[1, 'end', call.status, call.end_reason]],
    );
  });
});
