/**
 * sipp calls our SIP user agent (src/sip/) on loopback, over UDP and TCP: a call with the fixtures'
 * speech as its PCMU stream and RFC 4733 keys, hung up by the caller; a trunk that authenticates with
 * digest; a caller that gives up while we ring (CANCEL), one that holds and resumes (re-INVITE), one
 * that asks for a session timer and never refreshes (we hang up); and the refusals: a source authenticateInbound refuses (403), a wrong password (403), a
 * codec we do not offer (488).
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import path from 'node:path';
import fs from 'node:fs';
import { mulawToPcm16 } from '../../src/audio/pcm16.js';
import type { CallEnded, SipCall, SipUserAgent } from '../../src/sip/index.js';
import { DTMF_PCAPS, LOOPBACK, startSipp, testUserAgent } from '../helpers/sipp.js';

const SPEECH = path.resolve(import.meta.dirname, '../fixtures/audio/caller-question.ulaw-8k.raw');

/** What the authenticated caller does after its 200: ACK is in the scenario; then BYE. */
const after200 = `<pause milliseconds="300" />
  <send retrans="500">
    <![CDATA[
      BYE sip:[service]@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch];rport
      From: <sip:+15550001111@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: <sip:[service]@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 3 BYE
      Max-Forwards: 70
      Content-Length: 0
    ]]>
  </send>
  <recv response="200" />`;

function ended(call: SipCall): Promise<CallEnded> {
  return call.endedWith ? Promise.resolve(call.endedWith) : once(call, 'ended').then(([e]) => e as CallEnded);
}

/** Answer every call; gather what each heard. */
interface Heard {
  call: SipCall;
  audio: Buffer[];
  keys: string[];
  answered: boolean;
  /** answered, hold, resume, in order. */
  events: string[];
}

function answering(ua: SipUserAgent): { calls: Heard[] } {
  const state = { calls: [] as Heard[] };
  ua.on('incoming', (call) => {
    const entry: Heard = { call, audio: [], keys: [], answered: false, events: [] };
    state.calls.push(entry);
    call.on('audio', (pcm) => entry.audio.push(pcm));
    call.on('dtmf', (k) => entry.keys.push(k));
    call.on('answered', () => {
      entry.answered = true;
      entry.events.push('answered');
    });
    call.on('hold', () => entry.events.push('hold'));
    call.on('resume', () => entry.events.push('resume'));
    void call.answer();
  });
  return state;
}

for (const tcp of [false, true]) {
  describe(`sipp calls us over ${tcp ? 'TCP' : 'UDP'}`, () => {
    let ua: SipUserAgent;
    after(() => ua?.stop());

    it('the caller is let in, its speech arrives whole and in order, its keys once each, and its BYE ends the call', async () => {
      ua = await testUserAgent();
      const heard = answering(ua);
      const speechMs = (fs.statSync(SPEECH).size / 8000) * 1000;
      const sipp = await startSipp({
        name: 'uac-pcmu.xml',
        vars: { AUDIO: SPEECH, DTMF_DIR: DTMF_PCAPS, HOLD_MS: String(Math.ceil(speechMs) + 500) },
        target: `${LOOPBACK}:${ua.port}`,
        tcp,
      });
      const result = await sipp.done;
      assert.equal(result.code, 0, `sipp failed:\n${result.stdout}\n${result.errors}`);
      assert.equal(heard.calls.length, 1);
      const { call, audio, keys, answered } = heard.calls[0];
      assert.ok(answered, 'the ACK made the call answered');
      assert.equal(call.from.user, '+15550001111');
      assert.equal(call.to.user, 'agent');
      assert.equal(call.codec, 'PCMU');
      const e = await ended(call);
      assert.deepEqual(e, { outcome: 'completed', reason: 'remote_hangup', by: 'remote' });
      assert.deepEqual(keys, ['1', '5', '#']);
      const speech = mulawToPcm16(fs.readFileSync(SPEECH));
      const whole = Math.floor(speech.length / 320) * 320;
      const got = Buffer.concat(audio);
      assert.ok(got.length >= whole, `heard ${got.length} bytes of ${speech.length}`);
      assert.ok(got.subarray(0, whole).equals(speech.subarray(0, whole)), 'the speech arrives sample for sample');
    });
  });
}

