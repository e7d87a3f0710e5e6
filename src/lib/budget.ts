/**
 * How much of something one stream may pass on: `perSecond` on average plus a `burst` taken at once
 * (caller audio in milliseconds, keys a person presses, typed messages, images). A token bucket
 * refilled by `now`: what does not fit is the caller's to drop. Hand-written (a few lines): the
 * limiters we have (rate-limiter-flexible) count requests per key in a store, not a per-stream
 * quantity refilled continuously. `fits` answers without taking, so a frame can be judged from its
 * raw bytes and taken from the budget only once it has been read.
 */
export interface BudgetFigures {
  /** Refill, units a second. */
  perSecond: number;
  /** Capacity: what may be taken at once after a pause, units. */
  burst: number;
}

/** Milliseconds on a clock that only moves forward (tests give their own, to count without waiting). */
export type BudgetClock = () => number;

export const monotonicClock: BudgetClock = () => performance.now();

export class Budget {
  private available: number;
  private last: number;

  constructor(
    private readonly figures: BudgetFigures,
    private readonly now: BudgetClock = monotonicClock,
  ) {
    this.available = figures.burst;
    this.last = now();
  }

  /** Whether `amount` would be taken now (nothing is taken). */
  fits(amount: number): boolean {
    const t = this.now();
    this.available = Math.min(this.figures.burst, this.available + (Math.max(0, t - this.last) * this.figures.perSecond) / 1000);
    this.last = t;
    return amount <= this.available;
  }

  /** Takes `amount`; false (and nothing taken) when it does not fit. */
  take(amount: number): boolean {
    if (!this.fits(amount)) return false;
    this.available -= amount;
    return true;
  }
}
