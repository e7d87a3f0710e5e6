/**
 * The carrier side of calls: signed callbacks (a forged or stale one is refused and changes nothing,
 * a redelivered event is applied once, an unknown call is acknowledged), a media stream that does not
 * present its call's token, a carrier that never calls back, and the service configured against
 * carriers by URL (as in production: provider_b events verified with each agent's own public key).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { FAST_CALLS, clientState, createPhoneAgent, providerBConfigFor, getCall, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { startSandboxCarriers, type SandboxCarriers } from '../../src/sandbox/carriers/server.js';
import { twilioSignature, webhookKeyFromSeed, telnyxSignatureHeaders } from '../../src/sandbox/carriers/signing.js';

const SEED = randomBytes(32);
let external: SandboxCarriers;
let t: TestService;
let tn: Tenant;

before(async () => {
  external = await startSandboxCarriers({ speed: 4, ringMs: 40, signingSeed: SEED });
  t = await startTestService({
    ...FAST_CALLS,
    PROVIDER_A_API_URL: external.providerAUrl,
    PROVIDER_B_API_URL: external.providerBUrl,
    CALL_DIAL_GRACE_MS: '300',
    CALL_ORPHAN_AFTER_MS: '3000',
    CALL_HEARTBEAT_MS: '300',
  });
  tn = await tenant(t);
});

after(async () => {
  await t.close();
  await external.close();
});

const formBody = (params: Record<string, string>) => new URLSearchParams(params).toString();

describe('carriers configured by URL', () => {
  it('runs a call through each carrier; provider_b events are verified with the agent public key', async () => {
    for (const provider of ['provider_a', 'provider_b'] as const) {
      const agentId = await createPhoneAgent(t, tn, provider, provider === 'provider_b' ? providerBConfigFor(external.providerBPublicKey) : {});
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('5555') });
      const call = await waitForCall(t, tn, res.body.call_id);
      assert.equal(call.status, 'completed', provider);
      assert.equal(call.answered_by, 'human');
    }
    assert.equal(t.service.sandbox.carriers, null, 'no in-process sandbox');
  });

  it('a provider_b agent whose public_key is not the carrier key gets no event through', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_b');
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0002') });
    // Its busy event is refused (403): the call ends only at its deadline, as a carrier failure.
    const call = await waitForCall(t, tn, res.body.call_id, undefined, 15_000);
    assert.equal(call.status, 'failed');
    assert.equal(call.end_reason, 'carrier_error');
    const sim = external.calls().find((c) => c.callSid === call.call_sid)!;
    assert.ok(
      sim.callbacks.some((cb) => cb.httpStatus === 403),
      'the carrier saw its events refused',
    );
  });

  it('the sandbox helper answers 409 sandbox_not_enabled against a real carrier', async () => {
    const res = await t.http.post('/api/v1/sandbox/inbound-calls').set(bearer(tn.apiKey)).send({ to_number: '+14155550100' });
    assert.equal(res.status, 404, 'no agent answers it');
    const agentId = await createPhoneAgent(t, tn, 'provider_a', {
      provider_a_config: { account_sid: `AC${randomBytes(16).toString('hex')}`, auth_token: randomBytes(16).toString('hex'), phone_number: '+14155550177' },
    });
    assert.equal((await t.http.post(`/api/v1/agents/${agentId}/telephony/provider_a/inbound`).set(bearer(tn.apiKey))).status, 200);
    const ring = await t.http.post('/api/v1/sandbox/inbound-calls').set(bearer(tn.apiKey)).send({ to_number: '+14155550177' });
    assert.equal(ring.status, 409);
    assert.equal(ring.body.error.code, 'sandbox_not_enabled');
  });
});

describe('signed callbacks', () => {
  it('provider_a: a forged or missing signature is refused with 403 and changes nothing; a good one moves the call', async () => {
    const token = randomBytes(16).toString('hex');
    const sid = `AC${randomBytes(16).toString('hex')}`;
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { provider_a_config: { account_sid: sid, auth_token: token, phone_number: '+14155550102' } });
    const callId = (await placeCall(t, tn, { agent_id: agentId, to_number: '+14155557777' })).body.call_id as string;
    await waitForCall(t, tn, callId, (c) => c.call_sid !== null);
    const before = await getCall(t, tn, callId);
    const path = `/telephony/provider_a/status?call_id=${callId}`;
    const params = { CallSid: before.call_sid, AccountSid: sid, CallStatus: 'busy', SequenceNumber: '99' };
    for (const signature of ['bad', undefined, twilioSignature('another-token', `${t.url}${path}`, params)]) {
      const req = t.http.post(path).type('form').send(formBody(params));
      if (signature) req.set('X-Twilio-Signature', signature);
      const res = await req;
      assert.equal(res.status, 403, JSON.stringify(res.body));
      assert.equal(res.body.error.code, 'invalid_signature');
    }
    assert.equal((await getCall(t, tn, callId)).status === 'busy', false, 'nothing changed');
    assert.ok(!t.logs.join('').includes(token), 'the auth token is never logged');
    const good = await t.http
      .post(path)
      .type('form')
      .set('X-Twilio-Signature', twilioSignature(token, `${t.url}${path}`, params))
      .send(formBody(params));
    assert.equal(good.status, 204);
    const call = await waitForCall(t, tn, callId);
    assert.ok(['busy', 'completed'].includes(call.status));
  });

  it('provider_a: a status report older than one recorded (its SequenceNumber) changes nothing; a newer one applies', async () => {
    const token = randomBytes(16).toString('hex');
    const sid = `AC${randomBytes(16).toString('hex')}`;
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { provider_a_config: { account_sid: sid, auth_token: token, phone_number: sandboxNumber() } });
    // No answer: it rings until its ring timeout, long after the reports below.
    const callId = (await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0003') })).body.call_id as string;
    const live = await waitForCall(t, tn, callId, (c) => c.call_sid !== null);
    const path = `/telephony/provider_a/status?call_id=${callId}`;
    const report = (CallStatus: string, SequenceNumber: string) => {
      const params = { CallSid: live.call_sid, AccountSid: sid, CallStatus, SequenceNumber };
      return t.http
        .post(path)
        .type('form')
        .set('X-Twilio-Signature', twilioSignature(token, `${t.url}${path}`, params))
        .send(formBody(params));
    };
    // Far ahead of the carrier's own numbering: its later reports are older than this one.
    assert.equal((await report('ringing', '1000')).status, 204);
    assert.equal((await getCall(t, tn, callId)).status, 'ringing');
    assert.equal((await report('busy', '999')).status, 204, 'an old report is acknowledged');
    const after = await getCall(t, tn, callId);
    assert.equal(after.status, 'ringing', 'and changes nothing');
    assert.equal((await report('busy', '1001')).status, 204);
    const ended = await waitForCall(t, tn, callId);
    assert.equal(ended.status, 'busy');
  });

  it('no oracle: an unsigned or badly signed callback gets the same 403 whether its call or number exists', async () => {
    const token = randomBytes(16).toString('hex');
    const sid = `AC${randomBytes(16).toString('hex')}`;
    const served = sandboxNumber();
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { provider_a_config: { account_sid: sid, auth_token: token, phone_number: served } });
    assert.equal((await t.http.post(`/api/v1/agents/${agentId}/telephony/provider_a/inbound`).set(bearer(tn.apiKey))).status, 200);
    const callId = (await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0003') })).body.call_id as string;
    const known = await waitForCall(t, tn, callId, (c) => c.call_sid !== null);
    const unknownId = 'call_01JD5Z9K3M4N5P6Q7R8S9T0V1W';
    /** What an outsider sees: status and body without the request id. */
    const seen = (res: { status: number; body: { error?: Record<string, unknown> } }) =>
      JSON.stringify({ status: res.status, error: res.body.error ? { ...res.body.error, request_id: null } : null });
    const postA = (path: string, params: Record<string, string>, signature?: string) => {
      const req = t.http.post(path).type('form');
      if (signature) req.set('X-Twilio-Signature', signature);
      return req.send(formBody(params));
    };
    for (const signature of [undefined, 'bad', twilioSignature('another-token', `${t.url}/x`, {})]) {
      for (const kind of ['status', 'amd', 'voice'] as const) {
        const params = {
          CallSid: known.call_sid,
          AccountSid: sid,
          From: served,
          To: known.to_number,
          CallStatus: 'completed',
          Direction: 'outbound-api',
          AnsweredBy: 'human',
        };
        const existing = await postA(`/telephony/provider_a/${kind}?call_id=${callId}`, params, signature);
        const missing = await postA(
          `/telephony/provider_a/${kind}?call_id=${unknownId}`,
          { ...params, CallSid: `CA${randomBytes(16).toString('hex')}` },
          signature,
        );
        assert.equal(existing.status, 403, kind);
        assert.equal(seen(missing), seen(existing), `${kind}: an unknown call answers as an existing one`);
      }
      const inbound = (to: string) => ({
        CallSid: `CA${randomBytes(16).toString('hex')}`,
        AccountSid: sid,
        From: '+14155550199',
        To: to,
        CallStatus: 'ringing',
        Direction: 'inbound',
      });
      const servedRes = await postA('/telephony/provider_a/voice', inbound(served), signature);
      const unservedRes = await postA('/telephony/provider_a/voice', inbound(sandboxNumber()), signature);
      assert.equal(servedRes.status, 403);
      assert.equal(seen(unservedRes), seen(servedRes), 'a number served here answers as one that is not');
    }
    // provider_b: an event about an existing call and one about no call, both unsigned.
    const agentB = await createPhoneAgent(t, tn, 'provider_b', providerBConfigFor(external.providerBPublicKey, sandboxNumber()));
    const callB = (await placeCall(t, tn, { agent_id: agentB, to_number: sandboxNumber('0003') })).body.call_id as string;
    const liveB = await waitForCall(t, tn, callB, (c) => c.call_sid !== null);
    const eventB = (callId: string) =>
      JSON.stringify({
        data: {
          record_type: 'event',
          event_type: 'call.hangup',
          id: randomBytes(8).toString('hex'),
          occurred_at: new Date().toISOString(),
          payload: { call_control_id: liveB.call_sid, client_state: clientState(callId), hangup_cause: 'normal_clearing' },
        },
        meta: { attempt: 1 },
      });
    const postB = (body: string) => t.http.post('/telephony/provider_b/events').set('Content-Type', 'application/json').send(body);
    const existingB = await postB(eventB(callB));
    const missingB = await postB(eventB(unknownId));
    assert.equal(existingB.status, 403);
    assert.equal(seen(missingB), seen(existingB), 'provider_b: an unknown call answers as an existing one');
    await t.http.post(`/api/v1/calls/${callId}/hangup`).set(bearer(tn.apiKey));
    await t.http.post(`/api/v1/calls/${callB}/hangup`).set(bearer(tn.apiKey));
  });

  it('provider_b: a stale timestamp is 403 signature_expired, a forged one 403, a redelivered event applies once', async () => {
    const keys = webhookKeyFromSeed(SEED);
    const agentId = await createPhoneAgent(t, tn, 'provider_b', {
      provider_b_config: {
        api_key: `KEY${randomBytes(12).toString('hex')}`,
        connection_id: '654321',
        phone_number: '+14155550103',
        public_key: external.providerBPublicKey,
      },
    });
    external.setScript('+14155558888', [{ waitForAgent: true }, { pause: 20_000 }]);
    const callId = (await placeCall(t, tn, { agent_id: agentId, to_number: '+14155558888' })).body.call_id;
    const live = await waitForCall(t, tn, callId, (c) => c.status === 'in_progress');
    const event = (id: string, type: string, payload: Record<string, unknown> = {}) =>
      JSON.stringify({
        data: {
          record_type: 'event',
          event_type: type,
          id,
          occurred_at: new Date().toISOString(),
          payload: { call_control_id: live.call_sid, client_state: clientState(callId), ...payload },
        },
        meta: { attempt: 1 },
      });
    const post = (body: string, headers: Record<string, string>) =>
      t.http.post('/telephony/provider_b/events').set('Content-Type', 'application/json').set(headers).send(body);
    const now = Math.floor(Date.now() / 1000);

    const amd = event(randomBytes(8).toString('hex'), 'call.machine.detection.ended', { result: 'human' });
    const stale = await post(amd, telnyxSignatureHeaders(keys.privateKey, amd, now - 301));
    assert.equal(stale.status, 403);
    assert.equal(stale.body.error.code, 'signature_expired');
    const forged = await post(amd, telnyxSignatureHeaders(webhookKeyFromSeed(randomBytes(32)).privateKey, amd, now));
    assert.equal(forged.status, 403);
    assert.equal(forged.body.error.code, 'invalid_signature');
    const unsigned = await post(amd, {});
    assert.equal(unsigned.status, 403);

    const hangup = event(randomBytes(8).toString('hex'), 'call.hangup', { hangup_cause: 'normal_clearing' });
    const headers = telnyxSignatureHeaders(keys.privateKey, hangup, now);
    assert.equal((await post(hangup, headers)).status, 204);
    assert.equal((await post(hangup, headers)).status, 204, 'a redelivery is acknowledged');
    const seen = await t.service.db
      .knex('carrier_events')
      .where({ provider: 'provider_b' })
      .whereIn('event_id', [JSON.parse(hangup).data.id]);
    assert.equal(seen.length, 1);
    const call = await waitForCall(t, tn, callId);
    assert.equal(call.status, 'completed');
  });
});

