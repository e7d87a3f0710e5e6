/**
 * One call's audio: a UDP port from the configured range, symmetric RTP (we send from the port we
 * receive on) to the negotiated peer only and take packets only from it, a reordering jitter buffer,
 * G.711 both ways and RFC 4733 keys both ways. Audio to send is queued and sent one 20 ms packet per
 * tick on a clock corrected for drift; while nothing is queued silence is sent, so the peer's media
 * timers see a live stream; on hold nothing is sent.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import { randomBytes, randomInt } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { alawToPcm16, ALAW_SILENCE, mulawToPcm16, MULAW_SILENCE, pcm16ToAlaw, pcm16ToMulaw } from '../audio/pcm16.js';
import { JitterBuffer } from './jitter-buffer.js';
import { readRtp, writeRtp } from './rtp-packet.js';
import { EventReceiver, keyPayloads } from './telephone-event.js';
import type { Negotiated } from './sdp.js';

export const FRAME_SAMPLES = 160;
export const FRAME_MS = 20;
const FRAME_BYTES = FRAME_SAMPLES * 2;

export interface RtpPortRange {
  host: string;
  min: number;
  max: number;
}

export interface RtpSessionOptions {
  jitterDepth: number;
  /** Frames of audio queued to send at most; beyond, the oldest go. */
  maxQueuedFrames: number;
}

export interface RtpEvents {
  /** A 20 ms frame the peer sent, PCM16 LE at 8 kHz (silence in place of a lost packet). */
  audio: [pcm: Buffer];
  dtmf: [key: string];
  /** A packet from anyone but the negotiated peer, or unreadable: dropped. */
  rejected: [from: string];
}

/** Bind an even port of the range (RTP's convention; RTCP would take the odd one above). */
async function bindInRange(range: RtpPortRange): Promise<dgram.Socket> {
  const evens = Math.floor((range.max - range.min) / 2) + 1;
  const start = randomInt(evens);
  for (let i = 0; i < Math.min(evens, 64); i++) {
    const port = range.min + ((start + i) % evens) * 2 + (range.min % 2);
    const socket = dgram.createSocket(net.isIPv6(range.host) ? 'udp6' : 'udp4');
    const ok = await new Promise<boolean>((resolve) => {
      socket.once('error', () => resolve(false));
      socket.bind(port, range.host, () => resolve(true));
    });
    if (ok) return socket;
    socket.close();
  }
  throw new Error('no free RTP port in the configured range');
}

export class RtpSession extends EventEmitter<RtpEvents> {
  private peer?: Negotiated;
  private sending = false;
  private readonly queue: Buffer[] = [];
  private readonly events: Buffer[][] = [];
  private sequence = randomInt(0x10000);
  private timestamp = randomBytes(4).readUInt32BE(0);
  private readonly ssrc = randomBytes(4).readUInt32BE(0);
  private jitter: JitterBuffer;
  private readonly receiver = new EventReceiver();
  private timer?: NodeJS.Timeout;
  private nextTick = 0;
  private closed = false;
  /** Sent packets' send times minus their due times, ms (the pacer's error), for measurements. */
  readonly sendErrors: number[] = [];

  private constructor(
    private readonly socket: dgram.Socket,
    private readonly options: RtpSessionOptions,
  ) {
    super();
    this.jitter = new JitterBuffer(options.jitterDepth);
    socket.on('error', () => undefined);
    socket.on('message', (buf, rinfo) => this.receive(buf, rinfo));
  }

  static async open(range: RtpPortRange, options: RtpSessionOptions): Promise<RtpSession> {
    return new RtpSession(await bindInRange(range), options);
  }

  get port(): number {
    return this.socket.address().port;
  }

  /** Where to send and what to expect, from the offer/answer; a new peer address restarts the jitter buffer. */
  setPeer(n: Negotiated): void {
    if (this.peer && (this.peer.address !== n.address || this.peer.port !== n.port)) this.jitter = new JitterBuffer(this.options.jitterDepth);
    this.peer = n;
  }

