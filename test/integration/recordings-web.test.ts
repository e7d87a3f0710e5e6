/**
 * Recordings of web voice sessions (issue 22) through real `ws` clients: the agent's `recording`
 * setting decides (off: nothing written; text sessions never), the two channels as each side heard
 * them at 16 kHz (the user's fixture speech in the left channel at the moment it was sent, silence
 * where none came; the agent's 24 kHz audio resampled in the right, cut where the user barged in), the
 * session record and `call.completed` with the recording and a signed link, the WAV download with
 * Range, deleting, retention, the 404 reasons, a live session's recording so far, and the size cap. The
 * recordings' clock is held and moved by the tests, so where audio lands is exact.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, connect, createAgent, fixture, mintSession, waitFor, type Client } from '../helpers/realtime.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import {
  assertSamplesAt,
  binary,
  decodeWav,
  downloadSessionRecording,
  fence,
  findSamples,
  heldClock,
  loud,
  sendPcm,
  sessionRecord,
} from '../helpers/recordings.js';

const FAST = {
  VOICE_SANDBOX_SPEED: '5',
  VOICE_SANDBOX_MS_PER_CHAR: '5',
  // A turn ends after this much silence (or this long without audio): longer than the fixtures' pauses
  // and than a test takes to move the clock after sending.
  VOICE_SANDBOX_END_OF_TURN_MS: '2000',
  RECORDING_FLUSH_MS: '200',
  RECORDING_URL_TTL_S: '600',
};
const RATE = 16_000;
/** Samples at 16 kHz in `ms`. */
const at = (ms: number) => (ms * RATE) / 1000;
const HELLO = fixture('audio/caller-hello.pcm16le-16k.raw');
const QUESTION = fixture('audio/caller-question.pcm16le-16k.raw');
const SILENCE = fixture('audio/silence-1s.pcm16le-16k.raw');
const pcmMs = (pcm: Buffer) => pcm.length / 32;

/** The service's own clock, moved forward to expire links. */
let offsetMs = 0;
const movedClock = { now: () => new Date(Date.now() + offsetMs) };
const rec = heldClock();
let t: TestService;
let tn: Tenant;
let receiver: Receiver;

before(async () => {
  t = await startTestService(FAST, { clock: movedClock, recordingClock: rec.clock });
  tn = await tenant(t);
  receiver = await startReceiver();
  const hook = await t.http
    .post('/api/v1/webhooks')
    .set(bearer(tn.apiKey))
    .send({ url: receiver.url, events: ['call.completed'] });
  assert.ok(hook.status === 201 || hook.status === 200, JSON.stringify(hook.body));
});

after(async () => {
  await receiver.close();
  await t.close();
});

async function open(agentId: string, source = 'voice', who: Tenant = tn): Promise<{ c: Client; sessionId: string }> {
  const c = connect((await mintSession(t, who, agentId, source)).ws_url);
  const started = await c.next('session_started');
  return { c, sessionId: String(started.session_id) };
}

const record = (sessionId: string) => sessionRecord(t, tn, sessionId);

const eventFor = (sessionId: string) =>
  waitFor(
    async () => receiver.requests.map((r) => JSON.parse(r.rawBody.toString()) as Record<string, any>).find((e) => e.conversation_id === sessionId) ?? null,
    15_000,
    `call.completed of ${sessionId}`,
  );

const download = (sessionId: string, headers: Record<string, string> = {}) => downloadSessionRecording(t, tn, sessionId, headers);

const recordingRows = async (sessionId: string) => (await t.service.db.knex('recordings').where({ conversation_id: sessionId })).length;

/** Agent speech received by the client so far, in ms (24 kHz PCM16). */
const agentMsReceived = (c: Client) =>
  c.messages.filter((m) => m.type === 'audio').reduce((ms, m) => ms + Buffer.from(String(m.data), 'base64').length / 48, 0);

const has = (c: Client, pred: (m: Record<string, unknown>) => boolean, what: string) => waitFor(async () => c.messages.some(pred), 15_000, what);

/** Resolves once the agent's answer to a spoken turn (the sandbox's "I heard n seconds of speech") has been sent in full. */
const answered = (c: Client) =>
  waitFor(
    async () => {
      const final = c.messages.findIndex((m) => m.type === 'transcript' && m.role === 'model' && m.final === true && /I heard/.test(String(m.text)));
      return final >= 0 && c.messages.slice(final).some((m) => m.type === 'turn_complete');
    },
    15_000,
    "the agent's answer",
  );

