/**
 * Silence where a conversation's redaction setting says so, before a recording is written. Audio of a
 * two-channel recording (person left, agent right) is held here, in sample frames counted from the
 * recording's start, until what was said in it is known: the person's channel up to the end of their
 * last utterance whose transcript is final, the agent's channel up to the start of the utterance still
 * playing. The conversation decides each span (`person`, `agentStarts`/`agentEnds`): a span to redact
 * becomes silence in its channel; then the frames before every open span go to the writer. Audio held
 * longer than `holdFrames` in an open span is let go as silence (what was said there is not known yet,
 * so it is not written), and so is what is still open when the recording ends. A span may end ahead
 * of the audio received (agent audio queued to play).
 */
import { MULAW_SILENCE } from '../audio/pcm16.js';
import type { RecordingEncoding } from './store.js';
import type { RecordingWriter } from './writer.js';

/** What a recorder writes to: a writer, or a gate in front of one. */
export type AudioSink = Pick<RecordingWriter, 'append' | 'close' | 'beforeFlush'>;

type Channel = 0 | 1;

interface Range {
  channel: Channel;
  from: number;
  to: number;
}

export class RedactionGate implements AudioSink {
  private held: Buffer[] = [];
  /** Frame position of the first held frame. */
  private heldFrom = 0;
  /** Frames received so far. */
  private position = 0;
  /** Where the person's undecided span starts. */
  private personFrom = 0;
  /** Where the playing agent utterance's span starts; null when none is playing. */
  private agentFrom: number | null = null;
  private silenced: Range[] = [];
  private readonly frameBytes: number;
  private readonly sampleBytes: number;
  private readonly silence: number;
  beforeFlush: (() => void) | null = null;

  constructor(
    private readonly writer: RecordingWriter,
    encoding: RecordingEncoding,
    private readonly holdFrames: number,
  ) {
    this.sampleBytes = encoding === 'mulaw' ? 1 : 2;
    this.frameBytes = this.sampleBytes * 2;
    this.silence = encoding === 'mulaw' ? MULAW_SILENCE : 0;
    writer.beforeFlush = () => {
      this.beforeFlush?.();
      this.release(false);
    };
  }

  /** Frames received so far: where person audio received now ends (a recorder on the person's clock). */
  get frames(): number {
    return this.position;
  }

  append(audio: Buffer): void {
    if (audio.length === 0) return;
    this.held.push(audio);
    this.position += audio.length / this.frameBytes;
  }

  /** The person's utterance ended at frame `at` (its transcript is final); `redact`: it is silence from the span's start. */
  person(at: number, redact: boolean): void {
    const to = Math.max(at, this.personFrom);
    if (redact) this.silenced.push({ channel: 0, from: this.personFrom, to });
    this.personFrom = to;
  }

  /** An agent utterance starts playing at frame `at` (no effect while one is open). */
  agentStarts(at: number): void {
    this.agentFrom ??= Math.max(at, this.heldFrom);
  }

  /** The agent utterance playing ends at frame `at`; `redact`: it is silence from where it started. */
  agentEnds(at: number, redact: boolean): void {
    if (this.agentFrom === null) return;
    if (redact) this.silenced.push({ channel: 1, from: this.agentFrom, to: Math.max(at, this.agentFrom) });
    this.agentFrom = null;
  }

  /** The agent was cut off at frame `at`: nothing of it plays beyond, so no silence reaches past it. */
  agentCut(at: number): void {
    for (const r of this.silenced) if (r.channel === 1 && r.to > at) r.to = Math.max(r.from, at);
  }

  /** Hands the writer every frame no open span holds (all of them at the end). */
  private release(all: boolean): void {
    let to = all ? this.position : Math.min(this.position, this.personFrom, this.agentFrom ?? Infinity);
    const forced = this.position - this.holdFrames;
    if (!all && forced > to) {
      // Held too long: the open spans let go of their oldest audio, as silence.
      if (this.personFrom < forced) {
        this.silenced.push({ channel: 0, from: this.personFrom, to: forced });
        this.personFrom = forced;
      }
      if (this.agentFrom !== null && this.agentFrom < forced) {
        this.silenced.push({ channel: 1, from: this.agentFrom, to: forced });
        this.agentFrom = forced;
      }
      to = forced;
    }
    if (all) {
      // The end: what is still undecided (the person's words after their last final transcript) is not known, so not written.
      this.silenced.push({ channel: 0, from: this.personFrom, to: this.position });
      if (this.agentFrom !== null) this.silenced.push({ channel: 1, from: this.agentFrom, to: this.position });
    }

    if (to <= this.heldFrom) return;
    const audio = Buffer.concat(this.held);
    const cut = (to - this.heldFrom) * this.frameBytes;
    const out = Buffer.from(audio.subarray(0, cut));
    this.held = cut < audio.length ? [audio.subarray(cut)] : [];
    for (const r of this.silenced) {
      const a = Math.max(r.from, this.heldFrom);
      const b = Math.min(r.to, to);
      for (let f = a; f < b; f++)
        out.fill(
          this.silence,
          (f - this.heldFrom) * this.frameBytes + r.channel * this.sampleBytes,
          (f - this.heldFrom) * this.frameBytes + (r.channel + 1) * this.sampleBytes,
        );
    }
    this.heldFrom = to;
    this.silenced = this.silenced.filter((r) => r.to > to);
    this.writer.append(out);
  }

  /** Writes the rest and completes the recording. */
  close(): Promise<void> {
    this.release(true);
    return this.writer.close();
  }
}
