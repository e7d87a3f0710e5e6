/**
 * One media stream per call, and the first answering-machine result wins (issue 21). As an attacker
 * who owns the agent's provider_a auth token (a tenant) or captured a signed request would: replaying
 * the voice webhook of a live call gives no second stream token; a second stream for a live call is
 * closed with 1008 and gets none of the agent's audio while the first keeps getting it; a replayed
 * `machine_end_beep` (provider_a) or a second detection result (provider_b) does not turn a person's
 * call into voicemail.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, clientState, createPhoneAgent, getCall, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { startSandboxCarriers, type CalleeScript, type SandboxCarriers } from '../../src/sandbox/carriers/server.js';
import { sha256Hex } from '../../src/lib/tokens.js';
import { twilioSignature, webhookKeyFromSeed, telnyxSignatureHeaders } from '../../src/sandbox/carriers/signing.js';

const SEED = randomBytes(32);
let carriers: SandboxCarriers;
let t: TestService;
let tn: Tenant;

before(async () => {
  carriers = await startSandboxCarriers({ speed: 4, ringMs: 40, signingSeed: SEED });
  t = await startTestService({ ...FAST_CALLS, PROVIDER_A_API_URL: carriers.providerAUrl, PROVIDER_B_API_URL: carriers.providerBUrl });
  tn = await tenant(t);
});

after(async () => {
  await t.close();
  await carriers.close();
});

const formBody = (params: Record<string, string>) => new URLSearchParams(params).toString();

/** A provider_a agent whose auth token the test knows (as its tenant does). */
async function providerAAgent(): Promise<{ agentId: string; token: string; sid: string; from: string }> {
  const token = randomBytes(16).toString('hex');
  const sid = `AC${randomBytes(16).toString('hex')}`;
  const from = sandboxNumber();
  const agentId = await createPhoneAgent(t, tn, 'provider_a', { provider_a_config: { account_sid: sid, auth_token: token, phone_number: from } });
  return { agentId, token, sid, from };
}

/** A person who hears the first message, then keeps the line open (silent) for a long while. */
async function liveCall(agentId: string, script: CalleeScript = [{ waitForAgent: true }, { pause: 120_000 }]) {
  const to = sandboxNumber();
  carriers.setScript(to, script);
  const callId = (await placeCall(t, tn, { agent_id: agentId, to_number: to })).body.call_id as string;
  const call = await waitForCall(t, tn, callId, (c) => c.status === 'in_progress');
  const sim = await carriers.waitForCall((c) => c.callSid === call.call_sid && c.streamOpened && c.agentAudioMs > 0, 20_000);
  return { callId, to, call, sim };
}

async function hangUp(callId: string) {
  await t.http.post(`/api/v1/calls/${callId}/hangup`).set(bearer(tn.apiKey));
  return waitForCall(t, tn, callId);
}

/** Opens a provider_a media stream presenting `token` for the call; resolves with its close code and the media frames it got. */
async function secondStream(callId: string, callSid: string, token: string): Promise<{ code: number; mediaFrames: number }> {
  const ws = new WebSocket(`${t.url.replace('http', 'ws')}/telephony/provider_a/media`);
  let mediaFrames = 0;
  ws.on('message', (data) => {
    if ((JSON.parse(data.toString()) as { event?: string }).event === 'media') mediaFrames += 1;
  });
  await new Promise((r) => ws.once('open', r));
  const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
  ws.send(JSON.stringify({ event: 'connected', protocol: 'Call', version: '1.0.0' }));
  ws.send(
    JSON.stringify({
      event: 'start',
      sequenceNumber: '1',
      streamSid: 'MZattacker',
      start: {
        accountSid: 'AC1',
        streamSid: 'MZattacker',
        callSid,
        tracks: ['inbound'],
        mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
        customParameters: { call_id: callId, stream_token: token },
      },
    }),
  );
  // A stream that was taken would stay open: close it after a while so the test ends either way.
  const timer = setTimeout(() => ws.close(1000), 3000);
  const code = await closed;
  clearTimeout(timer);
  return { code, mediaFrames };
}

