/**
 * Caller audio has a budget (issue 21): a media stream (or a realtime session) sending audio far
 * faster than real time gets no more than real time plus a small burst through to the voice service;
 * the rest is dropped and counted in `media_audio_dropped_seconds_total`, and the conversation goes on.
 * A frame over the budget is dropped before it is read (issue 32): it costs a scan, not a JSON parse
 * and base64 decoding, as shows a frame that would be refused once read getting no answer.
 * The carrier here is the test itself: it answers an inbound provider_a call through the signed voice
 * webhook and floods the media stream it was given.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { ADMIN_TOKEN, startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, connect, createAgent, mintSession, waitFor } from '../helpers/realtime.js';
import { createPhoneAgent, getCall, waitForCall } from '../helpers/calls.js';
import { spokenText } from '../../src/sandbox/carriers/audio.js';
import { twilioSignature } from '../../src/sandbox/carriers/signing.js';

const BURST_MS = 1000;
let t: TestService;
let tn: Tenant;
/** Set: the budgets' clock stands still there (the budgets do not refill); else the monotonic clock. */
let heldAt: number | null = null;

before(async () => {
  t = await startTestService(
    {
      CALL_AUDIO_RATE: '1',
      CALL_AUDIO_BURST_MS: String(BURST_MS),
      REALTIME_AUDIO_RATE: '1',
      REALTIME_AUDIO_BURST_MS: String(BURST_MS),
      VOICE_SANDBOX_SPEED: '4',
      VOICE_SANDBOX_MS_PER_CHAR: '30',
      VOICE_SANDBOX_END_OF_TURN_MS: '500',
      CALL_SILENCE_TIMEOUT_MS: '0',
    },
    { budgetClock: () => heldAt ?? performance.now() },
  );
  tn = await tenant(t);
});

after(async () => {
  await t.close();
});

const voiceReceivedMs = () => t.service.sandbox.voice!.audioReceivedMs();

async function dropped(stream: 'call' | 'realtime'): Promise<number> {
  const res = await t.http.get('/metrics').set('Authorization', `Bearer ${ADMIN_TOKEN}`);
  assert.equal(res.status, 200);
  const m = new RegExp(`^media_audio_dropped_seconds_total\\{stream="${stream}"\\} ([0-9.e+-]+)$`, 'm').exec(res.text);
  return m ? Number(m[1]) : 0;
}

/** An inbound provider_a call the test answers as the carrier: its call id and stream token. */
async function inboundCall(): Promise<{ callId: string; token: string; callSid: string }> {
  const authToken = randomBytes(16).toString('hex');
  const sid = `AC${randomBytes(16).toString('hex')}`;
  const number = `+1415${String(Math.floor(Math.random() * 800) + 200)}${Math.floor(Math.random() * 8000) + 1000}`;
  const agentId = await createPhoneAgent(t, tn, 'provider_a', { provider_a_config: { account_sid: sid, auth_token: authToken, phone_number: number } });
  assert.equal((await t.http.post(`/api/v1/agents/${agentId}/telephony/provider_a/inbound`).set(bearer(tn.apiKey))).status, 200);
  const callSid = `CA${randomBytes(16).toString('hex')}`;
  const params = { CallSid: callSid, AccountSid: sid, From: '+14155550199', To: number, CallStatus: 'ringing', Direction: 'inbound', ApiVersion: '2010-04-01' };
  const path = '/telephony/provider_a/voice';
  const res = await t.http
    .post(path)
    .type('form')
    .set('X-Twilio-Signature', twilioSignature(authToken, `${t.url}${path}`, params))
    .send(new URLSearchParams(params).toString());
  assert.equal(res.status, 200, res.text);
  const callId = /name="call_id" value="([^"]+)"/.exec(res.text)![1];
  const token = /name="stream_token" value="([^"]+)"/.exec(res.text)![1];
  return { callId, token, callSid };
}