describe('a recorded web voice session', () => {
  let sessionId: string;
  let wav: ReturnType<typeof decodeWav>;
  let speechAt: number;
  let replyAt: number;
  let endAt: number;

  before(async () => {
    const agentId = await createAgent(t, tn, { recording: { enabled: true } });
    rec.hold();
    try {
      const s = await open(agentId);
      sessionId = s.sessionId;
      const { c } = s;
      // The first message is queued from the start, in real time (the clock stands still while it arrives).
      await has(c, (m) => m.type === 'turn_complete', 'the first message');
      speechAt = 1000;
      rec.move(speechAt);
      sendPcm(c, HELLO);
      await fence(c);
      // The user goes quiet (muted: nothing is sent) for a second, then sends a second of silence.
      rec.move(pcmMs(HELLO) + 1000);
      replyAt = speechAt + pcmMs(HELLO) + 1000;
      sendPcm(c, SILENCE);
      await fence(c);
      await answered(c);
      rec.move(5000);
      endAt = replyAt + 5000;
      await c.close();
      // The clock is held until the session has been finalised (its recording ends by it).
      await record(sessionId);
    } finally {
      rec.release();
    }
    const res = await download(sessionId);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.headers['content-type'], 'audio/wav');
    assert.equal(res.headers['accept-ranges'], 'bytes');
    wav = decodeWav(res.body as Buffer);
  });

  it('is a 16 kHz two-channel WAV as long as the session, by the clock', async () => {
    assert.equal(wav.sampleRate, RATE);
    assert.equal(wav.channels, 2);
    assert.equal(wav.left.length, at(endAt));
    const body = await record(sessionId);
    assert.equal(body.recording.status, 'completed');
    assert.equal(body.recording.sample_rate, RATE);
    assert.equal(body.recording.channels, 2);
    assert.equal(body.recording.format, 'wav');
    assert.equal(body.recording.duration, endAt / 1000);
    assert.equal(body.recording.size_bytes, 44 + at(endAt) * 4);
    assert.equal(body.recording.truncated, false);
    assert.match(body.recording_url, new RegExp(`/api/v1/realtime/conversations/${sessionId}/recording/download\\?expires=\\d+&signature=[0-9a-f]{64}$`));
  });

  it("has the user's fixture speech in the left channel at the moment it was sent, silence around it", () => {
    assertSamplesAt(wav.left, HELLO, at(speechAt), 'the fixture speech in the left channel');
    assert.equal(loud(wav.left, 0, at(speechAt)), 0, 'nothing before the user spoke');
    const speechEnd = at(speechAt + pcmMs(HELLO));
    assert.equal(loud(wav.left, speechEnd, wav.left.length), 0, 'silence while muted, then the silence sent');
  });

  it("has the agent's audio in the right channel: the first message at the start, the answer after the user's turn", () => {
    assert.ok(loud(wav.right, 0, at(1000)) > at(50), 'the first message plays from the start');
    assert.equal(loud(wav.right, at(1000), at(replyAt)), 0, 'the agent is silent while the user speaks');
    assert.ok(loud(wav.right, at(replyAt), at(endAt)) > at(50), 'the answer follows');
    assert.equal(loud(wav.left, at(replyAt), at(endAt)), 0, 'the user is silent meanwhile');
  });

  it('call.completed carries the same recording, and a link the receiver fetches without a key', async () => {
    const event = await eventFor(sessionId);
    const body = await record(sessionId);
    assert.deepEqual(event.recording, body.recording);
    const fetched = await fetch(event.recording_url);
    assert.equal(fetched.status, 200);
    assert.equal(fetched.headers.get('content-type'), 'audio/wav');
    assert.deepEqual(Buffer.from(await fetched.arrayBuffer()), (await download(sessionId)).body);
  });

  it('Range: 206 with the part asked for, a suffix, 416 beyond the end', async () => {
    const whole = (await download(sessionId)).body as Buffer;
    const size = whole.length;
    const mid = await download(sessionId, { Range: 'bytes=1000-70999' });
    assert.equal(mid.status, 206);
    assert.equal(mid.headers['content-range'], `bytes 1000-70999/${size}`);
    assert.deepEqual(mid.body, whole.subarray(1000, 71000));
    const tail = await download(sessionId, { Range: 'bytes=-100' });
    assert.equal(tail.status, 206);
    assert.deepEqual(tail.body, whole.subarray(size - 100));
    const beyond = await t.http.get(`/api/v1/realtime/conversations/${sessionId}/recording`).set(bearer(tn.apiKey)).set('Range', `bytes=${size}-`);
    assert.equal(beyond.status, 416);
    assert.equal(beyond.headers['content-range'], `bytes */${size}`);
  });

  it('the signed link works without a key (Range too) until it expires; an altered one never', async () => {
    const url = new URL((await record(sessionId)).recording_url);
    const path = `${url.pathname}${url.search}`;
    const ok = await binary(t.http.get(path));
    assert.equal(ok.status, 200);
    assert.deepEqual(ok.body, (await download(sessionId)).body);
    const part = await binary(t.http.get(path).set('Range', 'bytes=0-3'));
    assert.equal(part.status, 206);
    assert.equal((part.body as Buffer).toString('ascii'), 'RIFF');
    const size = (ok.body as Buffer).length;
    const beyond = await t.http.get(path).set('Range', `bytes=${size}-`);
    assert.equal(beyond.status, 416);
    assert.equal(beyond.headers['content-range'], `bytes */${size}`);
    assert.equal(beyond.body.error.code, 'range_not_satisfiable');
    // A link whose parts are not of their form at all is refused before its signature is checked.
    const garbled = await t.http.get(path.replace(/expires=\d+/, 'expires=soon'));
    assert.equal(garbled.status, 422);
    assert.equal(garbled.body.error.param, 'expires');
    const sig = url.searchParams.get('signature')!;
    const forged = await t.http.get(path.replace(sig, `${sig.slice(0, -1)}${sig.endsWith('0') ? '1' : '0'}`));
    assert.equal(forged.status, 403);
    assert.equal(forged.body.error.code, 'invalid_signature');
    // A call's link path does not take a session's id.
    const asCall = await t.http.get(path.replace('/realtime/conversations/', '/calls/'));
    assert.equal(asCall.status, 422);
    offsetMs += 601_000;
    try {
      const expired = await t.http.get(path);
      assert.equal(expired.status, 403);
      assert.equal(expired.body.error.code, 'recording_url_expired');
    } finally {
      offsetMs -= 601_000;
    }
  });

  it('another workspace cannot download or delete it; an unknown session is conversation_not_found', async () => {
    const other = await tenant(t);
    assert.equal((await t.http.get(`/api/v1/realtime/conversations/${sessionId}/recording`).set(bearer(other.apiKey))).status, 403);
    assert.equal((await t.http.delete(`/api/v1/realtime/conversations/${sessionId}/recording`).set(bearer(other.apiKey))).status, 403);
    const unknown = await t.http.get('/api/v1/realtime/conversations/conv_01JD5Z7Q8Y1C2B3A4N5M6K7P8R/recording').set(bearer(tn.apiKey));
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, 'conversation_not_found');
    assert.equal((await t.http.get(`/api/v1/realtime/conversations/${sessionId}/recording`)).status, 401);
  });
});

