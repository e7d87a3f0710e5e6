/**
 * Whether this instance is too busy to start another conversation. Live calls and sessions need the
 * event loop every 20 ms and the database for their progress and their end; an instance past what its
 * cores carry that still took new calls would starve all of them (the `calls` benchmark at 500
 * streams on two cores: event-loop delay p99 over 300 ms, then every database connection taken and
 * waited for, dial jobs and hang-ups failing). So new conversations are refused (503 and
 * `Retry-After`, the request did nothing; a batch's next round waits) while either signal holds for
 * two sampling windows running (a burst of requests, one slow garbage collection does not count),
 * and until two windows running are at ease (one calm moment inside a busy spell does not reopen it):
 * - the event loop's delay p99 over the window above `loopDelayMs`;
 * - at least `dbWaiting` queries waiting for a connection of the pool all through the window (its
 *   fewest, sampled five times a window).
 * Hand-written: the one library for this (under-pressure) is a Fastify plugin.
 */
import { monitorEventLoopDelay, type ELDHistogram } from 'node:perf_hooks';
import type { Logger } from 'pino';

export interface OverloadOptions {
  /** Event-loop delay p99 (ms) over one window above which the window is slow; 0: not watched. */
  loopDelayMs: number;
  /** Queries waiting for a database connection all through a window for it to be starved; 0: not watched. */
  dbWaiting: number;
  /** The sampling window (ms). */
  sampleMs: number;
}

const DB_SAMPLES_PER_WINDOW = 5;

export class OverloadGuard {
  private histogram: ELDHistogram | null = null;
  private timers: NodeJS.Timeout[] = [];
  private slowWindows = 0;
  private starvedWindows = 0;
  /** Windows running in which neither signal held. */
  private easyWindows = 0;
  private busy: string | null = null;
  private fewestWaiting = Infinity;
  private lastReason: string | null = null;

  constructor(
    private readonly opts: OverloadOptions,
    /** Queries waiting for a pool connection now. */
    private readonly dbWaitingNow: () => number,
    private readonly log: Logger,
  ) {}

  start(): void {
    if (this.timers.length > 0 || (this.opts.loopDelayMs <= 0 && this.opts.dbWaiting <= 0)) return;
    if (this.opts.loopDelayMs > 0) {
      this.histogram = monitorEventLoopDelay({ resolution: 10 });
      this.histogram.enable();
    }
    if (this.opts.dbWaiting > 0) {
      const probe = setInterval(
        () => (this.fewestWaiting = Math.min(this.fewestWaiting, this.dbWaitingNow())),
        Math.max(10, this.opts.sampleMs / DB_SAMPLES_PER_WINDOW),
      );
      this.timers.push(probe);
    }
    this.timers.push(setInterval(() => this.endWindow(), this.opts.sampleMs));
    for (const t of this.timers) t.unref();
  }

  stop(): void {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.histogram?.disable();
    this.histogram = null;
  }

  private endWindow(): void {
    let p99Ms = 0;
    let slow = false;
    let starved = false;
    if (this.histogram) {
      p99Ms = this.histogram.count > 0 ? this.histogram.percentile(99) / 1e6 : 0;
      this.histogram.reset();
      slow = p99Ms > this.opts.loopDelayMs;
      this.slowWindows = slow ? this.slowWindows + 1 : 0;
    }
    if (this.opts.dbWaiting > 0) {
      const fewest = Math.min(this.fewestWaiting, this.dbWaitingNow());
      starved = fewest >= this.opts.dbWaiting;
      this.starvedWindows = starved ? this.starvedWindows + 1 : 0;
      this.fewestWaiting = Infinity;
    }
    this.easyWindows = slow || starved ? 0 : this.easyWindows + 1;
    const now =
      this.slowWindows >= 2
        ? `the event loop is delayed over ${this.opts.loopDelayMs} ms`
        : this.starvedWindows >= 2
          ? `${this.opts.dbWaiting} or more database queries keep waiting for a connection`
          : null;
    if (now) this.busy = now;
    else if (this.easyWindows >= 2) this.busy = null;
    this.note(p99Ms);
  }

  /** Why the instance takes no new conversation now, or null when it does. */
  reason(): string | null {
    return this.busy;
  }

  /** Logs each change between busy and not (once, not per refused request). */
  private note(p99Ms: number): void {
    const reason = this.reason();
    if ((reason === null) === (this.lastReason === null)) return;
    if (reason) this.log.warn({ reason, loopDelayP99Ms: Math.round(p99Ms) }, 'overloaded: new calls and sessions are refused until it passes');
    else this.log.info({ loopDelayP99Ms: Math.round(p99Ms) }, 'no longer overloaded: new calls and sessions are taken again');
    this.lastReason = reason;
  }
}