/** The test as the carrier of an inbound call: its media stream, started and past the agent's first audio. */
async function carrierStream(): Promise<{ callId: string; ws: WebSocket; media(payload: Buffer | string): Promise<void>; send(json: string): Promise<void> }> {
  const { callId, token, callSid } = await inboundCall();
  const ws = new WebSocket(`${t.url.replace('http', 'ws')}/telephony/provider_a/media`);
  let agentFrames = 0;
  ws.on('message', (d) => {
    if ((JSON.parse(d.toString()) as { event?: string }).event === 'media') agentFrames += 1;
  });
  await new Promise((r) => ws.once('open', r));
  let seq = 1;
  const send = (json: string) => new Promise<void>((resolve, reject) => ws.send(json, (err) => (err ? reject(err) : resolve())));
  /** A frame of caller audio; a string is sent as the payload as it is. */
  const media = (payload: Buffer | string) =>
    send(
      JSON.stringify({
        event: 'media',
        sequenceNumber: String(++seq),
        streamSid: 'MZflood',
        media: { track: 'inbound', chunk: String(seq), timestamp: '0', payload: typeof payload === 'string' ? payload : payload.toString('base64') },
      }),
    );
  await send(JSON.stringify({ event: 'connected', protocol: 'Call', version: '1.0.0' }));
  await send(
    JSON.stringify({
      event: 'start',
      sequenceNumber: '1',
      streamSid: 'MZflood',
      start: {
        accountSid: 'AC1',
        streamSid: 'MZflood',
        callSid,
        tracks: ['inbound'],
        mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
        customParameters: { call_id: callId, stream_token: token },
      },
    }),
  );
  await waitForCall(t, tn, callId, (c) => c.status === 'in_progress');
  await waitFor(async () => agentFrames > 0, 10_000, 'the agent first message');
  return { callId, ws, media, send };
}

