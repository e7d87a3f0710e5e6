/**
 * One 20 ms clock for every RTP session of the process, in place of a timer per call: each tick sends
 * one packet of every session that is sending, so N calls cost one timer callback per 20 ms, not N.
 * Drift-corrected (each tick is due 20 ms after the last one was due, not after it ran). After a
 * stall of the event loop of over five frames, the ticks missed are not run in a burst: the clock
 * moves on to now and tells every session how many frames it skipped, so their RTP clocks pass that
 * time too and the peers see a gap to conceal, not streams late on their timestamps from then on.
 */
export const FRAME_MS = 20;
/** Behind by more than this many frames, the frames missed are skipped (not sent in a burst). */
const MAX_BEHIND_FRAMES = 5;

export interface PacedStream {
  /** Send this tick's packet. */
  tick(): void;
  /** `frames` ticks were skipped after a stall: their time passes on the stream's RTP clock. */
  skipped(frames: number): void;
}

/**
 * What paces an RTP session's packets: one tick per 20 ms frame. The service's sessions run on the
 * process's `rtpClock`; a sender whose audio comes from another frame clock (the sandbox's SIP far
 * end, whose callees talk on its line clock) is paced by that clock, so its audio and its packets keep
 * step whatever the event loop's stalls.
 */
export interface RtpPacer {
  /** The stream's first packet goes on the next tick. */
  add(stream: PacedStream): void;
  remove(stream: PacedStream): void;
  /** The pacer's time now (ms). */
  time(): number;
  /** When the last tick ran, on the pacer's time. */
  readonly lastTickAt: number;
}

export class RtpClock implements RtpPacer {
  private readonly streams = new Set<PacedStream>();
  private timer?: NodeJS.Timeout;
  private nextTick = 0;
  /** When the last tick ran, on this clock's time. */
  lastTickAt = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** This clock's time now (ms). */
  time(): number {
    return this.now();
  }

  /** The stream's first packet goes on the next tick (at once when no other stream is sending, else within 20 ms). */
  add(stream: PacedStream): void {
    this.streams.add(stream);
    if (this.timer) return;
    this.nextTick = this.now();
    this.schedule();
  }

  remove(stream: PacedStream): void {
    this.streams.delete(stream);
    if (this.streams.size === 0 && this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  get size(): number {
    return this.streams.size;
  }

  private schedule(): void {
    this.timer = setTimeout(() => this.tick(), Math.max(0, this.nextTick - this.now()));
  }

  private tick(): void {
    this.lastTickAt = this.now();
    for (const s of this.streams) {
      // One stream's failure (a socket closed under it) must not silence every other call.
      try {
        s.tick();
      } catch {
        this.streams.delete(s);
      }
    }
    this.nextTick += FRAME_MS;
    const behind = this.now() - this.nextTick;
    if (behind > MAX_BEHIND_FRAMES * FRAME_MS) {
      const skipped = Math.floor(behind / FRAME_MS);
      this.nextTick += skipped * FRAME_MS;
      for (const s of this.streams) s.skipped(skipped);
    }
    if (this.streams.size === 0) {
      this.timer = undefined;
      return;
    }
    this.schedule();
  }
}

/** The process's clock, shared by every user agent's calls. */
export const rtpClock = new RtpClock();
