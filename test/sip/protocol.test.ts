/**
 * The SIP stack's pieces on their own (src/sip/): messages read and written, digest challenges and
 * answers (nonces expire and are single use), SDP offer/answer (PCMU/PCMA, telephone-event, hold,
 * 488), the jitter buffer's order, RFC 4733 events, the RTP pacer after a stall and its one clock for
 * every call, G.711 carried through the RTP session, the status-to-outcome table, and the SIP_*
 * configuration.
 */
import dgram from 'node:dgram';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  header,
  headerAll,
  makeResponse,
  parseAuthorization,
  parseMessage,
  parseNameAddr,
  serialize,
  SipParseError,
  type SipRequest,
} from '../../src/sip/message.js';
import { answerChallenge, DigestServer } from '../../src/sip/digest.js';
import { answer, offer, readAnswer, SdpError, type LocalMedia } from '../../src/sip/sdp.js';
import { JitterBuffer } from '../../src/sip/jitter-buffer.js';
import { EventReceiver, keyPayloads, readEvent } from '../../src/sip/telephone-event.js';
import { outcomeOfStatus, STATUS_OUTCOMES } from '../../src/sip/outcomes.js';
import { readRtp, writeRtp } from '../../src/sip/rtp-packet.js';
import { RtpSession } from '../../src/sip/rtp-session.js';
import { RtpClock } from '../../src/sip/rtp-clock.js';
import { mulawToAlaw, alawToMulaw, alawToPcm16, mulawToPcm16, pcm16ToAlaw, pcm16ToMulaw } from '../../src/audio/pcm16.js';
import type { Codec } from '../../src/sip/sdp.js';
import { freePort, LOOPBACK } from '../helpers/sipp.js';
import { sipOptionsFromConfig } from '../../src/sip/settings.js';
import { ConfigError, loadConfig } from '../../src/config.js';

const INVITE = [
  'INVITE sip:+15550002222@10.0.0.1:5060 SIP/2.0',
  'Via: SIP/2.0/UDP 10.0.0.2:5060;branch=z9hG4bK-1;rport, SIP/2.0/TCP proxy.example:5060;branch=z9hG4bK-0',
  'f: "Ann" <sip:+15550001111@10.0.0.2>;tag=abc',
  't: <sip:+15550002222@10.0.0.1>',
  'i: call-1@10.0.0.2',
  'CSeq: 7 INVITE',
  'Subject: a folded',
  '  header',
  'Content-Length: 4',
  '',
  'v=0\r\nignored beyond Content-Length',
].join('\r\n');

const local: LocalMedia = { address: '192.0.2.10', port: 40000, codecs: ['PCMU', 'PCMA'], sessionId: '1', version: 1, direction: 'sendrecv' };

function sdp(lines: string[]): string {
  return ['v=0', 'o=- 1 1 IN IP4 198.51.100.7', 's=-', 'c=IN IP4 198.51.100.7', 't=0 0', ...lines, ''].join('\r\n');
}

describe('SIP messages', () => {
  it('reads compact forms, folded lines, Via lists and the body by Content-Length, and writes them back', () => {
    const m = parseMessage(Buffer.from(INVITE)) as SipRequest;
    assert.equal(m.kind, 'request');
    assert.equal(m.method, 'INVITE');
    assert.equal(headerAll(m.headers, 'via').length, 2);
    assert.equal(header(m.headers, 'call-id'), 'call-1@10.0.0.2');
    assert.equal(header(m.headers, 'subject'), 'a folded header');
    assert.equal(m.body.toString(), 'v=0\r');
    assert.equal(parseNameAddr(header(m.headers, 'from')!).display, 'Ann');
    const again = parseMessage(serialize(m)) as SipRequest;
    assert.deepEqual(again.headers, m.headers);
    assert.match(serialize(m).toString(), /^INVITE sip:\+15550002222@10\.0\.0\.1:5060 SIP\/2\.0\r\nVia: /);
  });

  it('a response copies Via, From, Call-ID and CSeq and tags To', () => {
    const m = parseMessage(Buffer.from(INVITE)) as SipRequest;
    const r = makeResponse(m, 486, 'xyz');
    assert.equal(r.reason, 'Busy Here');
    assert.deepEqual(headerAll(r.headers, 'via'), headerAll(m.headers, 'via'));
    assert.equal(parseNameAddr(header(r.headers, 'to')!).params.tag, 'xyz');
  });

  it('refuses what it cannot read, saying whether a 400 can be addressed', () => {
    const noCseq = INVITE.replace('CSeq: 7 INVITE\r\n', '');
    assert.throws(() => parseMessage(Buffer.from(noCseq)), SipParseError);
    try {
      parseMessage(Buffer.from(INVITE.replace('CSeq: 7 INVITE', 'CSeq: 7 BYE')));
      assert.fail('parsed');
    } catch (e) {
      assert.ok(e instanceof SipParseError);
      assert.ok(e.partial, 'a 400 can be sent');
    }
    try {
      parseMessage(Buffer.from('HELLO\r\n\r\n'));
      assert.fail('parsed');
    } catch (e) {
      assert.ok(e instanceof SipParseError);
      assert.equal(e.partial, undefined);
    }
    assert.throws(() => parseMessage(Buffer.from(INVITE.replace('Content-Length: 4', 'Content-Length: 400'))), SipParseError);
    assert.throws(() => parseMessage(Buffer.alloc(70_000, 0x41)), /too large/);
  });
});