describe('barge-in', () => {
  it("the agent's audio stops in the right channel where the user spoke over it", async () => {
    const agentId = await createAgent(t, tn, { first_message: 'Welcome to Acme Dental. '.repeat(60), recording: { enabled: true } });
    rec.hold();
    let sessionId: string;
    const cut = 1000;
    const answerAt = cut + 5000;
    try {
      const s = await open(agentId);
      sessionId = s.sessionId;
      const { c } = s;
      // More of the greeting has arrived than plays before the user cuts in; the rest is still coming.
      await waitFor(async () => agentMsReceived(c) >= 1500, 15_000, 'a second and a half of the greeting');
      rec.move(cut);
      sendPcm(c, QUESTION);
      await has(c, (m) => m.type === 'interrupted', 'the interruption');
      rec.move(answerAt - cut);
      await answered(c);
      rec.move(3000);
      await c.close();
      await record(sessionId);
    } finally {
      rec.release();
    }
    const body = await record(sessionId);
    assert.equal(body.interruption_count, 1);
    const wav = decodeWav((await download(sessionId)).body as Buffer);
    assertSamplesAt(wav.left, QUESTION, at(cut), 'the question in the left channel');
    assert.ok(loud(wav.right, 0, at(cut)) > at(cut) * 0.3, 'the greeting was playing until the user cut in');
    // The resampler's filter rings for a few samples past the cut at most.
    assert.equal(loud(wav.right, at(cut) + 32, at(answerAt)), 0, 'the rest of the greeting was never heard');
    assert.ok(loud(wav.right, at(answerAt), wav.right.length) > 0, 'the answer plays after the question');
  });
});