describe('a trunk that authenticates with digest', () => {
  let ua: SipUserAgent;
  after(() => ua?.stop());

  it('is challenged (401), let in with the right password, and refused (403) with a wrong one; the trunk is the call context', async () => {
    const lookups: string[] = [];
    ua = await testUserAgent({
      authenticateInbound: () => ({
        action: 'challenge',
        realm: 'sip.example.test',
        context: { trunk: 'trk_1' },
        password: (username) => {
          lookups.push(username);
          return username === 'acme' ? 's3cret' : undefined;
        },
      }),
    });
    const heard = answering(ua);
    const good = await startSipp({
      name: 'uac-auth.xml',
      vars: { USERNAME: 'acme', PASSWORD: 's3cret', FINAL: '200', AFTER: after200 },
      target: `${LOOPBACK}:${ua.port}`,
    });
    const r1 = await good.done;
    assert.equal(r1.code, 0, `sipp failed:\n${r1.stdout}\n${r1.errors}`);
    assert.equal(heard.calls.length, 1);
    assert.deepEqual(heard.calls[0].call.context, { trunk: 'trk_1' });

    const bad = await startSipp({
      name: 'uac-auth.xml',
      vars: { USERNAME: 'acme', PASSWORD: 'guess', FINAL: '403', AFTER: '<timewait milliseconds="200" />' },
      target: `${LOOPBACK}:${ua.port}`,
    });
    const r2 = await bad.done;
    assert.equal(r2.code, 0, `sipp failed:\n${r2.stdout}\n${r2.errors}`);
    const unknown = await startSipp({
      name: 'uac-auth.xml',
      vars: { USERNAME: 'mallory', PASSWORD: 'x', FINAL: '403', AFTER: '<timewait milliseconds="200" />' },
      target: `${LOOPBACK}:${ua.port}`,
    });
    const r3 = await unknown.done;
    assert.equal(r3.code, 0, `sipp failed:\n${r3.stdout}\n${r3.errors}`);
    assert.equal(heard.calls.length, 1, 'no call let in after the refusals');
    assert.deepEqual(lookups, ['acme', 'acme', 'mallory']);
  });
});

describe('a trunk whose credentials the decision checks itself (the answer presented as digest)', () => {
  let ua: SipUserAgent;
  after(() => ua?.stop());

  it('is challenged without credentials, let in when matches() takes its password, refused when not', async () => {
    const presented: string[] = [];
    ua = await testUserAgent({
      authenticateInbound: (r) => {
        if (!r.digest) return { action: 'challenge', realm: 'sip.example.test' };
        presented.push(r.digest.username);
        if (r.digest.username === 'acme' && r.digest.matches('s3cret')) return { action: 'allow', context: 'trk_2' };
        return { action: 'refuse' };
      },
    });
    const heard = answering(ua);
    const good = await startSipp({
      name: 'uac-auth.xml',
      vars: { USERNAME: 'acme', PASSWORD: 's3cret', FINAL: '200', AFTER: after200 },
      target: `${LOOPBACK}:${ua.port}`,
    });
    const r1 = await good.done;
    assert.equal(r1.code, 0, `sipp failed:\n${r1.stdout}\n${r1.errors}`);
    assert.deepEqual(
      heard.calls.map((c) => c.call.context),
      ['trk_2'],
    );
    const bad = await startSipp({
      name: 'uac-auth.xml',
      vars: { USERNAME: 'acme', PASSWORD: 'guess', FINAL: '403', AFTER: '<timewait milliseconds="200" />' },
      target: `${LOOPBACK}:${ua.port}`,
    });
    const r2 = await bad.done;
    assert.equal(r2.code, 0, `sipp failed:\n${r2.stdout}\n${r2.errors}`);
    assert.deepEqual(presented, ['acme', 'acme']);
    assert.equal(heard.calls.length, 1);
  });
});