describe('digest authentication', () => {
  it('a challenge answered with the right password passes once; a replay is stale; a wrong password is wrong', () => {
    const server = new DigestServer(30_000);
    const challenge = parseAuthorization(server.challenge('trunk.example')).params;
    const auth = parseAuthorization(answerChallenge(challenge, { username: 'acme', password: 's3cret' }, 'INVITE', 'sip:1@x')).params;
    assert.equal(server.verify(auth, 'INVITE', 'trunk.example', 'wrong'), 'wrong');
    assert.equal(server.verify(auth, 'INVITE', 'trunk.example', 's3cret'), 'ok');
    assert.equal(server.verify(auth, 'INVITE', 'trunk.example', 's3cret'), 'stale', 'single use');
    assert.equal(
      server.verify({ ...auth, nonce: auth.nonce.replace(/.$/, (c) => (c === 'x' ? 'y' : 'x')) }, 'INVITE', 'trunk.example', 's3cret'),
      'wrong',
      'forged nonce',
    );
  });

  it('a nonce older than its lifetime is stale', () => {
    let now = 1_000_000;
    const server = new DigestServer(30_000, () => now);
    const challenge = parseAuthorization(server.challenge('r')).params;
    const auth = parseAuthorization(answerChallenge(challenge, { username: 'u', password: 'p' }, 'INVITE', 'sip:1@x')).params;
    now += 30_001;
    assert.equal(server.verify(auth, 'INVITE', 'r', 'p'), 'stale');
  });
});

describe('SDP offer/answer', () => {
  it('our offer has PCMU, PCMA and telephone-event at 20 ms', () => {
    const o = offer(local);
    assert.match(o, /m=audio 40000 RTP\/AVP 0 8 101/);
    assert.match(o, /a=rtpmap:101 telephone-event\/8000/);
    assert.match(o, /a=ptime:20/);
  });

  it('answers with the first codec of the peer we take, its event type, and mirrors hold', () => {
    const a = answer(sdp(['m=audio 5004 RTP/AVP 18 8 0 96', 'a=rtpmap:96 telephone-event/8000', 'a=sendonly']), local);
    assert.equal(a.negotiated.codec, 'PCMA');
    assert.equal(a.negotiated.dtmfPayloadType, 96);
    assert.equal(a.negotiated.peerDirection, 'sendonly');
    assert.match(a.sdp, /m=audio 40000 RTP\/AVP 8 96/);
    assert.match(a.sdp, /a=recvonly/);
    const n = readAnswer(sdp(['m=audio 6000 RTP/AVP 0', 'a=rtpmap:0 PCMU/8000']), ['PCMU', 'PCMA']);
    assert.deepEqual([n.codec, n.port, n.dtmfPayloadType], ['PCMU', 6000, undefined]);
  });

  it('a codec we do not offer is 488; an unreadable description 400', () => {
    assert.throws(
      () => answer(sdp(['m=audio 5004 RTP/AVP 18', 'a=rtpmap:18 G729/8000']), local),
      (e: unknown) => e instanceof SdpError && e.status === 488,
    );
    assert.throws(
      () => answer(['v=0', 'm=audio 5004 RTP/AVP 0', ''].join('\r\n'), local),
      (e: unknown) => e instanceof SdpError && e.status === 400,
    );
  });
});

