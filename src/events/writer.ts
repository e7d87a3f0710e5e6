/**
 * The producing side of live events. A conversation running on this instance appends its events
 * here (`sink()`); they are held for `flushMs` and written together, every conversation's in one
 * statement (so a hundred live calls cost one small transaction every few tens of milliseconds),
 * one flush at a time so each conversation's events keep their order; an utterance's partial
 * transcript replaces its previous one still waiting. Events that must commit with
 * a record (a status change, the `end`) are written with `writeIn` in the caller's transaction (the
 * bridges flush their conversation's queued events before finalising, so the order holds).
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import { asyncapiPayloadValidator } from '../contract/documents.js';
import type { LiveEventStore, LiveEventType, NewLiveEvent, StoredLiveEvent } from './store.js';

/** Each event type's AsyncAPI message (channel `conversationEvents`). */
export const LIVE_EVENT_MESSAGES: Record<LiveEventType, string> = {
  status: 'liveStatus',
  transcript: 'liveTranscript',
  tool_call: 'liveToolCall',
  tool_result: 'liveToolResult',
  interrupted: 'liveInterrupted',
  transfer: 'liveTransfer',
  dtmf: 'liveDtmf',
  idle: 'liveIdle',
  end: 'liveEnd',
};

/** What a conversation emits into (src/conversation/engine.ts declares the same shape). */
export interface LiveEventSink {
  emit(type: LiveEventType, data: Record<string, unknown>): void;
}

/** How long an ended conversation's late events are still recognised and dropped. */
const ENDED_MEMORY_MS = 60_000;

export class InvalidLiveEventError extends Error {}

/** A conversation that appended within this long counts as written here (a live call speaks every few seconds). */
const WRITES_HERE_MS = 30_000;

const isPartial = (type: LiveEventType, data: Record<string, unknown>) => type === 'transcript' && data.final === false;

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
  /** The write in flight, and the one that follows it (everything queued meanwhile). */
  private writing: Promise<void> | null = null;
  private next: Promise<void> | null = null;
  /** Each conversation's last event still waiting to be written. */
  private readonly lastPending = new Map<string, NewLiveEvent>();
  /** When each conversation last appended an event here (forgotten once it ended). */
  private readonly appendedAt = new Map<string, number>();
  /** Conversations whose `end` is written: later events of theirs are dropped. */
  private readonly ended = new Set<string>();

  constructor(
    private readonly store: LiveEventStore,
    private readonly clock: Clock,
    private readonly opts: {
      flushMs: number;
      onAppend?: (conversationId: string, type: LiveEventType, data: Record<string, unknown>) => void;
      /** Rows this writer stored and committed (this instance's streams take them without reading them back). */
      onWritten?: (rows: StoredLiveEvent[]) => void;
    },
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
    // The utterance so far replaces its previous state still waiting to be written: a client reads
    // the latest words, not every intermediate one (finals and every other event are all kept).
    this.appendedAt.set(conversationId, performance.now());
    const last = this.lastPending.get(conversationId);
    if (isPartial(type, stamped) && last && isPartial(last.type, last.data) && last.data.role === stamped.role) last.data = stamped;
    else {
      const event = { workspaceId, conversationId, type, data: stamped };
      this.pending.push(event);
      this.lastPending.set(conversationId, event);
    }
    this.opts.onAppend?.(conversationId, type, stamped);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, this.opts.flushMs);
  }

  /** Whether conversation events are appended here (a live conversation of this instance). */
  writesHere(conversationId: string): boolean {
    const at = this.appendedAt.get(conversationId);
    return at !== undefined && performance.now() - at < WRITES_HERE_MS;
  }

  /** The sink a conversation of this instance emits into. */
  sink(workspaceId: string, conversationId: string): LiveEventSink {
    return { emit: (type, data) => this.append(workspaceId, conversationId, type, data) };
  }

  /**
   * Writes everything queued; resolves once written (or given up, logged). One write at a time: what
   * is queued meanwhile goes in one next write, started when the current one ends (a write per call
   * would queue up behind each other under load: seconds of delay at a hundred calls).
   */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.writing) {
      this.writing = this.writeOut().finally(() => (this.writing = null));
      return this.writing;
    }
    this.next ??= this.writing.then(() => {
      this.next = null;
      return this.flush();
    });
    return this.next;
  }

  private async writeOut(): Promise<void> {
    const stale = performance.now() - WRITES_HERE_MS;
    for (const [id, at] of this.appendedAt) if (at < stale) this.appendedAt.delete(id);
    const batch = this.pending;
    this.pending = [];
    this.lastPending.clear();
    if (batch.length === 0) return;
    try {
      const rows = await this.store.insert(batch);
      this.opts.onWritten?.(rows);
    } catch (err) {
      this.log.warn({ err, events: batch.length }, 'live events could not be written; they are lost');
    }
  }

  /**
   * Writes events in `trx` (they commit with it). It does not wait for the queue (a queued flush may
   * be waiting for this very transaction's lock): a producer that must see its queued events first
   * calls `flush()` before opening the transaction, as the bridges do before finalising.
   */
  async writeIn(trx: Knex.Transaction, events: NewLiveEvent[]): Promise<void> {
    const stamped = this.ready(events);
    await this.store.insert(stamped, trx);
    this.noteEnds(stamped);
  }

  /** Events written by a caller's statement, stamped and checked. */
  private ready(events: NewLiveEvent[]): NewLiveEvent[] {
    const stamped = events.map((e) => ({ ...e, data: this.stamp(e.data) }));
    for (const e of stamped) checkLiveEvent(e.conversationId, e.type, e.data);
    return stamped;
  }

  /** Conversations whose `end` is among `events` (written): their later events are dropped. */
  private noteEnds(events: NewLiveEvent[]): void {
    for (const e of events) {
      if (e.type !== 'end') continue;
      this.ended.add(e.conversationId);
      this.appendedAt.delete(e.conversationId);
      // Late events of a conversation come within moments of its end; then its id is forgotten.
      setTimeout(() => this.ended.delete(e.conversationId), ENDED_MEMORY_MS).unref();
    }
  }

  /**
   * Events for a statement of the caller's to write along with its own write (LiveEventStore.insertCtes:
   * stored only when its CTE `gate` has a row), stamped and checked as writeIn does; `written` is to
   * run once the statement stored them (it keeps note of `end`s as writeIn does).
   */
  ctesFor(events: NewLiveEvent[], gate: string): { ctes: { sql: string; bindings: Knex.RawBinding[] }; written: () => void } {
    const stamped = this.ready(events);
    return { ctes: this.store.insertCtes(stamped, gate), written: () => this.noteEnds(stamped) };
  }

  async close(): Promise<void> {
    await this.flush();
  }
}
