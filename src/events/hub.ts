/**
 * The reading side of live events on one instance: the Server-Sent Events streams its clients hold.
 * One LISTEN connection (src/db/listener.ts) on `conversation_events` tells which conversation has
 * new events (whichever instance wrote them); each stream of that conversation then reads the rows
 * after the last it sent, in order, and writes them as SSE messages. Every heartbeat a stream gets
 * a `: keepalive` comment and reads again (what a lost notification would have said). A stream ends
 * after its conversation's `end` event; a stream of a finished conversation replays what is left
 * after its resume point (nothing, resumed at or past the end) and ends.
 */
import { PassThrough, type Readable } from 'node:stream';
import type { Logger } from 'pino';
import { tooManyRequests, unprocessable } from '../errors/api-error.js';
import type { Listener } from '../db/listener.js';
import { CACHE_CHANNEL } from '../db/notified-cache.js';
import { EVENTS_CHANNEL, ensureEnd, type LiveEventStore, type StoredLiveEvent } from './store.js';
import { checkLiveEvent } from './writer.js';

/** Rows read at once. */
const PAGE = 500;

export interface StreamRequest {
  workspaceId: string;
  conversationId: string;
  /** Events up to this seq were received (Last-Event-ID); 0: from the first. */
  afterSeq: number;
  /** Where `afterSeq` came from (what a 422 about it names). */
  resumeParam: 'Last-Event-ID' | 'last_event_id';
  /** The API key or dashboard session the stream was opened with: the stream ends when it does. */
  credentialId: string | null;
  /** The conversation's record is final: how it ended (its `end` is written if none is stored). */
  finished: { status: string; endReason: string | null; endedAt: Date } | null;
}

interface Subscriber {
  req: StreamRequest;
  stream: PassThrough;
  lastSeq: number;
  reading: boolean;
  again: boolean;
  closed: boolean;
}

export interface HubOptions {
  heartbeatMs: number;
  maxStreamsPerWorkspace: number;
  /** Whether this instance writes the conversation's events (its streams get them by `delivered`). */
  writesHere?: (conversationId: string) => boolean;
  /** Whether the API key or dashboard session of this id is still good (not revoked, logged out, expired or gone). */
  credentialLive?: (credentialId: string) => Promise<boolean>;
}

/** The tables whose rows are credentials; their triggers (migration 033) send `<table> <id>` on CACHE_CHANNEL. */
const CREDENTIAL_TABLES = new Set(['api_keys', 'dashboard_sessions']);

/**
 * How long a stream of a conversation written here waits, after a NOTIFY, for the rows to come by
 * `delivered` before it reads them (the NOTIFY, on its own connection, often arrives first; a read per
 * NOTIFY and stream is what made a hundred calls' streams seconds late).
 */
const LOCAL_DELIVERY_GRACE_MS = 100;

/** One SSE message. */
export function sseMessage(e: StoredLiveEvent): string {
  const data = JSON.stringify({ type: e.type, seq: e.seq, conversation_id: e.conversation_id, ...e.data });
  return `id: ${e.seq}\nevent: ${e.type}\ndata: ${data}\n\n`;
}

