/**
 * Simulated time of the sandbox carriers. Every duration in the simulation is in simulated
 * milliseconds; `speed` divides them into wall time. Media runs on one shared 20 ms frame clock: each
 * live call subscribes and gets one callback per simulated frame. The SIP far end's RTP is paced by
 * the same frames (`rtpPacer()`), so a callee's speech is queued and sent in step: paced by a clock of
 * its own, with another catch-up rule after a stall, RTP ran dry in the middle of an utterance and sent
 * silence there, which cut the spoken text.
 *
 * A late tick delivers at most a few periods' worth of frames and skips the rest of the delay: while the
 * event loop stalled the service could not send audio either, and catching up in one burst would play
 * a long run of empty frames, which the callee would take for the agent falling silent.
 */

import type { PacedStream, RtpPacer } from '../../sip/index.js';

export const FRAME_MS = 20;
/** Periods' worth of frames one tick may deliver. */
const MAX_BURST_PERIODS = 3;

export class Clock {
  private subscribers = new Set<() => void>();
  private skipListeners = new Set<(frames: number) => void>();
  private timer: NodeJS.Timeout | null = null;
  private origin = 0;
  private delivered = 0;
  private maxBurst = MAX_BURST_PERIODS;

  constructor(
    readonly speed: number,
    /** Wall time (ms); a test gives its own. */
    private readonly now: () => number = () => performance.now(),
  ) {
    if (!(speed > 0)) throw new RangeError('speed must be > 0');
  }

  /** Wall time now (ms). */
  time(): number {
    return this.now();
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

  /**
   * Calls `fn` once per simulated 20 ms frame until the returned function is called; `skipped` hears
   * how many frames a late tick skipped.
   */
  onFrame(fn: () => void, skipped?: (frames: number) => void): () => void {
    this.subscribers.add(fn);
    if (skipped) this.skipListeners.add(skipped);
    if (!this.timer) this.startTicker();
    return () => {
      this.subscribers.delete(fn);
      if (skipped) this.skipListeners.delete(skipped);
      if (this.subscribers.size === 0) this.stopTicker();
    };
  }

  /** An RTP pacer on these frames: each frame sends one packet of every stream added (sip.ts's far end). */
  rtpPacer(): RtpPacer {
    if (this.speed !== 1) throw new RangeError('RTP is real time: only a clock at speed 1 paces it');
    return new FramePacer(this);
  }

  stop(): void {
    this.subscribers.clear();
    this.stopTicker();
  }

  private startTicker(): void {
    this.origin = this.now();
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
    const due = Math.floor(((this.now() - this.origin) * this.speed) / FRAME_MS);
    let n = due - this.delivered;
    if (n > this.maxBurst) {
      this.delivered = due - this.maxBurst;
      for (const fn of [...this.skipListeners]) fn(n - this.maxBurst);
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

/** RTP streams ticked by a Clock's frames: subscribed while any stream is added. */
class FramePacer implements RtpPacer {
  private readonly streams = new Set<PacedStream>();
  private unsubscribe: (() => void) | null = null;
  lastTickAt = 0;

  constructor(private readonly clock: Clock) {}

  time(): number {
    return this.clock.time();
  }

  add(stream: PacedStream): void {
    this.streams.add(stream);
    this.unsubscribe ??= this.clock.onFrame(
      () => this.tick(),
      (frames) => {
        for (const s of this.streams) s.skipped(frames);
      },
    );
  }

  remove(stream: PacedStream): void {
    this.streams.delete(stream);
    if (this.streams.size === 0 && this.unsubscribe) {
      this.unsubscribe();
      this.unsubscribe = null;
    }
  }

  private tick(): void {
    this.lastTickAt = this.clock.time();
    for (const s of [...this.streams]) {
      // One stream's failure (a socket closed under it) must not silence the others.
      try {
        s.tick();
      } catch {
        this.remove(s);
      }
    }
  }
}
