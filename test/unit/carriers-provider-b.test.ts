/**
 * provider_b's protocol, its pure parts (src/carriers/provider-b/): the Ed25519 webhook signature and its
 * 300 s window, client_state, media streaming frames, and its hang-up causes in our words.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isPublicKeyShape, publicKeyFromBase64, verifyProviderBSignature } from '../../src/carriers/provider-b/signature.js';
// Signed as the carrier does, by the simulator's own code (not the adapter's).
import { newWebhookKey, telnyxSignatureHeaders } from '../../src/sandbox/carriers/signing.js';
import { decodeClientState, encodeClientState } from '../../src/carriers/provider-b/rest.js';
import { providerBMedia } from '../../src/carriers/provider-b/media.js';
import { providerBAnsweredBy, providerBHangup } from '../../src/carriers/provider-b/status.js';

describe('provider_b signature', () => {
  const keys = newWebhookKey();
  const key = publicKeyFromBase64(keys.publicKeyBase64)!;
  const body = '{"data":{"event_type":"call.answered"}}';

  it('verifies within 300 seconds and says expired beyond', () => {
    const h = telnyxSignatureHeaders(keys.privateKey, body, 1_000_000);
    assert.equal(verifyProviderBSignature([key], body, h['telnyx-signature-ed25519'], h['telnyx-timestamp'], 1_000_300), 'ok');
    assert.equal(verifyProviderBSignature([key], body, h['telnyx-signature-ed25519'], h['telnyx-timestamp'], 999_700), 'ok');
    assert.equal(verifyProviderBSignature([key], body, h['telnyx-signature-ed25519'], h['telnyx-timestamp'], 1_000_301), 'signature_expired');
  });

  it('refuses another key, a changed body or timestamp, and malformed headers', () => {
    const h = telnyxSignatureHeaders(keys.privateKey, body, 1_000_000);
    const other = publicKeyFromBase64(newWebhookKey().publicKeyBase64)!;
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

describe('provider_b client_state and media frames', () => {
  it('round-trips our client_state and ignores anything else', () => {
    const state = { call_id: 'call_01JD5Z9K3M4N5P6Q7R8S9T0V1W', stream_token: 'mst_x' };
    assert.deepEqual(decodeClientState(encodeClientState(state)), state);
    assert.equal(decodeClientState(Buffer.from('{"call_id":"nope"}').toString('base64')), null);
    assert.equal(decodeClientState('%%%'), null);
    assert.equal(decodeClientState(null), null);
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

describe('provider_b statuses', () => {
  it('maps hangup_cause as the contract says', () => {
    assert.equal(providerBHangup('user_busy', false), 'busy');
    assert.equal(providerBHangup('call_rejected', false), 'busy');
    assert.equal(providerBHangup('timeout', false), 'no_answer');
    assert.equal(providerBHangup('originator_cancel', false), 'canceled');
    assert.equal(providerBHangup('normal_clearing', false), 'completed');
    assert.equal(providerBHangup(null, false), 'failed');
  });

  it('an answered call ended by any cause but the time limit ended normally', () => {
    for (const cause of ['user_busy', 'timeout', 'originator_cancel', 'normal_clearing', null]) assert.equal(providerBHangup(cause, true), 'completed');
    assert.equal(providerBHangup('time_limit', true), 'time_limit');
  });

  it('maps the answering-machine result', () => {
    assert.equal(providerBAnsweredBy('human'), 'human');
    assert.equal(providerBAnsweredBy('machine'), 'machine');
    assert.equal(providerBAnsweredBy('not_sure'), 'unknown');
  });
});