export class LiveEventHub {
  private readonly subscribers = new Map<string, Set<Subscriber>>();
  private readonly perWorkspace = new Map<string, number>();
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: LiveEventStore,
    private readonly opts: HubOptions,
    listener: Listener | undefined,
    private readonly log: Logger,
  ) {
    listener?.on(EVENTS_CHANNEL, (payload) => this.notified(payload));
    // The notification that tells every instance's caches of a write tells its streams of a revocation
    // (whichever instance revoked); on listening again, what was missed meanwhile is checked.
    listener?.on(CACHE_CHANNEL, (payload) => this.credentialWritten(payload), { onListening: () => void this.checkCredentials(() => true) });
  }

  start(): void {
    this.heartbeat = setInterval(() => this.beat(), this.opts.heartbeatMs);
    this.heartbeat.unref();
  }

  /** Ends every stream (the instance is stopping; clients resume elsewhere with Last-Event-ID). */
  stop(): void {
    clearInterval(this.heartbeat);
    for (const subs of this.subscribers.values()) for (const s of subs) this.close(s);
  }

  /** Streams open on this instance (metrics, tests). */
  get openStreams(): number {
    let n = 0;
    for (const subs of this.subscribers.values()) n += subs.size;
    return n;
  }

  /**
   * Opens a stream (429 beyond the workspace's streams on this instance). The caller has checked the
   * conversation is the workspace's.
   */
  async open(req: StreamRequest): Promise<Readable> {
    const held = this.perWorkspace.get(req.workspaceId) ?? 0;
    if (held >= this.opts.maxStreamsPerWorkspace) {
      throw tooManyRequests(
        Math.ceil(this.opts.heartbeatMs / 1000),
        `The workspace holds ${held} open event streams on this instance, the most allowed; close one first.`,
        'event_stream_limit_reached',
      );
    }
    if (!req.finished && req.afterSeq > 0) {
      // No event past the head was sent to anyone: such an id would wait for ever (the `end` comes below it).
      const head = await this.store.head(req.workspaceId, req.conversationId);
      if (req.afterSeq > head)
        throw unprocessable(
          'invalid_value',
          `${req.resumeParam} ${req.afterSeq} is past the conversation's last event (${head}); send the id of an event received.`,
          req.resumeParam,
        );
    }
    if (req.finished) {
      const data = { status: req.finished.status, end_reason: req.finished.endReason, timestamp: req.finished.endedAt.getTime() / 1000 };
      checkLiveEvent(req.conversationId, 'end', data);
      await ensureEnd(this.store, { workspaceId: req.workspaceId, conversationId: req.conversationId, type: 'end', data });
    }
    const stream = new PassThrough();
    const sub: Subscriber = { req, stream, lastSeq: req.afterSeq, reading: false, again: false, closed: false };
    this.perWorkspace.set(req.workspaceId, held + 1);
    let subs = this.subscribers.get(req.conversationId);
    if (!subs) this.subscribers.set(req.conversationId, (subs = new Set()));
    subs.add(sub);
    // The client went away, or the stream was ended: forget it.
    stream.on('close', () => this.forget(sub));
    stream.on('error', () => this.forget(sub));
    // Headers and a first line go out at once, before any event (a client sees the stream is open).
    stream.write(': connected\n\n');
    // Subscribed before the first read: nothing written meanwhile is missed.
    void this.pump(sub);
    return stream;
  }

  private forget(sub: Subscriber): void {
    if (sub.closed && !this.subscribers.get(sub.req.conversationId)?.has(sub)) return;
    sub.closed = true;
    const subs = this.subscribers.get(sub.req.conversationId);
    if (subs?.delete(sub)) {
      if (subs.size === 0) this.subscribers.delete(sub.req.conversationId);
      const n = (this.perWorkspace.get(sub.req.workspaceId) ?? 1) - 1;
      if (n > 0) this.perWorkspace.set(sub.req.workspaceId, n);
      else this.perWorkspace.delete(sub.req.workspaceId);
    }
  }

  private close(sub: Subscriber): void {
    this.forget(sub);
    sub.stream.end();
  }

  /**
   * Rows this instance just wrote and committed: a stream that has sent everything before them takes
   * them at once, without reading them back (a stream that is behind or reading reads, as on a NOTIFY).
   */
  delivered(rows: StoredLiveEvent[]): void {
    for (const row of rows) {
      const subs = this.subscribers.get(row.conversation_id);
      if (!subs) continue;
      for (const sub of subs) {
        if (sub.closed || row.seq <= sub.lastSeq) continue;
        if (sub.reading || row.seq !== sub.lastSeq + 1 || sub.stream.writableNeedDrain) {
          void this.pump(sub);
          continue;
        }
        sub.lastSeq = row.seq;
        sub.stream.write(sseMessage(row));
        if (row.type === 'end') this.close(sub);
      }
    }
  }

  private notified(payload: string | undefined): void {
    if (!payload) return;
    const [conversationId, seq] = payload.split(' ');
    const subs = conversationId ? this.subscribers.get(conversationId) : undefined;
    if (!subs) return;
    const last = Number(seq);
    const behind = [...subs].filter((sub) => !(last <= sub.lastSeq));
    if (!this.opts.writesHere?.(conversationId!)) {
      for (const sub of behind) void this.pump(sub);
      return;
    }
    // Written here: `delivered` brings the rows in a moment; events written in another transaction
    // (a status change, the end) are read by the streams they have not reached by then.
    if (behind.length === 0) return;
    setTimeout(() => {
      for (const sub of behind) if (!sub.closed && sub.lastSeq < last) void this.pump(sub);
    }, LOCAL_DELIVERY_GRACE_MS).unref();
  }

  private credentialWritten(payload: string | undefined): void {
    const [table, id] = (payload ?? '').split(' ');
    if (table && id && CREDENTIAL_TABLES.has(table)) void this.checkCredentials((credentialId) => credentialId === id);
  }

  /** Ends the streams, among those whose credential `which`, whose credential is no longer good. */
  private async checkCredentials(which: (credentialId: string) => boolean): Promise<void> {
    const check = this.opts.credentialLive;
    if (!check) return;
    const held = new Map<string, Subscriber[]>();
    for (const subs of this.subscribers.values()) {
      for (const sub of subs) {
        const id = sub.req.credentialId;
        if (id === null || sub.closed || !which(id)) continue;
        held.set(id, [...(held.get(id) ?? []), sub]);
      }
    }
    for (const [id, subs] of held) {
      try {
        if (await check(id)) continue;
      } catch (err) {
        this.log.warn({ err }, 'could not check the credential of open event streams; they go on');
        continue;
      }
      for (const sub of subs) this.close(sub);
    }
  }

  private beat(): void {
    for (const subs of this.subscribers.values()) {
      for (const sub of subs) {
        if (sub.closed) continue;
        sub.stream.write(': keepalive\n\n');
        void this.pump(sub);
      }
    }
  }

  /** Sends the rows after the subscriber's last, until none are left; one read at a time per stream. */
  private async pump(sub: Subscriber): Promise<void> {
    if (sub.reading) {
      sub.again = true;
      return;
    }
    sub.reading = true;
    try {
      for (;;) {
        sub.again = false;
        if (sub.closed) return;
        const rows = await this.store.after(sub.req.workspaceId, sub.req.conversationId, sub.lastSeq, PAGE);
        for (const row of rows) {
          if (sub.closed) return;
          sub.lastSeq = row.seq;
          if (!sub.stream.write(sseMessage(row))) await new Promise((r) => sub.stream.once('drain', r));
          if (row.type === 'end') {
            this.close(sub);
            return;
          }
        }
        if (rows.length < PAGE && !sub.again) {
          // A finished conversation's events are all stored (its `end` included): resumed at or past
          // the end, nothing is left to wait for.
          if (sub.req.finished) this.close(sub);
          return;
        }
      }
    } catch (err) {
      this.log.warn({ err, conversationId: sub.req.conversationId }, 'live events could not be read; the stream is closed (resume with Last-Event-ID)');
      this.close(sub);
    } finally {
      sub.reading = false;
    }
  }
}
