/**
 * The producing side of live events. A conversation running on this instance appends its events
 * here (`sink()`); they are held for `flushMs` and written together, every conversation's in one
 * statement (so a hundred live calls cost one small transaction every few tens of milliseconds),
 * one flush at a time so each conversation's events keep their order. Events that must commit with
 * a record (a status change, the `end`) are written with `writeIn` in the caller's transaction (the
 * bridges flush their conversation's queued events before finalising, so the order holds).
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import { asyncapiPayloadValidator } from '../contract/documents.js';
import type { LiveEventStore, LiveEventType, NewLiveEvent } from './store.js';

/** Each event type's AsyncAPI message (channel `conversationEvents`). */
export const LIVE_EVENT_MESSAGES: Record<LiveEventType, string> = {
  status: 'liveStatus',
  transcript: 'liveTranscript',
  tool_call: 'liveToolCall',
  tool_result: 'liveToolResult',
  interrupted: 'liveInterrupted',
  transfer: 'liveTransfer',
  dtmf: 'liveDtmf',
  end: 'liveEnd',
};

/** What a conversation emits into (src/conversation/engine.ts declares the same shape). */
export interface LiveEventSink {
  emit(type: LiveEventType, data: Record<string, unknown>): void;
}

/** How long an ended conversation's late events are still recognised and dropped. */
const ENDED_MEMORY_MS = 60_000;

export class InvalidLiveEventError extends Error {}

/** Checks an event against its AsyncAPI message (with placeholder seq), so nothing off-contract is stored. */
export function checkLiveEvent(conversationId: string, type: LiveEventType, data: Record<string, unknown>): void {
  const validate = asyncapiPayloadValidator(LIVE_EVENT_MESSAGES[type]);
  if (!validate({ type, seq: 1, conversation_id: conversationId, ...data })) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
    throw new InvalidLiveEventError(`The ${type} event does not match the contract: ${problems.join('; ')}`);
  }
}

export class LiveEventWriter {
  private pending: NewLiveEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  /** Conversations whose `end` is written: later events of theirs are dropped. */
  private readonly ended = new Set<string>();

  constructor(
    private readonly store: LiveEventStore,
    private readonly clock: Clock,
    private readonly opts: { flushMs: number; onAppend?: (conversationId: string, type: LiveEventType, data: Record<string, unknown>) => void },
    private readonly log: Logger,
  ) {}

  private stamp(data: Record<string, unknown>): Record<string, unknown> {
    return 'timestamp' in data ? data : { ...data, timestamp: this.clock.now().getTime() / 1000 };
  }

  /** Queues an event of a conversation running here. */
  append(workspaceId: string, conversationId: string, type: LiveEventType, data: Record<string, unknown>): void {
    if (this.ended.has(conversationId)) return;
    const stamped = this.stamp(data);
    try {
      checkLiveEvent(conversationId, type, stamped);
    } catch (err) {
      this.log.error({ err, conversationId, type }, 'live event dropped');
      return;
    }
    this.pending.push({ workspaceId, conversationId, type, data: stamped });
    this.opts.onAppend?.(conversationId, type, stamped);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, this.opts.flushMs);
  }

  /** The sink a conversation of this instance emits into. */
  sink(workspaceId: string, conversationId: string): LiveEventSink {
    return { emit: (type, data) => this.append(workspaceId, conversationId, type, data) };
  }

  /** Writes everything queued; resolves once written (or given up, logged). */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = [];
    this.flushing = this.flushing.then(async () => {
      if (batch.length === 0) return;
      try {
        await this.store.insert(batch);
      } catch (err) {
        this.log.warn({ err, events: batch.length }, 'live events could not be written; they are lost');
      }
    });
    return this.flushing;
  }

  /**
   * Writes events in `trx` (they commit with it). It does not wait for the queue (a queued flush may
   * be waiting for this very transaction's lock): a producer that must see its queued events first
   * calls `flush()` before opening the transaction, as the bridges do before finalising.
   */
  async writeIn(trx: Knex.Transaction, events: NewLiveEvent[]): Promise<void> {
    const stamped = events.map((e) => ({ ...e, data: this.stamp(e.data) }));
    for (const e of stamped) checkLiveEvent(e.conversationId, e.type, e.data);
    await this.store.insert(stamped, trx);
    for (const e of stamped) {
      if (e.type !== 'end') continue;
      this.ended.add(e.conversationId);
      // Late events of a conversation come within moments of its end; then its id is forgotten.
      setTimeout(() => this.ended.delete(e.conversationId), ENDED_MEMORY_MS).unref();
    }
  }

  async close(): Promise<void> {
    await this.flush();
  }
}
