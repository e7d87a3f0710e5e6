/**
 * The timers of one live conversation's reservation, on the instance that runs it. The conversation
 * may talk `minutes` metering minutes from `startedAt` (the answer of a call, the start of a web
 * session). `renewBeforeMs` before that runs out, the next slice is asked for; if it is not granted
 * (the credit or plan minutes are used up or held by other live conversations), it is asked once more
 * when the reservation runs out, and if that fails too, `onExhausted` ends the conversation. A
 * conversation whose reservation reaches its own maximum length is left to its own time limit.
 */
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import type { Grant, ReservationLimit } from './reservations.js';
import type { ReservationTerms } from './terms.js';

export interface WatchTerms extends ReservationTerms {
  id: string;
  workspaceId: string;
  /** When the conversation's billed time began. */
  startedAt: Date;
  /** Minutes its reservation holds now. */
  minutes: number;
  /** The reservation ran out and could not be extended (`error`: the database could not be asked). */
  onExhausted: (reason: ReservationLimit | 'error') => void;
}

export class ReservationWatch {
  private timer: NodeJS.Timeout | undefined;
  private held: number;
  /** The last ask was not granted: the next one is the last, when the reservation runs out. */
  private lastChance = false;
  private stopped = false;

  constructor(
    private readonly extend: (heldMinutes: number) => Promise<Grant>,
    private readonly clock: Clock,
    private readonly opts: { minuteMs: number; renewBeforeMs: number },
    private readonly terms: WatchTerms,
    private readonly log: Logger,
  ) {
    this.held = terms.minutes;
  }

  /** Minutes the reservation holds. */
  get minutes(): number {
    return this.held;
  }

  /** When the conversation's reservation runs out. */
  get endsAt(): Date {
    return new Date(this.terms.startedAt.getTime() + this.held * this.opts.minuteMs);
  }

  start(): void {
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.stopped) return;
    if (this.terms.maxMinutes !== undefined && this.held >= this.terms.maxMinutes) return;
    const at = this.endsAt.getTime() - (this.lastChance ? 0 : this.opts.renewBeforeMs);
    this.timer = setTimeout(() => void this.ask(), Math.max(0, at - this.clock.now().getTime()));
  }

  private async ask(): Promise<void> {
    let granted: Grant | null = null;
    try {
      granted = await this.extend(this.held);
    } catch (err) {
      this.log.warn({ err, id: this.terms.id }, 'reservation could not be extended');
    }
    if (this.stopped) return;
    if (granted && granted.minutes > this.held) {
      this.held = granted.minutes;
      this.lastChance = false;
      this.schedule();
      return;
    }
    // Not extended. A reservation that had expired meanwhile may come back smaller: it ends sooner.
    if (granted) this.held = granted.minutes;
    if (this.lastChance || this.clock.now().getTime() >= this.endsAt.getTime()) {
      const reason = granted ? (granted.limitedBy ?? 'insufficient_credit') : 'error';
      this.log.info({ id: this.terms.id, minutes: this.held, reason }, 'reservation ran out; ending the conversation');
      this.stopped = true;
      this.terms.onExhausted(reason);
      return;
    }
    this.lastChance = true;
    this.schedule();
  }
}