describe('the audio budget', () => {
  it('a flooded call stream passes at most real time plus the burst; the rest is dropped and counted; the call goes on', async () => {
    const { callId, ws, media: send } = await carrierStream();
    const startedAt = performance.now();
    const before = voiceReceivedMs();
    const droppedBefore = await dropped('call');

    // 300 s of (silent) audio in 8 kB frames, as fast as the socket takes them.
    const SENT_S = 300;
    const frame = Buffer.alloc(8000, 0xff);
    await Promise.all(Array.from({ length: SENT_S }, () => send(frame)));
    const counted = await waitFor(
      async () => {
        const d = (await dropped('call')) - droppedBefore;
        const allowedS = ((performance.now() - startedAt) * 1 + BURST_MS) / 1000;
        return d >= SENT_S - allowedS ? d : null;
      },
      20_000,
      'the dropped audio to be counted',
    );
    const elapsedMs = performance.now() - startedAt;
    const received = voiceReceivedMs() - before;
    assert.ok(received <= elapsedMs + BURST_MS, `the voice service got ${received} ms of audio in ${elapsedMs} ms (burst ${BURST_MS})`);
    assert.ok(counted > 0 && counted <= SENT_S);

    // The call goes on: after a pause (the budget refills) the caller speaks in real time and is heard.
    await new Promise((r) => setTimeout(r, BURST_MS + 200));
    const speech = Buffer.concat([spokenText('Hello, this is Sam.'), Buffer.alloc(8000, 0xff)]);
    for (let i = 0; i < speech.length; i += 160) {
      await send(speech.subarray(i, i + 160));
      await new Promise((r) => setTimeout(r, 20));
    }
    const heard = await waitForCall(t, tn, callId, (c) => c.transcript.some((e: { text: string }) => e.text === 'Hello, this is Sam.'));
    assert.equal(heard.status, 'in_progress');
    ws.close(1000);
    const done = await waitForCall(t, tn, callId);
    assert.equal(done.status, 'completed');
    assert.equal((await getCall(t, tn, callId)).status, 'completed');
  });

  it('a flooded realtime session passes at most real time plus the burst; the rest is dropped and counted; the session goes on', async () => {
    const agentId = await createAgent(t, tn);
    const session = await mintSession(t, tn, agentId, 'voice');
    const c = connect(session.ws_url);
    await c.next('session_started');
    const startedAt = performance.now();
    const before = voiceReceivedMs();
    const droppedBefore = await dropped('realtime');
    const SENT_S = 300;
    const second = Buffer.alloc(32_000).toString('base64');
    for (let i = 0; i < SENT_S; i++) c.ws.send(JSON.stringify({ mime_type: 'audio/pcm', data: second }));
    const counted = await waitFor(
      async () => {
        const d = (await dropped('realtime')) - droppedBefore;
        const allowedS = (performance.now() - startedAt + BURST_MS) / 1000;
        return d >= SENT_S - allowedS ? d : null;
      },
      20_000,
      'the dropped audio to be counted',
    );
    const elapsedMs = performance.now() - startedAt;
    const received = voiceReceivedMs() - before;
    assert.ok(received <= elapsedMs + BURST_MS, `the voice service got ${received} ms of audio in ${elapsedMs} ms (burst ${BURST_MS})`);
    assert.ok(counted > 0 && counted <= SENT_S);
    // The session goes on: a typed turn gets its answer.
    c.sendFrame('text/plain', Buffer.from('What are your opening hours?'));
    await c.next((m) => m.type === 'transcript' && m.role === 'user' && String(m.text).includes('opening hours'), 10_000);
    await c.next('turn_complete', 10_000);
    await c.close();
  });

  describe('a frame over the budget is dropped before it is read', () => {
    // The budget is spent and then held still: every frame after is over it.
    const unreadable = '!'.repeat(1000);
    const junkCount = 200;

    it('on a call media stream: frames that would be refused once parsed are dropped unparsed; a frame the quick read cannot place is parsed', async () => {
      const { callId, ws, media, send } = await carrierStream();
      const ignored = () => t.logs.filter((l) => l.includes('unusable media stream frame ignored')).length;
      heldAt = performance.now();
      try {
        await media(Buffer.alloc(8 * BURST_MS, 0xff));
        const droppedBefore = await dropped('call');
        const ignoredBefore = ignored();
        // Each payload of 1000 characters would decode to nothing (an unusable frame, logged as such once parsed).
        await Promise.all(Array.from({ length: junkCount }, () => media(unreadable)));
        const perFrameS = 750 / 8000;
        await waitFor(async () => (await dropped('call')) - droppedBefore >= junkCount * perFrameS - 1e-6 || null, 20_000, 'the frames to be dropped');
        assert.equal(ignored() - ignoredBefore, 0, 'none of them was parsed');
        // `event` not first: the quick read cannot place it, so it is parsed (and found unusable).
        await send(JSON.stringify({ streamSid: 'MZflood', event: 'media', media: { track: 'inbound', payload: unreadable } }));
        await waitFor(async () => ignored() - ignoredBefore === 1 || null, 10_000, 'the frame to be parsed');
      } finally {
        heldAt = null;
      }
      ws.close(1000);
      assert.equal((await waitForCall(t, tn, callId)).status, 'completed');
    });

    it('on a realtime session: frames that would be answered invalid_base64 once read are dropped unread; the session goes on', async () => {
      const c = connect((await mintSession(t, tn, await createAgent(t, tn), 'voice')).ws_url);
      await c.next('session_started');
      heldAt = performance.now();
      try {
        c.sendFrame('audio/pcm', Buffer.alloc(32 * BURST_MS));
        const droppedBefore = await dropped('realtime');
        for (let i = 0; i < junkCount; i++) c.ws.send(`{"mime_type": "audio/pcm", "data": "${unreadable}"}`);
        const perFrameS = 750 / 32_000;
        await waitFor(async () => (await dropped('realtime')) - droppedBefore >= junkCount * perFrameS - 1e-6 || null, 20_000, 'the frames to be dropped');
        // A frame the quick read cannot place (an extra field) is read, and answered.
        c.ws.send(`{"mime_type": "audio/pcm", "data": "${unreadable}", "seq": 1}`);
        assert.equal((await c.next('error')).code, 'invalid_base64');
        assert.equal(c.messages.filter((m) => m.type === 'error').length, 1, 'only the frame that was read was answered');
      } finally {
        heldAt = null;
      }
      c.sendFrame('text/plain', Buffer.from('What are your opening hours?'));
      await c.next((m) => m.type === 'transcript' && m.role === 'user' && String(m.text).includes('opening hours'), 10_000);
      await c.close();
    });
  });
});