describe('jitter buffer', () => {
  it('puts reordered packets back in order, drops duplicates and late ones, and gives up on a lost one', () => {
    const j = new JitterBuffer(2);
    const got: string[] = [];
    const out = { audio: (p: Buffer) => got.push(String(p[0])), lost: (n: number) => got.push(`lost${n}`) };
    const push = (s: number) => j.push(s, Buffer.from([s & 0xff]), out);
    [65534, 0, 65535, 1, 1, 3, 4, 5, 2].forEach(push);
    // 65534 out; 0 waits for 65535; 65535 releases it and 0; 1 out; duplicate 1 dropped; 3, 4 wait; 5 makes 3 too deep: 2 is lost.
    assert.deepEqual(got, ['254', '255', '0', '1', 'lost1', '3', '4', '5']);
    assert.equal(j.dropped, 2);
  });
});

describe('RTP and RFC 4733', () => {
  it('a packet reads back as written', () => {
    const p = { payloadType: 0, marker: true, sequence: 65535, timestamp: 4_000_000_000, ssrc: 42, payload: Buffer.from('abc') };
    assert.deepEqual(readRtp(writeRtp(p)), p);
    assert.equal(readRtp(Buffer.alloc(11)), null);
    assert.equal(readRtp(Buffer.from([0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])), null, 'version 1');
  });

  it('a key is a run of growing durations ending three times, heard once', () => {
    const payloads = keyPayloads('#');
    assert.equal(payloads.length, 8);
    assert.deepEqual(
      payloads.map((p) => readEvent(p)!.duration),
      [160, 320, 480, 640, 800, 800, 800, 800],
    );
    assert.deepEqual(
      payloads.map((p) => readEvent(p)!.end),
      [false, false, false, false, false, true, true, true],
    );
    const r = new EventReceiver();
    const heard = [...payloads.map((p) => r.receive(1000, p)), ...keyPayloads('7').map((p) => r.receive(2600, p))].filter(Boolean);
    assert.deepEqual(heard, ['#', '7']);
    assert.deepEqual(keyPayloads('x'), []);
  });
});

describe('RTP pacer', () => {
  it('after a stalled event loop the RTP clock skips the frames not sent, so the stream keeps to its timestamps', async () => {
    const peer = dgram.createSocket('udp4');
    await new Promise<void>((r) => peer.bind(0, LOOPBACK, () => r()));
    const got: Array<{ seq: number; ts: number }> = [];
    peer.on('message', (b: Buffer) => got.push({ seq: b.readUInt16BE(2), ts: b.readUInt32BE(4) }));
    const from = await freePort();
    const rtp = await RtpSession.open({ host: LOOPBACK, min: from, max: from + 10 }, { jitterDepth: 3, maxQueuedFrames: 100 });
    const received = async (n: number) => {
      while (got.length < n) await new Promise((r) => setTimeout(r, 5));
    };
    try {
      rtp.setPeer({ codec: 'PCMU', payloadType: 0, address: LOOPBACK, port: peer.address().port, peerDirection: 'sendrecv' });
      rtp.setSending(true);
      await received(5);
      const stalled = performance.now();
      while (performance.now() - stalled < 300); // the event loop does nothing else for 300 ms
      const before = got.length;
      await received(before + 10);
    } finally {
      rtp.close();
      peer.close();
    }
    const steps = got.slice(1).map((p, i) => ({ seq: (p.seq - got[i].seq) & 0xffff, frames: ((p.ts - got[i].ts) >>> 0) / 160 }));
    assert.ok(
      steps.every((s) => s.seq === 1),
      'no packet is missing',
    );
    // 300 ms is 15 frames: the tick due in the stall sends one late and the rest are skipped. (A busy
    // machine may stall the process more than once: each stall is a jump.)
    assert.ok(
      steps.some((s) => s.frames >= 10),
      JSON.stringify(steps),
    );
    assert.ok(
      steps.every((s) => s.frames === 1 || s.frames >= 5),
      JSON.stringify(steps),
    );
  });
});

/** A bare UDP socket as an RTP peer: what it receives, and a way to send to a session. */
async function rawPeer() {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, LOOPBACK, () => r()));
  const got: Buffer[] = [];
  socket.on('message', (b: Buffer) => got.push(b));
  const received = async (n: number) => {
    while (got.length < n) await new Promise((r) => setTimeout(r, 5));
  };
  return { socket, got, received, port: socket.address().port };
}

