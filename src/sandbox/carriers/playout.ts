/**
 * The carrier's playback of agent audio on one media stream: audio and marks queue in arrival order,
 * one 20 ms frame plays per frame tick, a mark is echoed once everything queued before it has played
 * (at once when nothing is), and `clear` drops the queue and echoes every pending mark.
 */
import { FRAME_BYTES } from './audio.js';

type Item = Buffer | { mark: string };

export class Playout {
  private queue: Item[] = [];
  private queuedBytes = 0;

  constructor(private readonly echo: (mark: string) => void) {}

  get pendingAudio(): boolean {
    return this.queuedBytes > 0;
  }

  push(audio: Buffer): void {
    if (audio.length === 0) return;
    this.queue.push(audio);
    this.queuedBytes += audio.length;
  }

  mark(name: string): void {
    if (this.queuedBytes === 0) this.echo(name);
    else this.queue.push({ mark: name });
  }

  clear(): void {
    const pending = this.queue;
    this.queue = [];
    this.queuedBytes = 0;
    for (const item of pending) if (!Buffer.isBuffer(item)) this.echo(item.mark);
  }

  /**
   * Plays up to one frame and returns the audio played (empty when nothing was queued). Marks whose
   * audio finished in the previous frame are echoed first; a frame stops early at a mark.
   */
  step(): Buffer {
    this.echoHeadMarks();
    const parts: Buffer[] = [];
    let want = FRAME_BYTES;
    while (want > 0 && this.queue.length && Buffer.isBuffer(this.queue[0])) {
      const head = this.queue[0];
      const take = head.subarray(0, want);
      parts.push(take);
      want -= take.length;
      this.queuedBytes -= take.length;
      if (take.length === head.length) this.queue.shift();
      else this.queue[0] = head.subarray(take.length);
    }
    return parts.length === 1 ? parts[0] : Buffer.concat(parts);
  }

  private echoHeadMarks(): void {
    while (this.queue.length && !Buffer.isBuffer(this.queue[0])) this.echo((this.queue.shift() as { mark: string }).mark);
  }
}
