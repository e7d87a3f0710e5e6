/**
 * How much audio one stream may pass on: real time (times `rate`) plus a small burst. A caller's
 * audio goes to transcoding and the voice service; a peer sending faster than it could speak (a
 * flood of large frames) would otherwise push minutes of audio a second into both. A token bucket
 * of audio milliseconds, refilled by the wall clock: frames beyond the budget are dropped whole and
 * counted. Hand-written (a few lines): the limiters we have (rate-limiter-flexible) count requests
 * per key in a store, not a per-stream quantity refilled continuously.
 */
export interface AudioBudgetOptions {
  /** Audio milliseconds allowed per wall-clock millisecond (1 = real time). */
  rate: number;
  /**
   * How far ahead of real time audio may arrive (network jitter, a stalled event loop catching up),
   * in wall-clock ms: the bucket holds `burstMs * rate` ms of audio.
   */
  burstMs: number;
}

export class AudioBudget {
  private readonly capacity: number;
  private available: number;
  private last: number;
  /** Audio dropped so far, ms. */
  droppedMs = 0;

  constructor(
    private readonly opts: AudioBudgetOptions,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.capacity = opts.burstMs * opts.rate;
    this.available = this.capacity;
    this.last = now();
  }

  /** Takes `ms` of audio from the budget; false (and counted as dropped) when it does not fit. */
  take(ms: number): boolean {
    const t = this.now();
    this.available = Math.min(this.capacity, this.available + (t - this.last) * this.opts.rate);
    this.last = t;
    if (ms <= this.available) {
      this.available -= ms;
      return true;
    }
    this.droppedMs += ms;
    return false;
  }
}
