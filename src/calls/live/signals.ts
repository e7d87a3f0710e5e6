/**
 * Signals to a live call's bridge from wherever the news arrives. A carrier callback (answering-machine
 * result, the carrier's end of the call) can land on any instance, while the bridge runs on the instance
 * that holds the call's media stream: a signal for a bridge of this instance is handled at once; any
 * other goes out by PostgreSQL NOTIFY, and the instance holding that bridge acts on it. A signal for a
 * call no bridge holds is dropped (the call's record already carries the fact for whoever needs it).
 */
import type { Logger } from 'pino';
import type { Listener } from '../../db/listener.js';
import type { AnsweredBy } from '../store.js';

export type CallSignal =
  | { callId: string; kind: 'amd'; answeredBy: AnsweredBy; greetingEnded: boolean }
  | { callId: string; kind: 'greeting_ended' }
  | { callId: string; kind: 'carrier_ended' };

const CHANNEL = 'call_signals';
/** NOTIFY payloads are limited to 8000 bytes; ours are far smaller. */
const MAX_PAYLOAD = 7000;

export class CallSignals {
  private readonly handlers = new Map<string, (s: CallSignal) => void>();

  constructor(
    listener: Listener,
    private readonly log: Logger,
  ) {
    listener.on(CHANNEL, (payload) => {
      if (!payload) return;
      try {
        this.deliver(JSON.parse(payload) as CallSignal);
      } catch {
        this.log.warn('unreadable call signal ignored');
      }
    });
  }

  private deliver(signal: CallSignal): boolean {
    const handler = this.handlers.get(signal.callId);
    if (!handler) return false;
    try {
      handler(signal);
    } catch (err) {
      this.log.error({ err, callId: signal.callId }, 'call signal handler failed');
    }
    return true;
  }

  /** The bridge of `callId` on this instance takes its signals. */
  register(callId: string, handler: (s: CallSignal) => void): void {
    this.handlers.set(callId, handler);
  }

  unregister(callId: string): void {
    this.handlers.delete(callId);
  }

  /** Delivers here when this instance holds the bridge, else to every instance through NOTIFY. */
  async send(signal: CallSignal, knex: { raw(sql: string, bindings: unknown[]): Promise<unknown> }): Promise<void> {
    if (this.deliver(signal)) return;
    const payload = JSON.stringify(signal);
    if (payload.length > MAX_PAYLOAD) return;
    await knex.raw('select pg_notify(?, ?)', [CHANNEL, payload]);
  }
}
