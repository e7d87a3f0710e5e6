/**
 * Writes one recording as it is made: audio is appended in memory and written as one chunk every
 * flush interval (so a crash loses at most that much, and memory holds at most about that much plus
 * writes in flight), in order, one write at a time. Past the size cap nothing more is kept and the
 * recording is marked truncated. A failed write is logged and the audio of that chunk lost; the call
 * goes on. It is handed audio as stored (`encoding`: PCM16, or mu-law at one byte a sample); sizes,
 * offsets and the cap count the served PCM16's bytes.
 */
import type { Logger } from 'pino';
import type { RecordingStorage } from './storage.js';
import type { RecordingEncoding, RecordingRow, RecordingStore } from './store.js';
import type { Clock } from '../lib/clock.js';

export interface WriterOptions {
  flushMs: number;
  /** The cap, in the served PCM16's bytes. */
  maxBytes: number;
  encoding: RecordingEncoding;
  channels: number;
}

/** Bytes of the served PCM16 per stored byte. */
const SCALE: Record<RecordingEncoding, number> = { pcm16: 1, mulaw: 2 };

export class RecordingWriter {
  private parts: Buffer[] = [];
  /** Stored bytes waiting for the next flush. */
  private partBytes = 0;
  /** Stored bytes handed to storage (written or in flight). */
  private written = 0;
  private readonly scale: number;
  /** The cap in stored bytes, whole sample frames. */
  private readonly maxStored: number;
  private seq = 0;
  private truncated = false;
  private closed = false;
  private failed = false;
  private truncationMarked = false;
  private chain: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;
  /** Called at the start of every flush: a recorder on a clock appends what has become final (clocked.ts). */
  beforeFlush: (() => void) | null = null;

  constructor(
    private readonly recording: Promise<RecordingRow | null>,
    private readonly store: RecordingStore,
    private readonly storage: RecordingStorage,
    private readonly clock: Clock,
    private readonly opts: WriterOptions,
    private readonly log: Logger,
  ) {
    this.scale = SCALE[opts.encoding];
    // Stored bytes of one sample frame (every channel's sample).
    const frameBytes = (opts.channels * 2) / this.scale;
    const cap = Math.floor(opts.maxBytes / this.scale);
    this.maxStored = cap - (cap % frameBytes);
    this.timer = setInterval(() => this.flush(), opts.flushMs);
    this.timer.unref();
  }

  /** Bytes of the served PCM16 accepted so far (written or waiting). */
  get size(): number {
    return (this.written + this.partBytes) * this.scale;
  }

  /** Audio in the recording's encoding, whole sample frames; the writer keeps `audio` (callers hand over a buffer they do not reuse). */
  append(audio: Buffer): void {
    if (this.closed || this.truncated || audio.length === 0) return;
    const room = this.maxStored - (this.written + this.partBytes);
    if (audio.length > room) {
      if (room > 0) this.push(audio.subarray(0, room));
      this.truncated = true;
      this.log.info({ maxBytes: this.opts.maxBytes }, 'recording reached its size cap; the rest is not recorded');
      return;
    }
    this.push(audio);
  }

  private push(audio: Buffer): void {
    this.parts.push(audio);
    this.partBytes += audio.length;
  }

  /** Hands what is buffered to storage as the next chunk. */
  flush(): void {
    if (!this.closed) this.beforeFlush?.();
    if (this.partBytes === 0) {
      if (this.truncated && !this.truncationMarked) {
        this.truncationMarked = true;
        this.chain = this.chain.then(() => this.markTruncated()).catch(() => undefined);
      }
      return;
    }
    const data = Buffer.concat(this.parts, this.partBytes);
    this.parts = [];
    this.partBytes = 0;
    const seq = this.seq++;
    const offset = this.written * this.scale;
    this.written += data.length;
    const truncated = this.truncated;
    if (truncated) this.truncationMarked = true;
    this.chain = this.chain.then(() => this.write(seq, offset, data, truncated));
  }

  private async write(seq: number, offset: number, data: Buffer, truncated: boolean): Promise<void> {
    const rec = await this.recording;
    if (!rec || this.failed) return;
    try {
      const inline = await this.storage.put({ workspaceId: rec.workspace_id, recordingId: rec.id, seq }, data);
      await this.store.appendChunk(rec.id, { seq, offset, size: data.length * this.scale, data: inline }, truncated);
    } catch (err) {
      // The index must stay a prefix: nothing after a lost chunk is written.
      this.log.warn({ err: (err as Error).message, seq }, 'a recording chunk could not be written; the recording ends here');
      this.failed = true;
      this.closed = true;
    }
  }

  private async markTruncated(): Promise<void> {
    const rec = await this.recording;
    if (rec) await this.store.markTruncated(rec.id);
  }

  /** Writes the rest and completes the recording. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    if (!this.closed) this.flush();
    this.closed = true;
    await this.chain.catch(() => undefined);
    const rec = await this.recording;
    if (rec)
      await this.store.complete(rec.id, this.clock.now()).catch((err) => this.log.warn({ err: (err as Error).message }, 'recording could not be completed'));
  }
}
