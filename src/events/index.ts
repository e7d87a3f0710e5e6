/**
 * Live events of conversations (issue 22): phone calls and web sessions write their events here
 * (writer.ts, batched, in order, across instances through PostgreSQL), every instance streams them to
 * its Server-Sent Events clients (hub.ts), and a job removes them after the retention period. The
 * calls and realtime domains decide which of their conversations a workspace may read; this room
 * knows no call or session.
 */
import type { Readable } from 'node:stream';
import type { Listener } from '../db/listener.js';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { notFound, unprocessable } from '../errors/api-error.js';
import { jobKind, type JobQueue } from '../jobs/queue.js';
import type { Clock } from '../lib/clock.js';
import { LiveEventHub, type StreamRequest } from './hub.js';
import { LiveEventStore } from './store.js';
import { LiveEventWriter } from './writer.js';

export type { LiveEventSink } from './writer.js';
export { LiveEventWriter } from './writer.js';
export type { LiveEventType } from './store.js';

export interface LiveEventsOptions {
  flushMs: number;
  heartbeatMs: number;
  maxStreamsPerWorkspace: number;
  maxPerConversation: number;
  retentionMs: number;
  retentionSweepMs: number;
  /** Whether an API key or dashboard session (by id) is still good: streams end with their credential. */
  credentialLive?: (credentialId: string) => Promise<boolean>;
  /** Benchmarks: told of each event a conversation of this instance queues. */
  onAppend?: (conversationId: string, type: string, data: Record<string, unknown>) => void;
}

export const EVENTS_RETENTION_JOB = jobKind<Record<string, never>>({
  name: 'conversation_events_retention',
  parse: () => ({}),
  key: () => 'conversation_events_retention',
});

/** Rows removed per retention statement. */
const SWEEP_BATCH = 5000;

/** A finished conversation, as the stream needs to end it. */
export type FinishedConversation = NonNullable<StreamRequest['finished']>;

/** The largest event id: `seq` is a PostgreSQL integer. */
/** The stream of an erased conversation (src/erasure): its events are gone, and none is written again. */
export function conversationErased(id: string) {
  return notFound('conversation_erased', `${id.slice(0, 64)} was erased: it has no events left.`);
}

export const MAX_EVENT_ID = 2_147_483_647;

/**
 * The resume point: `Last-Event-ID` wins over `last_event_id`; each one given must be an integer from
 * 0 to MAX_EVENT_ID.
 */
export function resumeAfter(header: string | undefined, query: string | undefined): Pick<StreamRequest, 'afterSeq' | 'resumeParam'> {
  const given = [
    ['Last-Event-ID', header],
    ['last_event_id', query],
  ] as const;
  for (const [param, raw] of given) {
    if (raw === undefined || raw === '') continue;
    if (!/^(0|[1-9][0-9]{0,9})$/.test(raw) || Number(raw) > MAX_EVENT_ID)
      throw unprocessable('invalid_value', `${param} must be the id of an event received: an integer from 0 to ${MAX_EVENT_ID}.`, param);
  }
  const [resumeParam, raw] = given.find(([, v]) => v !== undefined) ?? given[0];
  return { afterSeq: raw ? Number(raw) : 0, resumeParam };
}

export class LiveEvents {
  readonly store: LiveEventStore;
  readonly writer: LiveEventWriter;
  readonly hub: LiveEventHub;

  constructor(
    knex: Knex,
    listener: Listener | undefined,
    private readonly clock: Clock,
    private readonly opts: LiveEventsOptions,
    private readonly log: Logger,
  ) {
    this.store = new LiveEventStore(knex, opts.maxPerConversation);
    this.hub = new LiveEventHub(
      this.store,
      {
        heartbeatMs: opts.heartbeatMs,
        maxStreamsPerWorkspace: opts.maxStreamsPerWorkspace,
        writesHere: (id) => this.writer.writesHere(id),
        credentialLive: opts.credentialLive,
      },
      listener,
      log,
    );
    this.writer = new LiveEventWriter(
      this.store,
      clock,
      { flushMs: opts.flushMs, onAppend: opts.onAppend, onWritten: (rows) => this.hub.delivered(rows) },
      log,
    );
  }

  start(): void {
    this.hub.start();
  }

  /** Writes what is queued and ends every stream (clients resume elsewhere). */
  async stop(): Promise<void> {
    await this.writer.close();
    this.hub.stop();
  }

  /**
   * The SSE body of a conversation the caller has checked is the workspace's: the events after
   * `afterSeq`, then the live ones, to `end`.
   */
  async stream(req: StreamRequest): Promise<{ status: 200; headers: Record<string, string>; body: Readable; type: string }> {
    const body = await this.hub.open(req);
    return { status: 200, headers: { 'Cache-Control': 'no-cache' }, body, type: 'text/event-stream' };
  }

  /** Removes events older than the retention period; returns how many. */
  async sweep(): Promise<number> {
    const before = new Date(this.clock.now().getTime() - this.opts.retentionMs);
    let removed = 0;
    for (;;) {
      const n = await this.store.pruneBefore(before, SWEEP_BATCH);
      removed += n;
      if (n < SWEEP_BATCH) break;
    }
    if (removed) this.log.info({ removed }, 'expired conversation events removed');
    return removed;
  }

  /** The retention job: sweeps, then runs again after `retentionSweepMs`. */
  register(jobs: JobQueue): { schedule(): Promise<void> } {
    const next = () => new Date(this.clock.now().getTime() + this.opts.retentionSweepMs);
    jobs.register(EVENTS_RETENTION_JOB, async () => {
      await this.sweep();
      await jobs.add(EVENTS_RETENTION_JOB, {}, { runAt: next() });
    });
    return { schedule: () => jobs.add(EVENTS_RETENTION_JOB, {}, { runAt: this.clock.now(), keyMode: 'preserve_run_at' }) };
  }
}