async function sessionTo(peer: { port: number }, codec: Codec, clock?: RtpClock): Promise<RtpSession> {
  const from = await freePort();
  const rtp = await RtpSession.open({ host: LOOPBACK, min: from, max: from + 10 }, { jitterDepth: 3, maxQueuedFrames: 100, clock });
  rtp.setPeer({ codec, payloadType: codec === 'PCMU' ? 0 : 8, address: LOOPBACK, port: peer.port, peerDirection: 'sendrecv' });
  return rtp;
}

describe('RTP clock', () => {
  it('one clock paces every sending session: each keeps its own sequence and timestamps, and a session on hold leaves it', async () => {
    const clock = new RtpClock();
    const peers = [await rawPeer(), await rawPeer()];
    const sessions = [await sessionTo(peers[0], 'PCMU', clock), await sessionTo(peers[1], 'PCMU', clock)];
    try {
      for (const s of sessions) s.setSending(true);
      assert.equal(clock.size, 2);
      await Promise.all(peers.map((p) => p.received(10)));
      for (const p of peers) {
        const packets = p.got.map((b) => readRtp(b)!);
        assert.equal(new Set(packets.map((x) => x.ssrc)).size, 1, 'one stream a session');
        const steps = packets.slice(1).map((x, i) => ({ seq: (x.sequence - packets[i].sequence) & 0xffff, ts: (x.timestamp - packets[i].timestamp) >>> 0 }));
        assert.ok(
          steps.every((st) => st.seq === 1 && (st.ts === 160 || st.ts >= 5 * 160)),
          JSON.stringify(steps),
        );
      }
      sessions[0].setSending(false);
      assert.equal(clock.size, 1);
      sessions[1].close();
      assert.equal(clock.size, 0, 'no session sending: the clock has no timer');
    } finally {
      for (const s of sessions) s.close();
      for (const p of peers) p.socket.close();
    }
  });
});

describe('G.711 through the RTP session', () => {
  // The 256 codes: a 20 ms frame of 0-159, and 96 more (255 down to 160).
  const ulaw = Buffer.from(Array.from({ length: 160 }, (_, i) => i));
  const rest = Buffer.from(Array.from({ length: 96 }, (_, i) => 255 - i));

  it('mu-law goes to a PCMU peer as it is and to a PCMA peer as the A-law of the same samples; the last frame is padded with silence', async () => {
    for (const codec of ['PCMU', 'PCMA'] as const) {
      const peer = await rawPeer();
      const rtp = await sessionTo(peer, codec);
      try {
        rtp.sendUlaw(Buffer.concat([ulaw, rest]));
        rtp.setSending(true);
        // The queued frames go first; silence after them.
        await peer.received(3);
        const payloads = peer.got.map((b) => readRtp(b)!.payload);
        const padded = Buffer.concat([rest, Buffer.alloc(64, 0xff)]);
        const expected = codec === 'PCMU' ? [ulaw, padded] : [pcm16ToAlaw(mulawToPcm16(ulaw)), pcm16ToAlaw(mulawToPcm16(padded))];
        assert.deepEqual(payloads.slice(0, 2), expected, codec);
        assert.deepEqual(payloads[2], Buffer.alloc(160, codec === 'PCMU' ? 0xff : 0xd5), `${codec} silence`);
      } finally {
        rtp.close();
        peer.socket.close();
      }
    }
  });

  it("a PCMU peer's audio comes out as it came, a PCMA peer's as the mu-law of its samples; PCM16 for a listener that asks", async () => {
    for (const codec of ['PCMU', 'PCMA'] as const) {
      const peer = await rawPeer();
      const rtp = await sessionTo(peer, codec);
      const heard: Buffer[] = [];
      const pcm: Buffer[] = [];
      rtp.on('ulaw', (f) => heard.push(f));
      rtp.on('audio', (f) => pcm.push(f));
      try {
        const sent = [ulaw, Buffer.concat([rest, rest.subarray(0, 64)])];
        sent.forEach((payload, i) =>
          peer.socket.send(
            writeRtp({ payloadType: codec === 'PCMU' ? 0 : 8, marker: false, sequence: i, timestamp: i * 160, ssrc: 9, payload }),
            rtp.port,
            LOOPBACK,
          ),
        );
        while (heard.length < 2) await new Promise((r) => setTimeout(r, 5));
        assert.deepEqual(heard, codec === 'PCMU' ? sent : sent.map((a) => pcm16ToMulaw(alawToPcm16(a))), codec);
        assert.deepEqual(pcm, sent.map(codec === 'PCMU' ? mulawToPcm16 : alawToPcm16), codec);
      } finally {
        rtp.close();
        peer.socket.close();
      }
    }
  });

  it("while we send, the peer's audio and keys are handed on at the clock's ticks, in the order they came", async () => {
    const peer = await rawPeer();
    const rtp = await sessionTo(peer, 'PCMU');
    rtp.setPeer({ codec: 'PCMU', payloadType: 0, dtmfPayloadType: 101, address: LOOPBACK, port: peer.port, peerDirection: 'sendrecv' });
    const order: string[] = [];
    rtp.on('ulaw', (f) => order.push(`audio ${f[0]}`));
    rtp.on('dtmf', (k) => order.push(`key ${k}`));
    try {
      rtp.setSending(true);
      const send = (payloadType: number, sequence: number, timestamp: number, payload: Buffer) =>
        peer.socket.send(writeRtp({ payloadType, marker: false, sequence, timestamp, ssrc: 9, payload }), rtp.port, LOOPBACK);
      send(0, 1, 0, Buffer.alloc(160, 1));
      send(0, 2, 160, Buffer.alloc(160, 2));
      // (The key's packets numbered apart: the audio's own numbers run on without a gap to wait out.)
      keyPayloads('5').forEach((payload, i) => send(101, 100 + i, 320, payload));
      send(0, 3, 1120, Buffer.alloc(160, 3));
      while (order.length < 4) await new Promise((r) => setTimeout(r, 5));
      assert.deepEqual(order, ['audio 1', 'audio 2', 'key 5', 'audio 3']);
    } finally {
      rtp.close();
      peer.socket.close();
    }
  });

  it('one law to the other by table is exactly decoding and encoding again', () => {
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    assert.deepEqual(mulawToAlaw(all), pcm16ToAlaw(mulawToPcm16(all)));
    assert.deepEqual(alawToMulaw(all), pcm16ToMulaw(alawToPcm16(all)));
  });
});

