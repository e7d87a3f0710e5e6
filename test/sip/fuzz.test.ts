/**
 * Hostile input to the SIP user agent (src/sip/): a fuzz corpus (hand-written malformed messages and
 * seeded mutations of a good INVITE) through the parser and to a live user agent over UDP and TCP:
 * every message is read, answered 400 or dropped, never a crash, and the agent still answers after.
 * Refusals are rate-limited per source (beyond the allowance nothing is answered, other sources are);
 * RTP from anyone but the negotiated peer is not taken.
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import net from 'node:net';
import { once } from 'node:events';
import { parseMessage, SipParseError } from '../../src/sip/message.js';
import { writeRtp } from '../../src/sip/rtp-packet.js';
import { mulawToPcm16 } from '../../src/audio/pcm16.js';
import type { SipCall, SipUserAgent } from '../../src/sip/index.js';
import { LOOPBACK, testUserAgent } from '../helpers/sipp.js';

function invite(n: number, extra = '', to = '+15550002222'): string {
  return [
    `INVITE sip:${to}@${LOOPBACK} SIP/2.0`,
    `Via: SIP/2.0/UDP ${LOOPBACK}:5999;branch=z9hG4bK-fuzz-${n};rport`,
    `From: <sip:+15550001111@${LOOPBACK}>;tag=f${n}`,
    `To: <sip:${to}@${LOOPBACK}>`,
    `Call-ID: fuzz-${n}@${LOOPBACK}`,
    'CSeq: 1 INVITE',
    `Contact: <sip:+15550001111@${LOOPBACK}:5999>`,
    'Max-Forwards: 70',
    extra,
    'Content-Type: application/sdp',
    'Content-Length: 0',
    '',
    '',
  ]
    .filter((l, i, all) => l !== '' || i >= all.length - 2)
    .join('\r\n');
}

function options(n: number): string {
  return invite(n).replace(/INVITE/g, 'OPTIONS');
}

/** Malformed messages written by hand, each a way real scanners and broken peers get it wrong. */
const HAND_WRITTEN: string[] = [
  '',
  '\r\n\r\n',
  'GET / HTTP/1.1\r\nHost: x\r\n\r\n',
  'INVITE\r\n\r\n',
  'INVITE sip:x@y SIP/3.0\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK1\r\n\r\n',
  invite(1).replace('CSeq: 1 INVITE', 'CSeq: 1 BYE'),
  invite(2).replace('CSeq: 1 INVITE', 'CSeq: -1 INVITE'),
  invite(3).replace('CSeq: 1 INVITE', 'CSeq: 99999999999999 INVITE'),
  invite(4).replace('Content-Length: 0', 'Content-Length: 100'),
  invite(5).replace('Content-Length: 0', 'Content-Length: -5'),
  invite(6).replace('Content-Length: 0', 'Content-Length: 1e3'),
  invite(7).replace(/Via: [^\r]*/, 'Via: garbage'),
  invite(8).replace(/Via: [^\r]*\r\n/, ''),
  invite(9).replace(/From: [^\r]*/, 'From: <sip:unclosed'),
  invite(10).replace(/To: [^\r]*/, 'To: "quoted <sip:x@y>'),
  invite(11).replace(/^INVITE sip:[^ ]+/, 'INVITE http://example.com'),
  invite(12).replace(/Call-ID: [^\r]*\r\n/, ''),
  invite(13, 'X-Long: ' + 'a'.repeat(9000)),
  invite(14, Array.from({ length: 200 }, (_, i) => `X-H${i}: v`).join('\r\n')),
  invite(15, 'Bad Header Name: v'),
  invite(16, ': no name'),
  invite(17, 'Session-Expires: banana;refresher=both'),
  invite(18, 'Authorization: Digest'),
  invite(19, 'Authorization: Digest username="a", nonce=, =x'),
  invite(20).replace('Content-Type: application/sdp\r\nContent-Length: 0', 'Content-Type: application/sdp\r\nContent-Length: 12') + 'v=0\r\nm=audio',
  invite(21).replace('Content-Length: 0', 'Content-Length: 30') + 'v=0\r\nm=audio 99999 RTP/AVP 0\r\n',
  invite(22).replace('\r\n\r\n', '\r\n\u0000\u0001\u0002\r\n\r\n'),
  invite(23).replace(/Via: SIP\/2.0\/UDP [^;]+/, 'Via: SIP/2.0/UDP [::1'),
  invite(24).replace(/Via: SIP\/2.0\/UDP [^;]+/, `Via: SIP/2.0/UDP ${LOOPBACK}:99999`),
  'SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK-none\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:c@d>;tag=2\r\nCall-ID: x\r\nCSeq: 1 INVITE\r\n\r\n',
  'SIP/2.0 999 Nope\r\n\r\n',
  'ACK sip:x@y SIP/2.0\r\nVia: SIP/2.0/UDP a;branch=z9hG4bK-x\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:c@d>;tag=2\r\nCall-ID: nobody\r\nCSeq: 1 ACK\r\n\r\n',
  'BYE sip:x@y SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK-y\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:c@d>;tag=2\r\nCall-ID: nobody\r\nCSeq: 1 BYE\r\n\r\n',
  'CANCEL sip:x@y SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK-z\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:c@d>\r\nCall-ID: nobody\r\nCSeq: 1 CANCEL\r\n\r\n',
];