describe('refusals', () => {
  let ua: SipUserAgent;
  after(() => ua?.stop());

  it('a source authenticateInbound refuses gets a bare 403; a codec we do not offer gets 488; no call reaches the listener', async () => {
    let refuse = true;
    ua = await testUserAgent({ authenticateInbound: () => (refuse ? { action: 'refuse' } : { action: 'allow' }) });
    let incoming = 0;
    ua.on('incoming', () => incoming++);
    const refused = await startSipp({
      name: 'uac-expect.xml',
      vars: { STATUS: '403', PAYLOADS: '0', RTPMAP: 'a=rtpmap:0 PCMU/8000' },
      target: `${LOOPBACK}:${ua.port}`,
    });
    const r1 = await refused.done;
    assert.equal(r1.code, 0, `sipp failed:\n${r1.stdout}\n${r1.errors}`);
    refuse = false;
    const g729 = await startSipp({
      name: 'uac-expect.xml',
      vars: { STATUS: '488', PAYLOADS: '18', RTPMAP: 'a=rtpmap:18 G729/8000' },
      target: `${LOOPBACK}:${ua.port}`,
    });
    const r2 = await g729.done;
    assert.equal(r2.code, 0, `sipp failed:\n${r2.stdout}\n${r2.errors}`);
    assert.equal(incoming, 0);
  });
});

describe('in the middle of a call', () => {
  let ua: SipUserAgent;
  after(() => ua?.stop());

  it('a CANCEL while we ring gets 200, the INVITE 487, and the call ends canceled', async () => {
    ua = await testUserAgent();
    const offered = new Promise<SipCall>((resolve) => ua.once('incoming', resolve));
    const sipp = await startSipp({ name: 'uac-cancel.xml', target: `${LOOPBACK}:${ua.port}` });
    const call = await offered;
    assert.deepEqual(await ended(call), { outcome: 'canceled', reason: 'canceled', status: 487, by: 'remote' });
    const r = await sipp.done;
    assert.equal(r.code, 0, `sipp failed:\n${r.stdout}\n${r.errors}`);
  });

  it('a re-INVITE with sendonly puts us on hold (we answer recvonly), sendrecv resumes; PCMA as the caller preferred', async () => {
    await ua?.stop();
    ua = await testUserAgent();
    const heard = answering(ua);
    const sipp = await startSipp({ name: 'uac-hold.xml', target: `${LOOPBACK}:${ua.port}` });
    const r = await sipp.done;
    assert.equal(r.code, 0, `sipp failed:\n${r.stdout}\n${r.errors}`);
    const { call, events } = heard.calls[0];
    assert.equal(call.codec, 'PCMA');
    assert.deepEqual(events, ['answered', 'hold', 'resume']);
    assert.deepEqual(await ended(call), { outcome: 'completed', reason: 'remote_hangup', by: 'remote' });
  });

  it('a session timer the caller never refreshes ends the call with our BYE', async () => {
    await ua?.stop();
    ua = await testUserAgent({ minSessionExpiresS: 2 });
    const heard = answering(ua);
    const sipp = await startSipp({ name: 'uac-session-timer.xml', vars: { SECONDS: '2' }, target: `${LOOPBACK}:${ua.port}` });
    const r = await sipp.done;
    assert.equal(r.code, 0, `sipp failed:\n${r.stdout}\n${r.errors}`);
    assert.deepEqual(await ended(heard.calls[0].call), { outcome: 'completed', reason: 'session_expired', by: 'timer' });
  });
});
