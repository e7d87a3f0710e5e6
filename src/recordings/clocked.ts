/**
 * A conversation in two channels on the wall clock, for a transport whose person audio is no clock: a
 * browser sends its microphone in bursts (20-100 ms chunks, late or early by the network's jitter) and
 * nothing at all while muted. Each side's audio is placed on one timeline, in samples since the
 * recording started, by the `Clock` it is given (the service's; tests move their own):
 * - person audio (left) goes where it arrived, or straight after the person's previous audio when it
 *   arrives within `LATE_MS` of that audio's end (a stream jittering around real time stays gapless);
 *   audio sent ahead of real time queues after what came before, as the agent heard it;
 * - agent audio (right) plays out from its arrival like the browser's playback queue: after what is
 *   still playing, one sample per sample of wall time, and an interruption (the user barging in: the
 *   session's `interrupted`, on which the client drops its queue) drops what has not played by then.
 * What lies more than `LATE_MS` in the past is final: `advance()` (run before each of the writer's
 * flushes) writes it, silence wherever a channel had nothing, so both channels stay on wall time.
 * `close()` writes up to the end (and person audio that arrived ahead of it): agent audio that had not
 * played by then was never heard.
 */
import type { Clock } from '../lib/clock.js';
import { RedactionGate, type AudioSink } from './redaction-gate.js';

/** Person audio arriving up to this late joins the audio before it; also how long a moment stays open to late audio. */
export const LATE_MS = 250;
/** Agent audio queued beyond this (seconds) ahead of the clock cannot be heard in time: it is not kept. */
const MAX_AHEAD_S = 120;

interface Segment {
  at: number;
  samples: Int16Array;
}

/** One channel: segments at increasing, non-overlapping sample positions. */
class Track {
  private segments: Segment[] = [];
  /** Where the last segment ends; -Infinity before any. */
  end = Number.NEGATIVE_INFINITY;

  add(at: number, pcm: Buffer): void {
    const samples = new Int16Array(pcm.length >> 1);
    for (let i = 0; i < samples.length; i++) samples[i] = pcm.readInt16LE(i * 2);
    if (!samples.length) return;
    this.segments.push({ at, samples });
    this.end = at + samples.length;
  }

  /** Drops everything from sample `at` on. */
  cut(at: number): void {
    const kept: Segment[] = [];
    for (const s of this.segments) {
      if (s.at >= at) continue;
      kept.push(s.at + s.samples.length > at ? { at: s.at, samples: s.samples.subarray(0, at - s.at) } : s);
    }
    this.segments = kept;
    const last = kept.at(-1);
    this.end = last ? Math.min(this.end, last.at + last.samples.length) : Math.min(this.end, at);
  }

  /** Writes samples [from, to) into every other Int16 of `out` from `offset` (its channel), and forgets them. */
  take(from: number, to: number, out: Int16Array, offset: number): void {
    while (this.segments.length) {
      const s = this.segments[0];
      const a = Math.max(from, s.at);
      const b = Math.min(to, s.at + s.samples.length);
      for (let i = a; i < b; i++) out[(i - from) * 2 + offset] = s.samples[i - s.at];
      if (s.at + s.samples.length > to) {
        if (s.at < to) this.segments[0] = { at: to, samples: s.samples.subarray(to - s.at) };
        return;
      }
      this.segments.shift();
    }
  }
}

export class ClockedTwoChannelRecorder {
  private readonly startedMs: number;
  private readonly person = new Track();
  private readonly agentTrack = new Track();
  /** Samples written so far (both channels). */
  private written = 0;
  private closed = false;
  private readonly late: number;
  private readonly maxAhead: number;
  /** Where redaction silences spans (null: the recording is not redacted). */
  readonly gate: RedactionGate | null;

  constructor(
    private readonly writer: AudioSink,
    private readonly sampleRate: number,
    private readonly clock: Clock,
  ) {
    this.gate = writer instanceof RedactionGate ? writer : null;
    this.startedMs = clock.now().getTime();
    this.late = Math.round((LATE_MS * sampleRate) / 1000);
    this.maxAhead = MAX_AHEAD_S * sampleRate;
    writer.beforeFlush = () => this.advance();
  }

  /** The clock's moment, in samples since the recording started. */
  private now(): number {
    return Math.max(0, Math.floor(((this.clock.now().getTime() - this.startedMs) * this.sampleRate) / 1000));
  }

  /** Where the person's audio received so far ends, in samples since the recording started. */
  personMark(): number {
    return Math.max(this.now(), this.person.end, this.written);
  }

  /** Where agent audio handed over now would start playing (and what was handed over ends). */
  agentMark(): number {
    return Math.max(this.now(), this.agentTrack.end, this.written);
  }

  /** Person audio, PCM16 mono at the recording's rate, as it arrives. */
  personAudio(pcm: Buffer): void {
    if (this.closed || pcm.length < 2) return;
    const now = this.now();
    const at = now <= this.person.end + this.late ? this.person.end : now;
    this.person.add(Math.max(at, this.written), pcm);
  }

  /** Agent audio, PCM16 mono at the recording's rate, as sent to be played. */
  agentAudio(pcm: Buffer): void {
    if (this.closed || pcm.length < 2) return;
    const now = this.now();
    const at = Math.max(now, this.agentTrack.end, this.written);
    if (at - now > this.maxAhead) return;
    this.agentTrack.add(at, pcm);
  }

  /** The agent was cut off now: what has not played yet never will. */
  interrupted(): void {
    if (!this.closed) this.agentTrack.cut(Math.max(this.now(), this.written));
  }

  /** Writes what can no longer change: up to `LATE_MS` ago. */
  advance(): void {
    if (!this.closed) this.writeTo(this.now() - this.late);
  }

  private writeTo(to: number): void {
    if (to <= this.written) return;
    const frames = to - this.written;
    const out = Buffer.alloc(frames * 4);
    const view = new Int16Array(out.buffer, out.byteOffset, frames * 2);
    this.person.take(this.written, to, view, 0);
    this.agentTrack.take(this.written, to, view, 1);
    this.written = to;
    this.writer.append(out);
  }

  /** Writes the rest (to now, and person audio queued beyond it) and completes the recording. */
  async close(): Promise<void> {
    if (this.closed) return;
    const now = this.now();
    this.agentTrack.cut(Math.max(now, this.written));
    this.writeTo(Math.max(now, this.person.end));
    this.closed = true;
    await this.writer.close();
  }
}
