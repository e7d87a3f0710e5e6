/**
 * The carrier protocols' pure parts: provider_a's signature (the vendor's published test vector),
 * provider_b's Ed25519 signature and its 300 s window, the TwiML we answer with, client_state, media
 * frames, and the status rules of a call (the contract's transition table).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { providerASignature, verifyProviderASignature } from '../../src/telephony/provider-a/signature.js';
import {
  generateSigningKeyPair,
  isPublicKeyShape,
  publicKeyFromBase64,
  signProviderBWebhook,
  verifyProviderBSignature,
} from '../../src/telephony/provider-b/signature.js';
import { dialTwiml, hangupTwiml, rejectTwiml, streamTwiml } from '../../src/telephony/provider-a/twiml.js';
import { decodeClientState, encodeClientState } from '../../src/telephony/provider-b/rest.js';
import { providerAMedia } from '../../src/telephony/provider-a/media.js';
import { providerBMedia } from '../../src/telephony/provider-b/media.js';
import { finalState, movableFrom, providerAAnsweredBy, providerAStatus, providerBHangup } from '../../src/calls/lifecycle.js';

describe('provider_a signature', () => {
  const url = 'https://mycompany.com/myapp.php?foo=1&bar=2';
  const params = { CallSid: 'CA1234567890ABCDE', Caller: '+12349013030', Digits: '1234', From: '+12349013030', To: '+18005551212' };

  it("matches the vendor's published test vector", () => {
    assert.equal(providerASignature('12345', url, params), '0/KCTR6DLpKmkAf8muzZqo1nDgQ=');
  });

  it('verifies the right signature and refuses a wrong, missing or differently keyed one', () => {
    assert.equal(verifyProviderASignature('12345', url, params, '0/KCTR6DLpKmkAf8muzZqo1nDgQ='), true);
    assert.equal(verifyProviderASignature('12345', url, { ...params, Digits: '1235' }, '0/KCTR6DLpKmkAf8muzZqo1nDgQ='), false);
    assert.equal(verifyProviderASignature('12345', `${url}&x=1`, params, '0/KCTR6DLpKmkAf8muzZqo1nDgQ='), false);
    assert.equal(verifyProviderASignature('54321', url, params, '0/KCTR6DLpKmkAf8muzZqo1nDgQ='), false);
    assert.equal(verifyProviderASignature('12345', url, params, undefined), false);
    assert.equal(verifyProviderASignature('12345', url, params, 'short'), false);
  });

  it('signs repeated parameters value by value, in order', () => {
    const a = providerASignature('t', 'https://x/y', { StatusCallbackEvent: ['initiated', 'ringing'] });
    const b = providerASignature('t', 'https://x/y', { StatusCallbackEvent: ['ringing', 'initiated'] });
    assert.notEqual(a, b);
  });
});

describe('provider_b signature', () => {
  const keys = generateSigningKeyPair();
  const key = publicKeyFromBase64(keys.publicKeyBase64)!;
  const body = '{"data":{"event_type":"call.answered"}}';

  it('verifies within 300 seconds and says expired beyond', () => {
    const h = signProviderBWebhook(keys.privateKey, body, 1_000_000);
    assert.equal(verifyProviderBSignature([key], body, h['telnyx-signature-ed25519'], h['telnyx-timestamp'], 1_000_300), 'ok');
    assert.equal(verifyProviderBSignature([key], body, h['telnyx-signature-ed25519'], h['telnyx-timestamp'], 999_700), 'ok');
    assert.equal(verifyProviderBSignature([key], body, h['telnyx-signature-ed25519'], h['telnyx-timestamp'], 1_000_301), 'signature_expired');
  });

  it('refuses another key, a changed body or timestamp, and malformed headers', () => {
    const h = signProviderBWebhook(keys.privateKey, body, 1_000_000);
    const other = publicKeyFromBase64(generateSigningKeyPair().publicKeyBase64)!;
    assert.equal(verifyProviderBSignature([other], body, h['telnyx-signature-ed25519'], h['telnyx-timestamp'], 1_000_000), 'invalid_signature');
    assert.equal(verifyProviderBSignature([key], `${body} `, h['telnyx-signature-ed25519'], h['telnyx-timestamp'], 1_000_000), 'invalid_signature');
    assert.equal(verifyProviderBSignature([key], body, h['telnyx-signature-ed25519'], '1000001', 1_000_000), 'invalid_signature');
    assert.equal(verifyProviderBSignature([key], body, 'bm90IGEgc2lnbmF0dXJl', h['telnyx-timestamp'], 1_000_000), 'invalid_signature');
    assert.equal(verifyProviderBSignature([key], body, undefined, h['telnyx-timestamp'], 1_000_000), 'invalid_signature');
    assert.equal(verifyProviderBSignature([key], body, h['telnyx-signature-ed25519'], 'soon', 1_000_000), 'invalid_signature');
    // An expired timestamp never confirms a forged signature.
    assert.equal(verifyProviderBSignature([other], body, h['telnyx-signature-ed25519'], h['telnyx-timestamp'], 2_000_000), 'invalid_signature');
  });

  it('takes only the base64 of 32 bytes as a public key', () => {
    assert.equal(isPublicKeyShape(keys.publicKeyBase64), true);
    assert.equal(isPublicKeyShape(Buffer.alloc(31).toString('base64')), false);
    assert.equal(publicKeyFromBase64('not a key'), null);
  });
});

describe('TwiML', () => {
  it('connects the stream with escaped parameters and no query string', () => {
    const xml = streamTwiml('wss://voice.example.com/telephony/provider_a/media', { call_id: 'call_1', stream_token: 'a"b<c>&d' });
    assert.equal(
      xml,
      '<?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream url="wss://voice.example.com/telephony/provider_a/media"><Parameter name="call_id" value="call_1"/><Parameter name="stream_token" value="a&quot;b&lt;c&gt;&amp;d"/></Stream></Connect></Response>',
    );
  });

  it('rejects, hangs up and dials', () => {
    assert.equal(rejectTwiml('busy'), '<?xml version="1.0" encoding="UTF-8"?><Response><Reject reason="busy"/></Response>');
    assert.equal(hangupTwiml(), '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>');
    assert.equal(dialTwiml('+14155550123'), '<?xml version="1.0" encoding="UTF-8"?><Response><Dial>+14155550123</Dial></Response>');
  });
});

describe('client_state and media frames', () => {
  it('round-trips our client_state and ignores anything else', () => {
    const state = { call_id: 'call_01JD5Z9K3M4N5P6Q7R8S9T0V1W', stream_token: 'mst_x' };
    assert.deepEqual(decodeClientState(encodeClientState(state)), state);
    assert.equal(decodeClientState(Buffer.from('{"call_id":"nope"}').toString('base64')), null);
    assert.equal(decodeClientState('%%%'), null);
    assert.equal(decodeClientState(null), null);
  });

  it('parses provider_a frames and writes ours with the stream sid', () => {
    const start = providerAMedia.parse(
      JSON.stringify({ event: 'start', streamSid: 'MZ1', start: { streamSid: 'MZ1', callSid: 'CA1', customParameters: { call_id: 'c', stream_token: 't' } } }),
    );
    assert.deepEqual(start, { kind: 'start', streamId: 'MZ1', callSid: 'CA1', callId: 'c', streamToken: 't' });
    const media = providerAMedia.parse(
      JSON.stringify({ event: 'media', media: { track: 'inbound', chunk: '7', payload: Buffer.alloc(160, 0xff).toString('base64') } }),
    );
    assert.equal(media?.kind, 'media');
    assert.equal(providerAMedia.parse('not json'), null);
    assert.deepEqual(providerAMedia.parse('{"event":"something_new"}'), { kind: 'ignored' });
    assert.deepEqual(JSON.parse(providerAMedia.clear('MZ1')), { event: 'clear', streamSid: 'MZ1' });
    assert.deepEqual(JSON.parse(providerAMedia.media('MZ1', 'AAA=')), { event: 'media', streamSid: 'MZ1', media: { payload: 'AAA=' } });
  });

  it('parses provider_b frames, their client_state, and ignores the outbound track', () => {
    const cs = encodeClientState({ call_id: 'call_01JD5Z9K3M4N5P6Q7R8S9T0V1W', stream_token: 'mst_y' });
    const start = providerBMedia.parse(
      JSON.stringify({ event: 'start', stream_id: 's1', start: { call_control_id: 'v3:x', client_state: cs, media_format: { encoding: 'PCMU' } } }),
    );
    assert.deepEqual(start, { kind: 'start', streamId: 's1', callSid: 'v3:x', callId: 'call_01JD5Z9K3M4N5P6Q7R8S9T0V1W', streamToken: 'mst_y' });
    assert.deepEqual(providerBMedia.parse(JSON.stringify({ event: 'media', media: { track: 'outbound', payload: 'AA==' } })), { kind: 'ignored' });
    assert.deepEqual(JSON.parse(providerBMedia.mark('s1', 'turn-1')), { event: 'mark', mark: { name: 'turn-1' } });
  });
});

describe('call status rules', () => {
  it('maps carrier statuses as the contract says', () => {
    assert.deepEqual(providerAStatus('queued'), { kind: 'progress', status: 'initiated' });
    assert.deepEqual(providerAStatus('in-progress'), { kind: 'progress', status: 'in_progress' });
    assert.deepEqual(providerAStatus('no-answer'), { kind: 'ended', outcome: 'no_answer' });
    assert.equal(providerAStatus('bogus'), null);
    assert.deepEqual(providerAAnsweredBy('machine_end_beep'), { answeredBy: 'machine', greetingEnded: true });
    assert.deepEqual(providerAAnsweredBy('machine_start'), { answeredBy: 'machine', greetingEnded: false });
    assert.deepEqual(providerAAnsweredBy('fax'), { answeredBy: 'machine', greetingEnded: false });
    assert.deepEqual(providerAAnsweredBy('unknown'), { answeredBy: 'unknown', greetingEnded: false });
    assert.equal(providerBHangup('user_busy'), 'busy');
    assert.equal(providerBHangup('call_rejected'), 'busy');
    assert.equal(providerBHangup('timeout'), 'no_answer');
    assert.equal(providerBHangup('originator_cancel'), 'canceled');
    assert.equal(providerBHangup('normal_clearing'), 'completed');
    assert.equal(providerBHangup(null), 'failed');
  });

  it('only moves a call forward', () => {
    assert.deepEqual(movableFrom('ringing'), ['queued', 'initiated']);
    assert.deepEqual(movableFrom('in_progress'), ['queued', 'initiated', 'ringing']);
  });

  const base = { answered_at: null, answered_by: null, carrier_outcome: null, end_reason_hint: null, media_started_at: null, media_ended_at: null } as const;
  const answered = { ...base, answered_at: new Date(), media_started_at: new Date(), media_ended_at: new Date() };

  it('ends answered calls as completed or voicemail with the reason known', () => {
    assert.deepEqual(finalState({ ...answered }, false), { status: 'completed', endReason: 'remote_hangup' });
    assert.deepEqual(finalState({ ...answered, answered_by: 'machine', end_reason_hint: 'agent_hangup' }, false), {
      status: 'voicemail',
      endReason: 'agent_hangup',
    });
    assert.deepEqual(finalState({ ...answered, carrier_outcome: 'time_limit' }, false), { status: 'completed', endReason: 'time_limit' });
    assert.deepEqual(finalState({ ...answered, end_reason_hint: 'transferred' }, false), { status: 'completed', endReason: 'transferred' });
    assert.deepEqual(finalState({ ...answered, end_reason_hint: 'service_error' }, false), { status: 'failed', endReason: 'service_error' });
  });

  it('ends unanswered calls by the carrier outcome, and forced ones as failed', () => {
    assert.deepEqual(finalState({ ...base, carrier_outcome: 'busy' }, false), { status: 'busy', endReason: 'not_answered' });
    assert.deepEqual(finalState({ ...base, carrier_outcome: 'no_answer' }, false), { status: 'no_answer', endReason: 'not_answered' });
    assert.deepEqual(finalState({ ...base, carrier_outcome: 'canceled' }, false), { status: 'canceled', endReason: 'canceled' });
    assert.deepEqual(finalState({ ...base, end_reason_hint: 'canceled' }, false), { status: 'canceled', endReason: 'canceled' });
    assert.deepEqual(finalState({ ...base, end_reason_hint: 'not_allowed' }, false), { status: 'failed', endReason: 'not_allowed' });
    assert.deepEqual(finalState({ ...base }, true), { status: 'failed', endReason: 'carrier_error' });
    // Answered, media started, never ended: the instance running it died.
    assert.deepEqual(finalState({ ...answered, media_ended_at: null }, true), { status: 'failed', endReason: 'service_error' });
  });
});
