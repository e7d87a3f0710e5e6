/**
 * How much audio one stream may pass on: real time (times `rate`) plus a small burst. A caller's
 * audio goes to transcoding and the voice service; a peer sending faster than it could speak (a
 * flood of large frames) would otherwise push minutes of audio a second into both. A Budget
 * (src/lib/budget.ts) of audio milliseconds: frames beyond it are dropped whole and counted.
 */
import { Budget, type BudgetClock } from '../lib/budget.js';

export interface AudioBudgetOptions {
  /** Audio milliseconds allowed per wall-clock millisecond (1 = real time). */
  rate: number;
  /**
   * How far ahead of real time audio may arrive (network jitter, a stalled event loop catching up),
   * in wall-clock ms: the bucket holds `burstMs * rate` ms of audio.
   */
  burstMs: number;
}

/** A stream's budget of audio, in milliseconds of audio. */
export function audioBudget(opts: AudioBudgetOptions, now?: BudgetClock): Budget {
  return new Budget({ perSecond: opts.rate * 1000, burst: opts.burstMs * opts.rate }, now);
}