/** A seeded generator, so a failure names a corpus entry that fails again. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SPECIALS = ':;<>"\\,=@';

function mutations(count: number, seed = 33): Buffer[] {
  const rand = prng(seed);
  const base = Buffer.from(invite(1000, 'Session-Expires: 1800;refresher=uac'));
  const out: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const b = Buffer.from(base);
    const kind = Math.floor(rand() * 4);
    if (kind === 0) for (let k = 0; k < 1 + rand() * 8; k++) b[Math.floor(rand() * b.length)] = Math.floor(rand() * 256);
    if (kind === 1) {
      out.push(b.subarray(0, Math.floor(rand() * b.length)));
      continue;
    }
    if (kind === 2) {
      const at = Math.floor(rand() * b.length);
      out.push(
        Buffer.concat([b.subarray(0, at), Buffer.from(SPECIALS[Math.floor(rand() * SPECIALS.length)].repeat(1 + Math.floor(rand() * 50))), b.subarray(at)]),
      );
      continue;
    }
    if (kind === 3) {
      const lines = b.toString('latin1').split('\r\n');
      const a = 1 + Math.floor(rand() * (lines.length - 3));
      lines.splice(a, 1);
      out.push(Buffer.from(lines.join('\r\n'), 'latin1'));
      continue;
    }
    out.push(b);
  }
  return out;
}

const CORPUS = [...HAND_WRITTEN.map((s) => Buffer.from(s, 'latin1')), ...mutations(400)];

describe('SIP fuzz corpus', () => {
  it('the parser reads each message or refuses it with a SipParseError, nothing else', () => {
    for (const [i, m] of CORPUS.entries()) {
      try {
        parseMessage(m);
        parseMessage(m, true);
      } catch (e) {
        assert.ok(e instanceof SipParseError, `corpus entry ${i} threw ${String(e)}`);
      }
    }
  });

  let ua: SipUserAgent;
  after(() => ua?.stop());

  it('a live user agent takes the whole corpus over UDP and TCP, answers 400 where it can, and still answers OPTIONS', async () => {
    ua = await testUserAgent({ refusalsPerMinute: 100_000, authenticateInbound: () => ({ action: 'refuse' }) });
    const udp = dgram.createSocket('udp4');
    await new Promise<void>((r) => udp.bind(5999, LOOPBACK, () => r()));
    const statuses: number[] = [];
    udp.on('message', (m) => {
      const s = /^SIP\/2\.0 (\d{3})/.exec(m.toString('latin1'));
      if (s) statuses.push(Number(s[1]));
    });
    for (const m of CORPUS) udp.send(m, ua.port, LOOPBACK);
    const tcp = net.connect(ua.port, LOOPBACK);
    await once(tcp, 'connect');
    tcp.on('error', () => undefined);
    tcp.write(Buffer.concat(CORPUS.slice(0, 40)));
    // The agent is still there: an OPTIONS gets its 200 (and, sent after everything, comes after it).
    udp.send(options(5000), ua.port, LOOPBACK);
    for (let i = 0; !statuses.includes(200); i++) await once(udp, 'message');
    assert.ok(statuses.includes(400), 'a 400 for the malformed requests that can be answered');
    assert.ok(!statuses.some((s) => s >= 500), `no server error: ${statuses.join(',')}`);
    tcp.destroy();
    udp.close();
    assert.equal(ua.activeCalls, 0, 'no call came of it');
  });
});

describe('refusals are rate-limited per source', () => {
  let ua: SipUserAgent;
  after(() => ua?.stop());

  it('beyond its allowance a source is ignored, with the same bare 403 before for every number; another source is still answered', async () => {
    ua = await testUserAgent({ refusalsPerMinute: 3, authenticateInbound: () => ({ action: 'refuse' }) });
    const scanner = dgram.createSocket('udp4');
    const other = dgram.createSocket('udp4');
    await new Promise<void>((r) => scanner.bind(0, LOOPBACK, () => r()));
    await new Promise<void>((r) => other.bind(0, '127.0.0.2', () => r()));
    const got: string[] = [];
    scanner.on('message', (m) => got.push(m.toString('latin1')));
    const finals = () => got.filter((m) => /^SIP\/2\.0 [2-6]/.test(m));
    for (const [n, to] of [
      [1, '+15550000001'],
      [2, '+15550000002'],
      [3, '+15550000003'],
    ] as const) {
      scanner.send(invite(n, '', to), ua.port, LOOPBACK);
      while (finals().length < n) await once(scanner, 'message');
    }
    const refusals = finals();
    assert.deepEqual(
      refusals.map((m) => m.split('\r\n')[0]),
      ['SIP/2.0 403 Forbidden', 'SIP/2.0 403 Forbidden', 'SIP/2.0 403 Forbidden'],
    );
    const shape = (m: string) => m.split('\r\n').map((l) => l.split(':')[0]);
    assert.deepEqual(shape(refusals[0]), shape(refusals[2]), 'nothing in a 403 tells numbers apart');
    const before = got.length;
    scanner.send(invite(4), ua.port, LOOPBACK);
    scanner.send(options(5), ua.port, LOOPBACK);
    other.send(options(6).replace(LOOPBACK + ':5999', '127.0.0.2:' + other.address().port), ua.port, LOOPBACK);
    const [answer] = await once(other, 'message');
    assert.match(answer.toString('latin1'), /^SIP\/2\.0 200 OK/);
    // The scanner's two requests went before the other source's, and got nothing at all.
    assert.equal(got.length, before);
    scanner.close();
    other.close();
  });
});

describe('RTP only from the negotiated peer', () => {
  let a: SipUserAgent;
  let b: SipUserAgent;
  after(async () => {
    await a?.stop();
    await b?.stop();
  });

  it("packets from another address are dropped and reported; the peer's are heard", async () => {
    a = await testUserAgent();
    b = await testUserAgent();
    const incoming = new Promise<SipCall>((resolve) =>
      b.once('incoming', (call) => {
        void call.answer();
        resolve(call);
      }),
    );
    const caller = await a.invite({ host: LOOPBACK, port: b.port, to: '+15550002222', from: '+15550001111' });
    const callee = await incoming;
    await once(caller, 'answered');
    const loud = Buffer.alloc(160, 0x00);
    const heard: Buffer[] = [];
    callee.on('audio', (pcm) => heard.push(pcm));
    const rejected = once(callee.rtp, 'rejected');
    const intruder = dgram.createSocket('udp4');
    await new Promise<void>((r) => intruder.bind(0, LOOPBACK, () => r()));
    for (let i = 0; i < 5; i++) {
      intruder.send(writeRtp({ payloadType: 0, marker: false, sequence: i, timestamp: i * 160, ssrc: 7, payload: loud }), callee.rtp.port, LOOPBACK);
    }
    const [from] = await rejected;
    assert.equal(from, `${LOOPBACK}:${intruder.address().port}`);
    // The caller's own audio (its first words) does arrive.
    const words = mulawToPcm16(Buffer.alloc(160, 0x20)); // a level G.711 carries exactly
    caller.sendAudio(words);
    while (!heard.some((f) => f.equals(words))) await once(callee, 'audio');
    const intruded = mulawToPcm16(loud);
    assert.ok(!heard.some((f) => f.equals(intruded)), "the intruder's audio was not taken");
    intruder.close();
    caller.hangup();
    await once(callee, 'ended');
  });
});
