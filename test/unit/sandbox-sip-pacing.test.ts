/**
 * The sandbox SIP far end's speech under a busy event loop. A callee talks on the far end's line clock
 * (one 20 ms frame queued on the call's RTP session per line frame); the packets go out on a pacer.
 * Paced by a clock of their own (the process's RtpClock, which catches up to five missed ticks after a
 * stall, while the line clock delivers at most three), every stall of 60-120 ms took up to three
 * frames more from the RTP queue than the line put in: mid-utterance it ran dry and RTP sent silence
 * there, which cut the spoken text (conformance's first sip call lost "Hello, this is Sam." when the
 * carriers ran at once on a loaded machine). Paced by the line clock's own frames (`Clock.rtpPacer()`,
 * what sip.ts gives the far end's user agent), each frame queued is the next one sent, whatever the
 * stalls. Time is mocked (node:test's timers and Date): the stalls are exact, the result the same on
 * any machine; the packets are real RTP over loopback UDP.
 */
import { afterEach, beforeEach, describe, it, mock } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { Clock, FRAME_MS } from '../../src/sandbox/carriers/clock.js';
import { RtpClock, type RtpPacer } from '../../src/sip/rtp-clock.js';
import { RtpSession } from '../../src/sip/rtp-session.js';
import { readRtp } from '../../src/sip/rtp-packet.js';
import { freePort, LOOPBACK } from '../helpers/sipp.js';

const SPEECH_FRAMES = 60;
/** Mu-law silence: what RTP sends while nothing is queued. */
const SILENCE = 0xff;
/** Speech frame i: 160 bytes of one value that is never silence. */
const speechFrame = (i: number) => Buffer.alloc(160, 0x10 + (i % 100));

let receiver: dgram.Socket;
let payloads: Buffer[];
let onPayload: () => void;

beforeEach(async () => {
  payloads = [];
  onPayload = () => undefined;
  receiver = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => receiver.bind(0, LOOPBACK, () => resolve()));
  receiver.on('message', (buf) => {
    const p = readRtp(buf);
    if (p) payloads.push(p.payload);
    onPayload();
  });
  mock.timers.enable({ apis: ['setTimeout', 'setInterval', 'Date'], now: 1_000_000 });
});

afterEach(() => {
  mock.timers.reset();
  receiver.close();
});

/**
 * A callee says SPEECH_FRAMES frames on `line`'s frames (after `prebuffer` frames held back, as the far
 * end once did to absorb the two clocks' skew) while the event loop stalls 100 ms every 200 ms; the
 * packets are paced by `pacer`. Answers what arrived, from the first speech frame to the last.
 */
async function speakThroughStalls(line: Clock, pacer: RtpPacer, prebuffer: number): Promise<Buffer[]> {
  const rtpMin = await freePort();
  const rtp = await RtpSession.open({ host: LOOPBACK, min: rtpMin, max: rtpMin + 50 }, { jitterDepth: 3, maxQueuedFrames: 3000, clock: pacer });
  rtp.setPeer({ address: LOOPBACK, port: receiver.address().port, codec: 'PCMU', payloadType: 0, peerDirection: 'sendrecv' });
  rtp.setSending(true);
  let next = 0;
  const held: Buffer[] = [];
  const stop = line.onFrame(() => {
    if (next >= SPEECH_FRAMES) return;
    held.push(speechFrame(next++));
    if (rtp.queuedMs === 0 && held.length < prebuffer && next < SPEECH_FRAMES) return;
    rtp.sendUlaw(Buffer.concat(held.splice(0)));
  });
  const last = speechFrame(SPEECH_FRAMES - 1);
  const arrived = new Promise<void>((resolve) => {
    onPayload = () => payloads.some((p) => p.equals(last)) && resolve();
  });
  // 20 ms at a time, and every 200 ms a stall: 100 ms pass with no timer run, then the late ones run.
  for (let elapsed = 0; elapsed < SPEECH_FRAMES * FRAME_MS * 3; elapsed += FRAME_MS) {
    if (elapsed % 200 === 100) {
      mock.timers.setTime(Date.now() + 100);
      mock.timers.tick(0);
    } else mock.timers.tick(FRAME_MS);
  }
  await arrived;
  stop();
  rtp.close();
  const first = payloads.findIndex((p) => p[0] !== SILENCE);
  const end = payloads.findIndex((p) => p.equals(last));
  return payloads.slice(first, end + 1);
}

describe("the sandbox SIP far end's speech on a stalling event loop", () => {
  it('goes out whole and in order when its RTP is paced by the line clock', async () => {
    const line = new Clock(1, () => Date.now());
    const spoken = await speakThroughStalls(line, line.rtpPacer(), 0);
    assert.equal(
      spoken.findIndex((p) => p[0] === SILENCE),
      -1,
      'no silence inside the speech',
    );
    assert.deepEqual(
      spoken.map((p) => p[0]),
      Array.from({ length: SPEECH_FRAMES }, (_, i) => speechFrame(i)[0]),
    );
    line.stop();
  });

  it('ran dry mid-utterance, sending silence, when paced by a clock of its own (the defect)', async () => {
    const line = new Clock(1, () => Date.now());
    const spoken = await speakThroughStalls(line, new RtpClock(() => Date.now()), 5);
    assert.ok(
      spoken.some((p) => p[0] === SILENCE),
      'the same stalls put silence inside the speech',
    );
    line.stop();
  });

  it('takes no clock but real time for RTP', () => {
    assert.throws(() => new Clock(4).rtpPacer(), /RTP is real time: only a clock at speed 1 paces it/);
  });
});
