/**
 * The carriers' callbacks through their front door (src/carriers/index.ts): each plug-in reads its
 * carrier's message into the call it names, a signature check against an account, and one neutral
 * event; anything malformed or unsigned reads as a message of no call that fails its check, never a
 * throw. Signed here with the sandbox's own signing code (src/sandbox/carriers/signing.ts).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createCarriers, PROVIDERS, type CallbackRequest } from '../../src/carriers/index.js';
import { telnyxSignatureHeaders, twilioSignature, webhookKeyFromSeed } from '../../src/sandbox/carriers/signing.js';

const BASE = 'https://voice.example.com';
const carriers = createCarriers(
  { provider_a: { apiUrl: 'http://127.0.0.1:9' }, provider_b: { apiUrl: 'http://127.0.0.1:9' } },
  { base: () => BASE, media: (p) => `wss://voice.example.com/telephony/${p}/media` },
  1000,
);
const request = (url: string, rawBody: string, headers: Record<string, string> = {}, callId?: string): CallbackRequest => ({
  url,
  callId,
  rawBody,
  header: (name) => headers[name.toLowerCase()],
});
const CALL_ID = 'call_01J00000000000000000000000';
const nowS = Math.floor(Date.now() / 1000);

describe('every carrier reads garbage without throwing, and it verifies for no account', () => {
  for (const provider of PROVIDERS) {
    it(provider, () => {
      const { callbacks } = carriers.get(provider);
      for (const operation of callbacks.operations) {
        for (const raw of ['', 'not a form or JSON \u0000', '{"data":[1,2]}', 'a=1&a=2&CallSid=']) {
          const m = callbacks.read(operation, request('/telephony/x', raw));
          assert.equal(m.verify(null, nowS), 'invalid_signature');
          assert.equal(typeof m.event(false).kind, 'string');
        }
      }
    });
  }
});

/** An agent's accounts as the plug-ins read them (RuntimeAgent's `carrierAccounts`): one account, its config in plaintext. */
const held = (provider: string, config: Record<string, string>) => ({
  carrierAccounts: { [provider]: { config, phoneNumber: null, inboundEnabled: false, configured: false } },
});

describe('provider_a', () => {
  const { callbacks } = carriers.get('provider_a');
  const accounts = held('provider_a', { account_sid: 'AC1', auth_token: 'secret-token' });
  const signed = (operation: string, path: string, params: Record<string, string>, callId?: string) => {
    const raw = new URLSearchParams(params).toString();
    return callbacks.read(operation, request(path, raw, { 'x-twilio-signature': twilioSignature('secret-token', `${BASE}${path}`, params) }, callId));
  };

  it('an incoming call is known by its number, and the number account signs it', () => {
    const m = signed('providerAVoiceWebhook', '/telephony/provider_a/voice', {
      AccountSid: 'AC1',
      CallSid: 'CA9',
      Direction: 'inbound',
      From: '+1555',
      To: '+1666',
    });
    assert.deepEqual(m.number, { to: '+1666', always: true });
    assert.equal(m.verify(accounts, nowS), 'ok');
    assert.equal(m.verify(held('provider_a', { account_sid: 'AC2', auth_token: 'secret-token' }), nowS), 'invalid_signature', 'another account');
    assert.deepEqual(m.event(false), { kind: 'incoming', from: '+1555', to: '+1666' });
  });

  it('statuses map to progress and outcomes; an unknown one is only noted, with its sequence number', () => {
    const path = `/telephony/provider_a/status?call_id=${CALL_ID}`;
    const read = (CallStatus: string) =>
      signed('providerAStatusCallback', path, { AccountSid: 'AC1', CallSid: 'CA9', CallStatus, SequenceNumber: '3' }, CALL_ID);
    assert.deepEqual(read('ringing').event(true), { kind: 'progress', status: 'ringing' });
    assert.deepEqual(read('busy').event(true), { kind: 'ended', outcome: 'busy', whenAnswered: 'busy' });
    assert.deepEqual(read('paused').event(true), { kind: 'noted' });
    assert.equal(read('ringing').seq, 3);
    assert.deepEqual(read('ringing').call, { callId: CALL_ID, callSid: 'CA9' });
  });

  it('answers the voice webhook with TwiML: our stream, busy, or hang up', async () => {
    const connect = await callbacks.reply('providerAVoiceWebhook', { kind: 'connect', callId: CALL_ID, streamToken: 'tok' }, { accounts, callSid: 'CA9' });
    assert.equal(connect.status, 200);
    assert.match(connect.status === 200 ? connect.body : '', /<Stream url="wss:\/\/voice.example.com\/telephony\/provider_a\/media">/);
    const reject = await callbacks.reply('providerAVoiceWebhook', { kind: 'reject' }, { accounts, callSid: 'CA9' });
    assert.match(reject.status === 200 ? reject.body : '', /<Reject reason="busy"/);
    assert.deepEqual(await callbacks.reply('providerAStatusCallback', { kind: 'none' }, { accounts, callSid: 'CA9' }), { status: 204 });
  });
});

describe('provider_b', () => {
  const { callbacks } = carriers.get('provider_b');
  const key = webhookKeyFromSeed(Buffer.alloc(32, 3));
  const accounts = held('provider_b', { api_key: 'k', connection_id: 'c', public_key: key.publicKeyBase64 });
  const event = (type: string, payload: Record<string, unknown>, at = nowS) => {
    const raw = JSON.stringify({ data: { event_type: type, id: `ev-${type}`, payload: { call_control_id: 'v3:1', ...payload } } });
    return callbacks.read('providerBEvent', request('/telephony/provider_b/events', raw, telnyxSignatureHeaders(key.privateKey, raw, at)));
  };

  it('checks the signature and its 300 s window', () => {
    assert.equal(event('call.answered', {}).verify(accounts, nowS), 'ok');
    assert.equal(event('call.answered', {}, nowS - 301).verify(accounts, nowS), 'signature_expired');
    assert.equal(event('call.answered', {}).verify(held('provider_b', { api_key: 'k', connection_id: 'c' }), nowS), 'invalid_signature');
  });

  it('a hang-up cause maps by whether the call was answered; an incoming call only while not known', () => {
    assert.deepEqual(event('call.hangup', { hangup_cause: 'user_busy' }).event(true), { kind: 'ended', outcome: 'busy', whenAnswered: 'completed' });
    assert.deepEqual(event('call.hangup', { hangup_cause: 'time_limit' }).event(true), { kind: 'ended', outcome: 'time_limit', whenAnswered: 'time_limit' });
    const incoming = event('call.initiated', { direction: 'incoming', from: '+1555', to: '+1666' });
    assert.deepEqual(incoming.number, { to: '+1666', always: false });
    assert.deepEqual(incoming.event(false), { kind: 'incoming', from: '+1555', to: '+1666' });
    assert.deepEqual(incoming.event(true), { kind: 'progress', status: 'initiated' });
    assert.deepEqual(event('call.machine.detection.ended', { result: 'not_sure' }).event(true), {
      kind: 'answered_by',
      answeredBy: 'unknown',
      greetingEnded: false,
    });
    assert.equal(event('call.answered', {}).eventId, 'ev-call.answered');
  });
});