  /** Start or stop sending (hold). */
  setSending(on: boolean): void {
    this.sending = on && !this.closed;
    if (this.sending && !this.timer) {
      this.nextTick = performance.now();
      this.tick();
    } else if (!this.sending && this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /** Queue PCM16 8 kHz audio; it is sent in 20 ms packets (a partial last frame is padded with silence). */
  sendAudio(pcm: Buffer): void {
    for (let at = 0; at < pcm.length; at += FRAME_BYTES) {
      let frame = pcm.subarray(at, at + FRAME_BYTES);
      if (frame.length < FRAME_BYTES) frame = Buffer.concat([frame, Buffer.alloc(FRAME_BYTES - frame.length)]);
      this.queue.push(frame);
    }
    if (this.queue.length > this.options.maxQueuedFrames) this.queue.splice(0, this.queue.length - this.options.maxQueuedFrames);
  }

  /** Drop audio not yet sent (the person interrupted). */
  clearAudio(): void {
    this.queue.length = 0;
  }

  get queuedMs(): number {
    return this.queue.length * FRAME_MS;
  }

  /** Send keys as RFC 4733 events, in order, between audio frames. */
  sendDtmf(keys: string): void {
    for (const k of keys) {
      const packets = keyPayloads(k);
      if (packets.length) this.events.push(packets);
    }
  }

  private tick(): void {
    if (!this.sending) return;
    const late = performance.now() - this.nextTick;
    this.sendOne(late);
    this.nextTick += FRAME_MS;
    // Too far behind (a stalled loop): skip ahead instead of sending a burst.
    if (performance.now() - this.nextTick > 5 * FRAME_MS) this.nextTick = performance.now();
    this.timer = setTimeout(() => this.tick(), Math.max(0, this.nextTick - performance.now()));
  }

  private sendOne(lateMs: number): void {
    const peer = this.peer;
    if (!peer) return;
    if (this.sendErrors.length < 100_000) this.sendErrors.push(lateMs);
    const event = this.events[0];
    if (event && peer.dtmfPayloadType !== undefined) {
      const payload = event.shift()!;
      const first = payload.readUInt16BE(2) === FRAME_SAMPLES && (payload[1] & 0x80) === 0;
      this.packet(peer, peer.dtmfPayloadType, payload, first, this.timestamp);
      if (!event.length) {
        this.events.shift();
        // The event's samples have passed: the next packet's timestamp is after them.
        this.timestamp = (this.timestamp + payload.readUInt16BE(2)) >>> 0;
      }
      return;
    }
    if (event) this.events.shift(); // the peer takes no events
    const frame = this.queue.shift();
    const payload = frame
      ? peer.codec === 'PCMU'
        ? pcm16ToMulaw(frame)
        : pcm16ToAlaw(frame)
      : Buffer.alloc(FRAME_SAMPLES, peer.codec === 'PCMU' ? MULAW_SILENCE : ALAW_SILENCE);
    this.packet(peer, peer.payloadType, payload, false, this.timestamp);
    this.timestamp = (this.timestamp + FRAME_SAMPLES) >>> 0;
  }

  private packet(peer: Negotiated, payloadType: number, payload: Buffer, marker: boolean, timestamp: number): void {
    const buf = writeRtp({ payloadType, marker, sequence: this.sequence, timestamp, ssrc: this.ssrc, payload });
    this.sequence = (this.sequence + 1) & 0xffff;
    this.socket.send(buf, peer.port, peer.address);
  }

  private receive(buf: Buffer, from: dgram.RemoteInfo): void {
    const peer = this.peer;
    if (!peer || from.address !== peer.address || from.port !== peer.port) {
      this.emit('rejected', `${from.address}:${from.port}`);
      return;
    }
    const p = readRtp(buf);
    if (!p) {
      this.emit('rejected', `${from.address}:${from.port}`);
      return;
    }
    if (peer.dtmfPayloadType !== undefined && p.payloadType === peer.dtmfPayloadType) {
      const key = this.receiver.receive(p.timestamp, p.payload);
      if (key) this.emit('dtmf', key);
      return;
    }
    if (p.payloadType !== peer.payloadType || p.payload.length === 0 || p.payload.length > 1600) return;
    for (const r of this.jitter.push(p.sequence, p.payload)) {
      if ('lost' in r) {
        for (let i = 0; i < Math.min(r.lost, 50); i++) this.emit('audio', Buffer.alloc(FRAME_BYTES));
      } else this.emit('audio', peer.codec === 'PCMU' ? mulawToPcm16(r.payload) : alawToPcm16(r.payload));
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.setSending(false);
    this.socket.close();
  }
}
