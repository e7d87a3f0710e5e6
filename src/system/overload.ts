/**
 * Whether this instance is too busy to start another conversation. Live calls and sessions need the
 * event loop every 20 ms and the database for their progress and their end; an instance past what its
 * cores carry that still took new calls would starve all of them (the `calls` benchmark at 500
 * streams on two cores: event-loop delay p99 over 300 ms, then every database connection taken and
 * waited for, dial jobs and hang-ups failing). So new conversations are refused (503 and
 * `Retry-After`, the request did nothing; a batch's next round waits) while either signal holds:
 * - the event loop's delay p99 over a sampling window above `loopDelayMs`, for two windows running
 *   (one slow garbage collection or a burst does not count);
 * - at least `dbWaiting` queries waiting for a connection of the pool, now.
 * Hand-written: the one library for this (under-pressure) is a Fastify plugin.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import type { Logger } from 'pino';

export interface OverloadOptions {
  /** Event-loop delay p99 (ms) over one window above which the instance is busy; 0: not watched. */
  loopDelayMs: number;
  /** Queries waiting for a database connection at or above which the instance is busy; 0: not watched. */
  dbWaiting: number;
  /** The sampling window (ms). */
  sampleMs: number;
}

export class OverloadGuard {
  private histogram: IntervalHistogram | null = null;
  private timer: NodeJS.Timeout | null = null;
  private slowWindows = 0;
  private lastReason: string | null = null;

  constructor(
    private readonly opts: OverloadOptions,
    /** Queries waiting for a pool connection now. */
    private readonly dbWaitingNow: () => number,
    private readonly log: Logger,
  ) {}

  start(): void {
    if (this.opts.loopDelayMs <= 0 || this.timer) return;
    this.histogram = monitorEventLoopDelay({ resolution: 10 });
    this.histogram.enable();
    this.timer = setInterval(() => this.sample(), this.opts.sampleMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.histogram?.disable();
    this.timer = null;
    this.histogram = null;
  }

  private sample(): void {
    const h = this.histogram!;
    const p99Ms = h.count > 0 ? h.percentile(99) / 1e6 : 0;
    h.reset();
    this.slowWindows = p99Ms > this.opts.loopDelayMs ? this.slowWindows + 1 : 0;
    this.note(p99Ms);
  }

  /** Why the instance takes no new conversation now, or null when it does. */
  reason(): string | null {
    if (this.opts.dbWaiting > 0) {
      const waiting = this.dbWaitingNow();
      if (waiting >= this.opts.dbWaiting) return `${waiting} database queries are waiting for a connection`;
    }
    if (this.slowWindows >= 2) return `the event loop is delayed over ${this.opts.loopDelayMs} ms`;
    return null;
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