describe('only when the setting says so', () => {
  it('an agent with recording off: nothing is written, the record and event have no recording, the download says not_enabled', async () => {
    const agentId = await createAgent(t, tn);
    const { c, sessionId } = await open(agentId);
    await c.next('turn_complete');
    sendPcm(c, HELLO);
    await fence(c);
    await c.close();
    const body = await record(sessionId);
    assert.equal('recording' in body, false);
    assert.equal('recording_url' in body, false);
    const event = await eventFor(sessionId);
    assert.equal('recording' in event, false);
    assert.equal(await recordingRows(sessionId), 0);
    const dl = await t.http.get(`/api/v1/realtime/conversations/${sessionId}/recording`).set(bearer(tn.apiKey));
    assert.equal(dl.status, 404);
    assert.equal(dl.body.error.code, 'recording_not_found');
    assert.equal(dl.body.error.reason, 'not_enabled');
    const del = await t.http.delete(`/api/v1/realtime/conversations/${sessionId}/recording`).set(bearer(tn.apiKey));
    assert.equal(del.status, 404);
    assert.equal(del.body.error.reason, 'not_enabled');
  });

  it('a text session of a recording agent records nothing', async () => {
    const agentId = await createAgent(t, tn, { recording: { enabled: true } });
    const { c, sessionId } = await open(agentId, 'text');
    await c.next('turn_complete');
    c.sendFrame('text/plain', Buffer.from('When are you open?').toString('base64'));
    await c.next('turn_complete');
    await c.close();
    const body = await record(sessionId);
    assert.equal('recording' in body, false);
    assert.equal(await recordingRows(sessionId), 0);
    const dl = await t.http.get(`/api/v1/realtime/conversations/${sessionId}/recording`).set(bearer(tn.apiKey));
    assert.equal(dl.status, 404);
    assert.equal(dl.body.error.reason, 'not_enabled');
  });

  it("a camera session records its audio (not its images): the user's speech in the left channel", async () => {
    const agentId = await createAgent(t, tn, { recording: { enabled: true } });
    const { c, sessionId } = await open(agentId, 'camera');
    await c.next('turn_complete');
    c.sendFrame('image/jpeg', fixture('images/camera-frame.jpg'));
    sendPcm(c, HELLO);
    await fence(c);
    await c.close();
    const body = await record(sessionId);
    assert.equal(body.source, 'camera');
    assert.equal(body.recording.sample_rate, RATE);
    const wav = decodeWav((await download(sessionId)).body as Buffer);
    const where = findSamples(wav.left, HELLO);
    assert.ok(where >= 0, 'the speech is in the left channel');
    assertSamplesAt(wav.left, HELLO, where, 'the whole speech in the left channel');
  });

  it('the setting as the session started decides, whatever the agent says by its end', async () => {
    const agentId = await createAgent(t, tn, { recording: { enabled: true } });
    const { c, sessionId } = await open(agentId);
    await c.next('turn_complete');
    const off = await t.http
      .patch(`/api/v1/agents/${agentId}`)
      .set(bearer(tn.apiKey))
      .send({ recording: { enabled: false } });
    assert.equal(off.status, 200);
    await c.close();
    assert.equal((await record(sessionId)).recording.status, 'completed');
  });
});

