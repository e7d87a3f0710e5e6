/**
 * Writes one recording as it is made: audio is appended in memory and written as one chunk every
 * flush interval (so a crash loses at most that much, and memory holds at most about that much plus
 * writes in flight), in order, one write at a time. Past the size cap nothing more is kept and the
 * recording is marked truncated. A failed write is logged and the audio of that chunk lost; the call
 * goes on.
 */
import type { Logger } from 'pino';
import type { RecordingStorage } from './storage.js';
import type { RecordingRow, RecordingStore } from './store.js';
import type { Clock } from '../lib/clock.js';

export interface WriterOptions {
  flushMs: number;
  maxBytes: number;
}

export class RecordingWriter {
  private parts: Buffer[] = [];
  private partBytes = 0;
  /** Bytes handed to storage (written or in flight). */
  private written = 0;
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
    this.timer = setInterval(() => this.flush(), opts.flushMs);
    this.timer.unref();
  }

  /** Bytes accepted so far (written or waiting). */
  get size(): number {
    return this.written + this.partBytes;
  }

  append(pcm: Buffer): void {
    if (this.closed || this.truncated || pcm.length === 0) return;
    const room = this.opts.maxBytes - this.size;
    if (pcm.length > room) {
      // Whole sample frames only (4 bytes: two channels of PCM16).
      const keep = room - (room % 4);
      if (keep > 0) this.push(pcm.subarray(0, keep));
      this.truncated = true;
      this.log.info({ maxBytes: this.opts.maxBytes }, 'recording reached its size cap; the rest is not recorded');
      return;
    }
    this.push(pcm);
  }

  private push(pcm: Buffer): void {
    this.parts.push(Buffer.from(pcm));
    this.partBytes += pcm.length;
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
    const offset = this.written;
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
      await this.store.appendChunk(rec.id, { seq, offset, size: data.length, data: inline }, truncated);
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
