/**
 * One call's audio: a UDP port from the configured range, symmetric RTP (we send from the port we
 * receive on) to the negotiated peer only and take packets only from it, a reordering jitter buffer,
 * G.711 both ways and RFC 4733 keys both ways. Audio to send (mu-law, or PCM16) is queued and sent one
 * 20 ms packet per tick of the process's shared RTP clock (rtp-clock.ts); while nothing is queued
 * silence is sent, so the peer's media timers see a live stream; on hold nothing is sent. Mu-law goes
 * to a PCMU peer and comes from it as it is, with no PCM16 in between: a call's audio is mu-law on
 * both sides (the carriers' media streams), so decoding and encoding it again was work for nothing.
 */
import dgram from 'node:dgram';
import dns from 'node:dns';
import net from 'node:net';
import { randomBytes, randomInt } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { alawToMulaw, alawToPcm16, ALAW_SILENCE, mulawToAlaw, mulawToPcm16, MULAW_SILENCE, pcm16ToAlaw, pcm16ToMulaw } from '../audio/pcm16.js';
import { JitterBuffer, type JitterOutput } from './jitter-buffer.js';
import { readRtp, writeRtp } from './rtp-packet.js';
import { FRAME_MS, rtpClock, type PacedStream, type RtpPacer } from './rtp-clock.js';
import { EventReceiver, keyPayloads } from './telephone-event.js';
import type { Codec, Negotiated } from './sdp.js';

export { FRAME_MS };
export const FRAME_SAMPLES = 160;
const FRAME_BYTES = FRAME_SAMPLES * 2;

/** A 20 ms packet of silence in each law, shared by every call: never written to. */
const SILENCE: Record<Codec, Buffer> = {
  PCMU: Buffer.alloc(FRAME_SAMPLES, MULAW_SILENCE),
  PCMA: Buffer.alloc(FRAME_SAMPLES, ALAW_SILENCE),
};

export interface RtpPortRange {
  host: string;
  min: number;
  max: number;
}

export interface RtpSessionOptions {
  jitterDepth: number;
  /** Frames of audio queued to send at most; beyond, the oldest go. */
  maxQueuedFrames: number;
  /** What paces the packets we send: the process's shared clock unless a test or the sandbox's far end gives its own. */
  clock?: RtpPacer;
  /** false: the peer's audio is handed on as it arrives, not at the clock's next tick. */
  handOnTick?: boolean;
}

export interface RtpEvents {
  /** A frame the peer sent, mu-law at 8 kHz (silence in place of a lost packet; a shared buffer for that: read it, never write to it). */
  ulaw: [frame: Buffer];
  /** The same frame as PCM16 LE at 8 kHz, decoded only while someone listens. */
  audio: [pcm: Buffer];
  dtmf: [key: string];
  /** A packet from anyone but the negotiated peer, or unreadable: dropped. */
  rejected: [from: string];
}

/**
 * dgram looks up the address of every datagram it sends (dns.lookup, which answers even an IP address
 * on the next tick): a deferred callback per packet. A peer's address is an IP address nearly always
 * (SDP's c= line), answered here at once; a name still goes to dns.lookup. (Not a connect()ed socket,
 * which would skip the lookup too: the kernel would then drop other sources' packets unseen, and RTP
 * from a stranger is reported, `rejected`.)
 */
const ipAddressAtOnce = ((address: string, family: number, callback: (err: NodeJS.ErrnoException | null, address: string, family: number) => void) => {
  const version = net.isIP(address);
  if (version) callback(null, address, version);
  else dns.lookup(address, family, callback);
}) as unknown as dgram.SocketOptions['lookup'];

