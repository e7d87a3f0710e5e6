/**
 * Our RTP clock across a re-INVITE hold and resume (RFC 3550 section 5.1: the timestamp follows the
 * sampling clock whether or not packets are sent). The test is the caller, a peer written here from
 * RFC 3261 over a UDP socket of its own, with its media on a second socket that reads our packets'
 * headers: it holds the call (sendonly), waits, resumes (sendrecv) and checks the first packet after
 * the resume. Its sequence number follows the last one before the hold, it carries the marker bit, and
 * its timestamp has moved on by the time held at 8 kHz: at least the time between the hold's 200 and
 * the resume's re-INVITE (we stopped before the one and started after the other), and not ahead of the
 * time it arrived at (measured against the least-delayed packet before the hold). Both bounds hold
 * whatever the machine's load: they come from the order of events, not from how long anything took.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { parseMessage, type SipResponse, header } from '../../src/sip/message.js';
import { readRtp } from '../../src/sip/rtp-packet.js';
import type { SipUserAgent } from '../../src/sip/index.js';
import { LOOPBACK, testUserAgent } from '../helpers/sipp.js';

/** How long the call is held: the RTP clock must show it. */
const HOLD_MS = 600;
/** How far ahead of its arrival a packet's timestamp may put it: timers fire up to a millisecond early, and the least-delayed packet before the hold still had some delay. */
const AHEAD_MS = 40;
const CALL_ID = `hold-${process.pid}@${LOOPBACK}`;

interface Received {
  sequence: number;
  timestamp: number;
  marker: boolean;
  /** performance.now() when read. */
  at: number;
}

let ua: SipUserAgent;
let sig: dgram.Socket;
let media: dgram.Socket;
const packets: Received[] = [];
let onPacket = () => undefined as void;
let onResponse = (_r: SipResponse) => undefined as void;

const bind = async (socket: dgram.Socket) => new Promise<void>((r) => socket.bind(0, LOOPBACK, () => r()));

before(async () => {
  ua = await testUserAgent();
  ua.on('incoming', (call) => void call.answer());
  sig = dgram.createSocket('udp4');
  media = dgram.createSocket('udp4');
  await Promise.all([bind(sig), bind(media)]);
  sig.on('message', (buf) => {
    const m = parseMessage(buf);
    if (m.kind === 'response') onResponse(m);
  });
  media.on('message', (buf) => {
    const p = readRtp(buf);
    if (!p || p.payloadType !== 0) return;
    packets.push({ sequence: p.sequence, timestamp: p.timestamp, marker: p.marker, at: performance.now() });
    onPacket();
  });
});

after(async () => {
  await ua?.stop();
  sig?.close();
  media?.close();
});

function sdp(version: number, direction: 'sendrecv' | 'sendonly'): string {
  return [
    'v=0',
    `o=- 1 ${version} IN IP4 ${LOOPBACK}`,
    's=-',
    `c=IN IP4 ${LOOPBACK}`,
    't=0 0',
    `m=audio ${media.address().port} RTP/AVP 0 101`,
    'a=rtpmap:0 PCMU/8000',
    'a=rtpmap:101 telephone-event/8000',
    'a=fmtp:101 0-16',
    'a=ptime:20',
    `a=${direction}`,
    '',
  ].join('\r\n');
}

let branch = 0;
function request(method: string, cseq: number, toTag: string | undefined, body = ''): string {
  return [
    `${method} sip:+15550002222@${LOOPBACK}:${ua.port} SIP/2.0`,
    `Via: SIP/2.0/UDP ${LOOPBACK}:${sig.address().port};branch=z9hG4bK-hold-${process.pid}-${++branch};rport`,
    'Max-Forwards: 70',
    `From: <sip:+15550001111@${LOOPBACK}>;tag=holder`,
    `To: <sip:+15550002222@${LOOPBACK}>${toTag ? `;tag=${toTag}` : ''}`,
    `Call-ID: ${CALL_ID}`,
    `CSeq: ${cseq} ${method}`,
    `Contact: <sip:+15550001111@${LOOPBACK}:${sig.address().port}>`,
    ...(body ? ['Content-Type: application/sdp'] : []),
    `Content-Length: ${Buffer.byteLength(body)}`,
    '',
    body,
  ].join('\r\n');
}

/** Sends a request and resolves with its final response (provisional ones, and an earlier INVITE's 200 resent, are skipped). */
function send(message: string): Promise<SipResponse> {
  const cseq = /^CSeq: (.*)$/m.exec(message)![1];
  return new Promise((resolve) => {
    onResponse = (r) => {
      if (r.status >= 200 && header(r.headers, 'cseq') === cseq) resolve(r);
    };
    sig.send(message, ua.port, LOOPBACK);
  });
}

const packetsArrived = (n: number) =>
  new Promise<void>((resolve) => {
    onPacket = () => void (packets.length >= n && resolve());
    onPacket();
  });

describe('the RTP clock across a re-INVITE hold and resume', () => {
  it('runs on while held: the first packet after the resume continues the sequence, is marked, and is stamped by the time held', async () => {
    const ok = await send(request('INVITE', 1, undefined, sdp(1, 'sendrecv')));
    assert.equal(ok.status, 200);
    const toTag = /;tag=([^;>\s]+)/.exec(header(ok.headers, 'to') ?? '')?.[1];
    assert.ok(toTag, 'the 200 has a To tag');
    sig.send(request('ACK', 1, toTag), ua.port, LOOPBACK);
    await packetsArrived(10);

    const holdSent = performance.now();
    const held = await send(request('INVITE', 2, toTag, sdp(2, 'sendonly')));
    const holdAnswered = performance.now();
    assert.equal(held.status, 200);
    assert.match(held.body.toString(), /a=recvonly/);
    sig.send(request('ACK', 2, toTag), ua.port, LOOPBACK);
    await new Promise((r) => setTimeout(r, HOLD_MS));

    const resumeSent = performance.now();
    const before = packets.length;
    const resumed = await send(request('INVITE', 3, toTag, sdp(3, 'sendrecv')));
    assert.equal(resumed.status, 200);
    sig.send(request('ACK', 3, toTag), ua.port, LOOPBACK);
    await packetsArrived(before + 5);
    await send(request('BYE', 4, toTag));

    const last = packets[before - 1];
    const first = packets[before];
    assert.ok(first.at > resumeSent && last.at < resumeSent);
    assert.equal(first.sequence, (last.sequence + 1) & 0xffff, 'sequence numbers go on');
    assert.equal(first.marker, true, 'the first packet after the hold starts a talkspurt');
    assert.ok(!packets.slice(1, before).some((p) => p.marker), 'no marker before the hold');

    const heldMs = ((first.timestamp - last.timestamp) >>> 0) / 8;
    const leastHeld = resumeSent - holdAnswered;
    assert.ok(
      heldMs >= leastHeld,
      `the timestamp moved by ${heldMs} ms across the hold; we were held at least ${leastHeld.toFixed(1)} ms (hold asked ${holdSent.toFixed(1)})`,
    );
    // Where each packet's timestamp puts it on our clock, against the least-delayed packet before the hold.
    const start = packets[0];
    const offset = Math.min(...packets.slice(0, before).map((p) => p.at - ((p.timestamp - start.timestamp) >>> 0) / 8));
    const lateness = first.at - ((first.timestamp - start.timestamp) >>> 0) / 8 - offset;
    assert.ok(lateness > -AHEAD_MS, `the first packet after the resume is stamped ${-lateness} ms ahead of its arrival`);
  });
});