describe('SIP answers as outcomes', () => {
  it('486 busy; 408, 480, 487 no_answer; 603 declined; 404, 484, 5xx failed', () => {
    for (const [status, outcome] of STATUS_OUTCOMES) assert.equal(outcomeOfStatus(status), outcome, String(status));
    assert.equal(outcomeOfStatus(403), 'failed');
  });
});

describe('SIP configuration', () => {
  const hooks = { authenticateInbound: () => ({ action: 'refuse' as const }), log: { info() {}, warn() {}, debug() {} } };

  it('no SIP_PORT, no user agent; with one, the settings and their defaults', () => {
    assert.equal(sipOptionsFromConfig(loadConfig({}), hooks), undefined);
    const o = sipOptionsFromConfig(loadConfig({ SIP_PORT: '5060', SIP_ADVERTISED_ADDRESS: '203.0.113.5' }), hooks)!;
    assert.equal(o.port, 5060);
    assert.equal(o.advertisedAddress, '203.0.113.5');
    assert.deepEqual(o.transports, ['udp', 'tcp']);
    assert.deepEqual(o.rtp, { min: 10_000, max: 20_000 });
    assert.deepEqual(o.timers, { t1: 500, t2: 4000, t4: 5000 });
    assert.equal(o.tls, undefined);
  });

  it('bad settings stop start-up naming the variable', () => {
    for (const [env, name] of [
      [{ SIP_RTP_PORT_MIN: '20000', SIP_RTP_PORT_MAX: '10000' }, 'SIP_RTP_PORT_MAX'],
      [{ SIP_TLS_CERT_PATH: '/x.pem' }, 'SIP_TLS_KEY_PATH'],
      [{ SIP_TRANSPORTS: 'udp,tls' }, 'SIP_TLS_CERT_PATH'],
      [{ SIP_TRANSPORTS: 'sctp' }, 'SIP_TRANSPORTS'],
      [{ SIP_ADVERTISED_ADDRESS: 'sip.example.com' }, 'SIP_ADVERTISED_ADDRESS'],
    ] as const) {
      assert.throws(
        () => loadConfig(env),
        (e: unknown) => e instanceof ConfigError && e.message.includes(name),
        name,
      );
    }
  });
});