/** Bind an even port of the range (RTP's convention; RTCP would take the odd one above). */
async function bindInRange(range: RtpPortRange): Promise<dgram.Socket> {
  const evens = Math.floor((range.max - range.min) / 2) + 1;
  const start = randomInt(evens);
  for (let i = 0; i < Math.min(evens, 64); i++) {
    const port = range.min + ((start + i) % evens) * 2 + (range.min % 2);
    const socket = dgram.createSocket({ type: net.isIPv6(range.host) ? 'udp6' : 'udp4', lookup: ipAddressAtOnce });
    const ok = await new Promise<boolean>((resolve) => {
      socket.once('error', () => resolve(false));
      socket.bind(port, range.host, () => resolve(true));
    });
    if (ok) return socket;
    socket.close();
  }
  throw new Error('no free RTP port in the configured range');
}

export class RtpSession extends EventEmitter<RtpEvents> implements PacedStream {
  private peer?: Negotiated;
  private sending = false;
  /** Frames to send: 160 bytes of mu-law or 320 of PCM16 (the length says which). */
  private readonly queue: Buffer[] = [];
  private readonly events: Buffer[][] = [];
  private sequence = randomInt(0x10000);
  private timestamp = randomBytes(4).readUInt32BE(0);
  private readonly ssrc = randomBytes(4).readUInt32BE(0);
  private jitter: JitterBuffer;
  private readonly receiver = new EventReceiver();
  private readonly clock: RtpPacer;
  /** RTP clock the pacer skipped in a stall or a hold, added before the next audio packet or key event (not inside one). */
  private skippedSamples = 0;
  /** Whether a packet went since sending last started (a hold counts from the one after it). */
  private sent = false;
  /** On hold: when the packet not sent was due (the clock's time), from which the held time counts. */
  private heldSince?: number;
  /** The next packet starts a talkspurt (after a hold): RTP's marker bit (RFC 3551 section 4.1). */
  private talkspurt = false;
  private closed = false;
  /**
   * What the peer sent since the last tick, handed on at the next one while we send: a payload, a
   * key, or how many packets were lost.
   */
  private inbox: Array<Buffer | string | number> = [];
  /** Where the jitter buffer hands the peer's packets, in order. */
  private readonly heard: JitterOutput = {
    audio: (payload) => this.hear(payload),
    lost: (packets) => this.hear(packets),
  };