describe('a live session, deleting, retention and the size cap', () => {
  it("a live session's recording: not_started before anything is stored, what is stored so far after, not deletable until it ends", async () => {
    const agentId = await createAgent(t, tn, { recording: { enabled: true } });
    rec.hold();
    let sessionId: string;
    try {
      const s = await open(agentId);
      sessionId = s.sessionId;
      await s.c.next('turn_complete');
      await waitFor(async () => (await recordingRows(sessionId)) === 1, 5000, 'the recording row');
      const early = await t.http.get(`/api/v1/realtime/conversations/${sessionId}/recording`).set(bearer(tn.apiKey));
      assert.equal(early.status, 404);
      assert.equal(early.body.error.reason, 'not_started');
      assert.equal((await t.http.get(`/api/v1/realtime/conversations/${sessionId}`).set(bearer(tn.apiKey))).status, 404, 'no record while live');
      rec.move(2000);
      const sofar = await waitFor(
        async () => {
          const res = await download(sessionId);
          return res.status === 200 ? res : null;
        },
        5000,
        'the first second flushed',
      );
      assert.ok(decodeWav(sofar.body as Buffer).left.length >= at(1000), 'up to a quarter second ago, at the last flush');
      const del = await t.http.delete(`/api/v1/realtime/conversations/${sessionId}/recording`).set(bearer(tn.apiKey));
      assert.equal(del.status, 409);
      assert.equal(del.body.error.code, 'recording_in_progress');
      await s.c.close();
      await record(sessionId);
    } finally {
      rec.release();
    }
    const body = await record(sessionId);
    assert.equal(body.recording.duration, 2);
  });

  it('delete: the audio goes, the record no longer shows it, the download says deleted, a second delete is 404', async () => {
    const agentId = await createAgent(t, tn, { recording: { enabled: true } });
    const { c, sessionId } = await open(agentId);
    await c.next('turn_complete');
    await c.close();
    const before = await record(sessionId);
    assert.ok(before.recording);
    const del = await t.http.delete(`/api/v1/realtime/conversations/${sessionId}/recording`).set(bearer(tn.apiKey));
    assert.equal(del.status, 200);
    assert.deepEqual(del.body, { conversation_id: sessionId, deleted: true });
    const link = new URL(before.recording_url);
    const byLink = await t.http.get(`${link.pathname}${link.search}`);
    assert.equal(byLink.status, 404, 'the signed link of a deleted recording');
    assert.equal(byLink.body.error.code, 'recording_not_found');
    assert.equal(byLink.body.error.reason, 'deleted');
    const afterDelete = await record(sessionId);
    assert.equal('recording' in afterDelete, false);
    const [row] = await t.service.db.knex('recordings').where({ conversation_id: sessionId });
    assert.equal(Number(row.bytes), 0);
    assert.equal((await t.service.db.knex('recording_chunks').where({ recording_id: row.id })).length, 0);
    const dl = await t.http.get(`/api/v1/realtime/conversations/${sessionId}/recording`).set(bearer(tn.apiKey));
    assert.equal(dl.status, 404);
    assert.equal(dl.body.error.reason, 'deleted');
    const again = await t.http.delete(`/api/v1/realtime/conversations/${sessionId}/recording`).set(bearer(tn.apiKey));
    assert.equal(again.status, 404);
    assert.equal(again.body.error.reason, 'deleted');
  });

  it("retention: past the workspace's retention the job's sweep removes it, and the download says expired", async () => {
    const agentId = await createAgent(t, tn, { recording: { enabled: true } });
    const { c, sessionId } = await open(agentId);
    await c.next('turn_complete');
    await c.close();
    assert.ok((await record(sessionId)).recording);
    offsetMs += 31 * 86_400_000;
    try {
      assert.ok((await t.service.recordings.sweep()) >= 1);
      const res = await t.http.get(`/api/v1/realtime/conversations/${sessionId}/recording`).set(bearer(tn.apiKey));
      assert.equal(res.status, 404);
      assert.equal(res.body.error.reason, 'expired');
      assert.equal('recording' in (await record(sessionId)), false);
    } finally {
      offsetMs -= 31 * 86_400_000;
    }
  });

  it('the size cap: a session recording stops at RECORDING_MAX_BYTES and says truncated', async () => {
    const capClock = heldClock();
    const capped = await startTestService({ ...FAST, RECORDING_MAX_BYTES: '64000' }, { recordingClock: capClock.clock });
    try {
      const ctn = await tenant(capped);
      const agentId = await createAgent(capped, ctn, { recording: { enabled: true } });
      capClock.hold();
      const c = connect((await mintSession(capped, ctn, agentId, 'voice')).ws_url);
      const sessionId = String((await c.next('session_started')).session_id);
      await c.next('turn_complete');
      capClock.move(3000);
      await c.close();
      const body = await sessionRecord(capped, ctn, sessionId);
      assert.equal(body.recording.truncated, true);
      assert.equal(body.recording.duration, 1);
      assert.equal(body.recording.size_bytes, 44 + 64000);
      const dl = await downloadSessionRecording(capped, ctn, sessionId);
      assert.equal((dl.body as Buffer).length, 44 + 64000);
    } finally {
      await capped.close();
    }
  });
});
