/**
 * A phone call in two channels as each side heard it, kept as the carrier carried it: G.711 mu-law,
 * one byte a sample, interleaved (left, right), so the recording takes half the bytes of PCM16 and
 * costs no transcoding while the call runs (it is decoded to PCM16 when served). The person's audio
 * (left) is the clock: it arrives continuously in real time (a carrier sends a frame every 20 ms,
 * silence included), and each sample of it is one sample of the recording. The agent's audio (right)
 * arrives in bursts, faster than it plays; like the far end's playback buffer, it queues and plays out
 * one sample per person sample from the moment it arrives, and an interruption (the caller barging in:
 * the bridge clears the carrier's buffer) drops what is queued and not yet played. So the right channel
 * holds exactly what the person could have heard, cut where they spoke over the agent.
 */
import { MULAW_SILENCE } from '../audio/pcm16.js';
import { RedactionGate, type AudioSink } from './redaction-gate.js';

/** Agent audio queued beyond this (seconds) cannot be heard in time (no person audio is coming): the oldest is dropped. */
const MAX_QUEUED_S = 120;

export class TwoChannelRecorder {
  private queue: Buffer[] = [];
  private queued = 0;
  /** Sample frames written so far. */
  private written = 0;
  private readonly maxQueued: number;
  /** Where redaction silences spans (null: the recording is not redacted). */
  readonly gate: RedactionGate | null;

  constructor(
    private readonly writer: AudioSink,
    sampleRate: number,
  ) {
    this.maxQueued = MAX_QUEUED_S * sampleRate;
    this.gate = writer instanceof RedactionGate ? writer : null;
  }

  /** Where the person's audio received so far ends, in sample frames. */
  personMark(): number {
    return this.written;
  }

  /** Where agent audio handed over now would start playing (and what was handed over ends). */
  agentMark(): number {
    return this.written + this.queued;
  }

  /** Person audio, mu-law mono at the recording's rate: written with the agent audio that played meanwhile. */
  person(ulaw: Buffer): void {
    const samples = ulaw.length;
    if (samples === 0) return;
    const agent = this.take(samples);
    this.written += samples;
    const out = Buffer.allocUnsafe(samples * 2);
    for (let i = 0; i < samples; i++) {
      out[i * 2] = ulaw[i];
      out[i * 2 + 1] = i < agent.length ? agent[i] : MULAW_SILENCE;
    }
    this.writer.append(out);
  }

  /** Agent audio, mu-law mono at the recording's rate, as sent to be played. */
  agent(ulaw: Buffer): void {
    if (ulaw.length === 0) return;
    this.queue.push(ulaw);
    this.queued += ulaw.length;
    while (this.queued > this.maxQueued) {
      const dropped = this.queue.shift()!;
      this.queued -= dropped.length;
    }
  }

  /** The agent was cut off: what has not played yet never will. */
  interrupted(): void {
    this.queue = [];
    this.queued = 0;
  }

  /** Up to `bytes` of queued agent audio (fewer when less is queued: silence follows). */
  private take(bytes: number): Buffer {
    if (this.queued === 0) return EMPTY;
    const parts: Buffer[] = [];
    let want = bytes;
    while (want > 0 && this.queue.length) {
      const head = this.queue[0];
      if (head.length <= want) {
        parts.push(head);
        want -= head.length;
        this.queue.shift();
      } else {
        parts.push(head.subarray(0, want));
        this.queue[0] = head.subarray(want);
        want = 0;
      }
    }
    const got = bytes - want;
    this.queued -= got;
    return parts.length === 1 ? parts[0] : Buffer.concat(parts, got);
  }

  close(): Promise<void> {
    this.interrupted();
    return this.writer.close();
  }
}

const EMPTY = Buffer.alloc(0);