describe('one media stream per call', () => {
  it('replaying the signed provider_a voice webhook of a live call gives no stream token (409) and changes nothing', async () => {
    const a = await providerAAgent();
    const { callId, to, call } = await liveCall(a.agentId);
    try {
      const path = `/telephony/provider_a/voice?call_id=${callId}`;
      const params = {
        CallSid: call.call_sid,
        AccountSid: a.sid,
        From: a.from,
        To: to,
        CallStatus: 'in-progress',
        Direction: 'outbound-api',
        ApiVersion: '2010-04-01',
      };
      for (let i = 0; i < 3; i++) {
        const res = await t.http
          .post(path)
          .type('form')
          .set('X-Twilio-Signature', twilioSignature(a.token, `${t.url}${path}`, params))
          .send(formBody(params));
        assert.equal(res.status, 409, res.text);
        assert.equal(res.body.error.code, 'call_stream_connected');
        assert.ok(!res.text.includes('mst_'), 'no stream token in the answer');
      }
      const row = await t.service.db.knex('calls').where({ id: callId }).first();
      assert.equal(row.stream_token_hash, null, 'no token outstanding');
      assert.equal((await getCall(t, tn, callId)).status, 'in_progress');
    } finally {
      await hangUp(callId);
    }
  });

  it('a second stream for a live call is closed with 1008 and gets no audio; the first keeps the conversation', async () => {
    const a = await providerAAgent();
    // The person says something once the test has tried its second stream, so the agent speaks again.
    const { callId, call, sim } = await liveCall(a.agentId, [
      { waitForAgent: true },
      { pause: 24_000 },
      { say: 'Hello, this is Sam.' },
      { waitForAgent: true },
      { pause: 120_000 },
    ]);
    try {
      // A token still outstanding for the call (as one the carrier was given twice): planted on the row.
      const token = `mst_${randomBytes(32).toString('base64url')}`;
      await t.service.db
        .knex('calls')
        .where({ id: callId })
        .update({ stream_token_hash: sha256Hex(token) });
      const second = await secondStream(callId, call.call_sid, token);
      assert.equal(second.code, 1008, 'the second stream is refused');
      assert.equal(second.mediaFrames, 0, 'it got none of the agent audio');
      // The person speaks after the refusal; the agent's reply reaches them on the first stream.
      await waitFor(async () => sim.spoken.includes('Hello, this is Sam.'), 20_000, 'the person to speak');
      const heard = sim.agentAudioMs;
      await waitFor(async () => sim.agentAudioMs > heard, 20_000, 'the first stream to get the agent reply');
      assert.equal(sim.streamCloseCode, null, 'the first stream is still open');
      const live = await waitForCall(t, tn, callId, (c) => c.transcript.some((e: { text: string }) => e.text === 'Hello, this is Sam.'));
      assert.equal(live.status, 'in_progress');
      assert.equal((await hangUp(callId)).status, 'completed');
    } finally {
      await hangUp(callId);
    }
  });
});

describe('the first answering-machine result wins', () => {
  it('provider_a: a replayed machine_end_beep does not turn a person call into voicemail', async () => {
    const a = await providerAAgent();
    const { callId, call } = await liveCall(a.agentId);
    await waitForCall(t, tn, callId, (c) => c.answered_by === 'human');
    const path = `/telephony/provider_a/amd?call_id=${callId}`;
    const params = { CallSid: call.call_sid, AccountSid: a.sid, AnsweredBy: 'machine_end_beep', MachineDetectionDuration: '4120' };
    const res = await t.http
      .post(path)
      .type('form')
      .set('X-Twilio-Signature', twilioSignature(a.token, `${t.url}${path}`, params))
      .send(formBody(params));
    assert.equal(res.status, 204);
    assert.equal((await getCall(t, tn, callId)).answered_by, 'human');
    const done = await hangUp(callId);
    assert.equal(done.status, 'completed');
    assert.equal(done.answered_by, 'human');
  });

  it('provider_b: a second detection result (machine) after human changes neither answered_by nor the outcome', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_b', {
      provider_b_config: {
        api_key: `KEY${randomBytes(12).toString('hex')}`,
        connection_id: '424242',
        phone_number: sandboxNumber(),
        public_key: carriers.providerBPublicKey,
      },
    });
    const { callId, call } = await liveCall(agentId);
    await waitForCall(t, tn, callId, (c) => c.answered_by === 'human');
    const body = JSON.stringify({
      data: {
        record_type: 'event',
        event_type: 'call.machine.detection.ended',
        id: randomBytes(8).toString('hex'),
        occurred_at: new Date().toISOString(),
        payload: { call_control_id: call.call_sid, client_state: clientState(callId), result: 'machine' },
      },
      meta: { attempt: 1 },
    });
    const res = await t.http
      .post('/telephony/provider_b/events')
      .set('Content-Type', 'application/json')
      .set(telnyxSignatureHeaders(webhookKeyFromSeed(SEED).privateKey, body, Math.floor(Date.now() / 1000)))
      .send(body);
    assert.equal(res.status, 204);
    assert.equal((await getCall(t, tn, callId)).answered_by, 'human');
    const done = await hangUp(callId);
    assert.equal(done.status, 'completed');
    assert.equal(done.answered_by, 'human');
  });
});