  private constructor(
    private readonly socket: dgram.Socket,
    private readonly options: RtpSessionOptions,
  ) {
    super();
    this.clock = options.clock ?? rtpClock;
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

  /**
   * Start or stop sending (hold); the first packet goes on the shared clock's next tick. The RTP clock
   * runs on through a hold (RFC 3550 section 5.1: the timestamp follows the sampling clock whether or
   * not packets are sent): the first packet after it is stamped by the wall time held at 8 kHz and
   * carries the marker bit; sequence numbers just go on.
   */
  setSending(on: boolean): void {
    const sending = on && !this.closed;
    if (sending === this.sending) return;
    this.sending = sending;
    if (sending) {
      if (this.heldSince !== undefined) {
        this.skippedSamples += Math.max(0, Math.round(((this.clock.time() - this.heldSince) * FRAME_SAMPLES) / FRAME_MS));
        this.heldSince = undefined;
        this.talkspurt = true;
      }
      this.sent = false;
      this.clock.add(this);
    } else {
      this.clock.remove(this);
      // The timestamp stands at the packet due on the tick after the last one sent: the held time counts from there.
      if (this.sent) this.heldSince = this.clock.lastTickAt + FRAME_MS;
      this.handOn();
    }
  }

  /** Queue PCM16 8 kHz audio; it is sent in 20 ms packets (a partial last frame is padded with silence). */
  sendAudio(pcm: Buffer): void {
    this.enqueue(pcm, FRAME_BYTES, 0);
  }

  /** Queue mu-law 8 kHz audio, sent as it is to a PCMU peer (a partial last frame is padded with silence). */
  sendUlaw(ulaw: Buffer): void {
    this.enqueue(ulaw, FRAME_SAMPLES, MULAW_SILENCE);
  }

  private enqueue(audio: Buffer, frameBytes: number, silence: number): void {
    for (let at = 0; at < audio.length; at += frameBytes) {
      let frame = audio.subarray(at, at + frameBytes);
      if (frame.length < frameBytes) frame = Buffer.concat([frame, Buffer.alloc(frameBytes - frame.length, silence)]);
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

  /** The shared clock's tick: this call's next packet. */
  tick(): void {
    this.handOn();
    if (this.sending) {
      this.sendOne();
      this.sent = true;
    }
  }

  /** The clock skipped frames after a stall: their time passes on our RTP clock before the next packet. */
  skipped(frames: number): void {
    this.skippedSamples += frames * FRAME_SAMPLES;
  }

  private sendOne(): void {
    const peer = this.peer;
    if (!peer) return;
    const event = this.events[0];
    if (event && peer.dtmfPayloadType !== undefined) {
      const payload = event.shift()!;
      const first = payload.readUInt16BE(2) === FRAME_SAMPLES && (payload[1] & 0x80) === 0;
      if (first) {
        this.passSkippedTime();
        this.talkspurt = false; // an event's first packet carries the marker anyway (RFC 4733 section 2.5.1.1)
      }
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
    const pcmu = peer.codec === 'PCMU';
    const payload = !frame
      ? SILENCE[peer.codec]
      : frame.length === FRAME_SAMPLES
        ? pcmu
          ? frame
          : mulawToAlaw(frame)
        : pcmu
          ? pcm16ToMulaw(frame)
          : pcm16ToAlaw(frame);
    this.passSkippedTime();
    this.packet(peer, peer.payloadType, payload, this.startsTalkspurt(), this.timestamp);
    this.timestamp = (this.timestamp + FRAME_SAMPLES) >>> 0;
  }

  private startsTalkspurt(): boolean {
    const marker = this.talkspurt;
    this.talkspurt = false;
    return marker;
  }

  private passSkippedTime(): void {
    this.timestamp = (this.timestamp + this.skippedSamples) >>> 0;
    this.skippedSamples = 0;
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
      if (key) this.hear(key);
      return;
    }
    if (p.payloadType !== peer.payloadType || p.payload.length === 0 || p.payload.length > 1600) return;
    this.jitter.push(p.sequence, p.payload, this.heard);
  }

  /**
   * While we send, what the peer sent is handed on at the clock's next tick, every call's at once:
   * the listener's own work for it (the call bridge writing to the voice service) then comes in one
   * burst a tick for all calls instead of one wake-up a packet. At most 20 ms later than it came.
   */
  private hear(x: Buffer | string | number): void {
    if (this.sending && this.options.handOnTick !== false) this.inbox.push(x);
    else this.handOnOne(x);
  }

  private handOn(): void {
    if (!this.inbox.length) return;
    const held = this.inbox;
    this.inbox = [];
    for (const x of held) this.handOnOne(x);
  }

  private handOnOne(x: Buffer | string | number): void {
    if (typeof x === 'string') this.emit('dtmf', x);
    else if (typeof x === 'number') this.heardLoss(x);
    else this.heardFrame(x);
  }

  private heardFrame(payload: Buffer): void {
    const pcmu = this.peer?.codec !== 'PCMA';
    this.emit('ulaw', pcmu ? payload : alawToMulaw(payload));
    if (this.listenerCount('audio') > 0) this.emit('audio', pcmu ? mulawToPcm16(payload) : alawToPcm16(payload));
  }

  /** Silence in place of packets that never came (up to a second of it), so the listener keeps time. */
  private heardLoss(packets: number): void {
    for (let i = 0; i < Math.min(packets, 50); i++) {
      this.emit('ulaw', SILENCE.PCMU);
      if (this.listenerCount('audio') > 0) this.emit('audio', Buffer.alloc(FRAME_BYTES));
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.setSending(false);
    this.socket.close();
  }
}
