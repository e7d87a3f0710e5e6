/**
 * Simulated time of the sandbox carriers. Every duration in the simulation is in simulated
 * milliseconds; `speed` divides them into wall time. Media runs on one shared 20 ms frame clock: each
 * live call subscribes and gets one callback per simulated frame.
 *
 * A late tick delivers at most a few periods' worth of frames and skips the rest of the delay: while the
 * event loop stalled the service could not send audio either, and catching up in one burst would play
 * a long run of empty frames, which the callee would take for the agent falling silent.
 */

export const FRAME_MS = 20;
/** Periods' worth of frames one tick may deliver. */
const MAX_BURST_PERIODS = 3;

export class Clock {
  private subscribers = new Set<() => void>();
  private timer: NodeJS.Timeout | null = null;
  private origin = 0;
  private delivered = 0;
  private maxBurst = MAX_BURST_PERIODS;

  constructor(readonly speed: number) {
    if (!(speed > 0)) throw new RangeError('speed must be > 0');
  }

  /** Wall milliseconds of `simMs`. */
  real(simMs: number): number {
    return simMs / this.speed;
  }

  /** Resolves true after `simMs`, or false as soon as `signal` aborts. */
  sleep(simMs: number, signal?: AbortSignal): Promise<boolean> {
    if (signal?.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(t);
        signal?.removeEventListener('abort', onAbort);
        resolve(ok);
      };
      const onAbort = () => done(false);
      const t = setTimeout(() => done(true), Math.max(0, this.real(simMs)));
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Calls `fn` once per simulated 20 ms frame until the returned function is called. */
  onFrame(fn: () => void): () => void {
    this.subscribers.add(fn);
    if (!this.timer) this.startTicker();
    return () => {
      this.subscribers.delete(fn);
      if (this.subscribers.size === 0) this.stopTicker();
    };
  }

  stop(): void {
    this.subscribers.clear();
    this.stopTicker();
  }

  private startTicker(): void {
    this.origin = performance.now();
    this.delivered = 0;
    const period = Math.max(2, Math.min(FRAME_MS, this.real(FRAME_MS)));
    this.maxBurst = Math.max(MAX_BURST_PERIODS, Math.ceil((MAX_BURST_PERIODS * period * this.speed) / FRAME_MS));
    this.timer = setInterval(() => this.tick(), period);
  }

  private stopTicker(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private tick(): void {
    const due = Math.floor(((performance.now() - this.origin) * this.speed) / FRAME_MS);
    let n = due - this.delivered;
    if (n > this.maxBurst) {
      this.delivered = due - this.maxBurst;
      n = this.maxBurst;
    }
    for (; n > 0; n--) {
      this.delivered++;
      for (const fn of [...this.subscribers]) {
        try {
          fn();
        } catch {
          // A failing call must not stop the frames of the others; the call logs its own errors.
        }
      }
    }
  }
}
