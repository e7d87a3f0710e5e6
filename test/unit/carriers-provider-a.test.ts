/**
 * provider_a's protocol, its pure parts (src/carriers/provider-a/): the request signature (the vendor's
 * published test vector), the TwiML we answer with, Media Streams frames (and the quick read of both
 * carriers' frames), and its statuses in our words.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { providerASignature, verifyProviderASignature } from '../../src/carriers/provider-a/signature.js';
import { dialTwiml, hangupTwiml, rejectTwiml, streamTwiml } from '../../src/carriers/provider-a/twiml.js';
import { providerAMedia } from '../../src/carriers/provider-a/media.js';
import { providerAAnsweredBy, providerAStatus } from '../../src/carriers/provider-a/status.js';
import { frameHead } from '../../src/carriers/media.js';

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

describe('provider_a media frames', () => {
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
});

describe('the quick read of a media frame (what a frame over its budget is dropped by)', () => {
  const frame = (o: unknown) => Buffer.from(JSON.stringify(o));
  it('reads media frames (their payload size, as decoded) and dtmf frames of both carriers from their raw bytes', () => {
    for (const bytes of [1, 2, 3, 159, 160, 8000]) {
      const payload = Buffer.alloc(bytes, 0xff).toString('base64');
      const a = frame({ event: 'media', sequenceNumber: '2', streamSid: 'MZ1', media: { track: 'inbound', chunk: '2', timestamp: '0', payload } });
      const b = frame({ event: 'media', sequence_number: '2', stream_id: 's', media: { track: 'inbound', chunk: '2', timestamp: '0', payload } });
      assert.deepEqual(frameHead(a), { event: 'media', payloadBytes: bytes });
      assert.deepEqual(frameHead(b), { event: 'media', payloadBytes: bytes });
    }
    assert.deepEqual(frameHead(frame({ event: 'dtmf', streamSid: 'MZ1', dtmf: { track: 'inbound_track', digit: '#' } })), { event: 'dtmf' });
    assert.deepEqual(frameHead(Buffer.from(' { "event" : "dtmf", "dtmf": {"digit": "1"}}')), { event: 'dtmf' });
  });

  it('anything else is left to the parser: other events, `event` not first, no payload to be found', () => {
    for (const raw of [
      frame({ event: 'mark', mark: { name: 'turn-1' } }),
      frame({ streamSid: 'MZ1', event: 'dtmf', dtmf: { digit: '1' } }),
      frame({ event: 'media', media: { track: 'inbound' } }),
      Buffer.from('{"event":"media","media":{"payload":"AAAA'),
      Buffer.from('not json'),
      Buffer.alloc(0),
    ]) {
      assert.equal(frameHead(raw), null, raw.toString());
    }
  });
});

describe('provider_a statuses', () => {
  it('maps CallStatus and AnsweredBy as the contract says', () => {
    assert.deepEqual(providerAStatus('queued'), { kind: 'progress', status: 'initiated' });
    assert.deepEqual(providerAStatus('in-progress'), { kind: 'progress', status: 'in_progress' });
    assert.deepEqual(providerAStatus('no-answer'), { kind: 'ended', outcome: 'no_answer' });
    assert.equal(providerAStatus('bogus'), null);
    assert.deepEqual(providerAAnsweredBy('machine_end_beep'), { answeredBy: 'machine', greetingEnded: true });
    assert.deepEqual(providerAAnsweredBy('machine_start'), { answeredBy: 'machine', greetingEnded: false });
    assert.deepEqual(providerAAnsweredBy('fax'), { answeredBy: 'machine', greetingEnded: false });
    assert.deepEqual(providerAAnsweredBy('unknown'), { answeredBy: 'unknown', greetingEnded: false });
  });
});