describe('media streams', () => {
  it('a stream that does not present its call token is closed with 1008', async () => {
    const ws = new WebSocket(`${t.url.replace('http', 'ws')}/telephony/provider_a/media`);
    await new Promise((r) => ws.once('open', r));
    const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
    ws.send(JSON.stringify({ event: 'connected', protocol: 'Call', version: '1.0.0' }));
    ws.send(
      JSON.stringify({
        event: 'start',
        sequenceNumber: '1',
        streamSid: 'MZ1',
        start: {
          accountSid: 'AC1',
          streamSid: 'MZ1',
          callSid: 'CA1',
          tracks: ['inbound'],
          mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
          customParameters: { call_id: 'call_01JD5Z9K3M4N5P6Q7R8S9T0V1W', stream_token: 'mst_guess' },
        },
      }),
    );
    assert.equal(await closed, 1008);
  });
});

describe('a carrier that never calls back', () => {
  it('an unanswered call with no word from the carrier still ends, at its deadline, as a carrier failure; one call.completed each', async () => {
    external.setCallbacksEnabled(false);
    let ids: string[];
    try {
      ids = await Promise.all(
        (['provider_a', 'provider_b'] as const).map(async (provider) => {
          const agentId = await createPhoneAgent(
            t,
            tn,
            provider,
            provider === 'provider_b'
              ? {
                  provider_b_config: {
                    api_key: `KEY${randomBytes(12).toString('hex')}`,
                    connection_id: '777',
                    phone_number: '+14155550104',
                    public_key: external.providerBPublicKey,
                  },
                }
              : {},
          );
          const callId = (await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0003') })).body.call_id as string;
          const call = await waitForCall(t, tn, callId, undefined, 20_000);
          assert.equal(call.status, 'failed', provider);
          assert.equal(call.end_reason, 'carrier_error');
          return callId;
        }),
      );
    } finally {
      external.setCallbacksEnabled(true);
    }
    for (const callId of ids) {
      const events = await t.service.db.knex('webhook_events').where({ call_id: callId, kind: 'call.completed' });
      assert.equal(events.length, 1);
      assert.deepEqual(await t.service.db.knex('session_leases').where({ id: callId }), [], 'its slot is free');
    }
  });

  it('a person call whose carrier sends no status callbacks ends when its media stream ends', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    external.setCallbacksEnabled(false);
    try {
      const callId = (await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('5555') })).body.call_id;
      const call = await waitForCall(t, tn, callId, undefined, 20_000);
      assert.equal(call.status, 'completed');
      assert.equal(call.answered_by, null, 'no answering-machine result arrived');
    } finally {
      external.setCallbacksEnabled(true);
    }
  });
});
