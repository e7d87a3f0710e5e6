/**
 * Progress saves of live conversations (phone calls, web sessions): the conversation so far, written
 * as it goes so another instance can finish it if this one dies. Every conversation of this instance
 * that changed is written at each tick, on one timer, by one statement per megabyte of JSON, instead
 * of a statement and a timer per conversation: at 500 live calls of ordinary length that is one write
 * a second, not 500 (docs/scaling.md).
 *
 * A conversation's change waits at most `everyMs` (what a crash can lose); one tick's write at a time,
 * so a conversation's saves land in order. `settle` ends a conversation's saves before its record is
 * written, waiting only for the statement that holds its own save, if one is under way.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { ConversationOutcome, ToolCallRecord } from './engine.js';
import type { TranscriptTurn } from '../voice/types.js';

/** The columns a progress save writes (the same in `calls` and `realtime_live_sessions`). */
export interface ProgressColumns {
  transcript: TranscriptTurn[];
  transcript_truncated: boolean;
  interruption_count: number;
  latencies_ms: number[];
  tool_calls: ToolCallRecord[];
  first_message_delivered: boolean;
}

/** The columns from a conversation's snapshot (`Conversation.snapshot()`). */
export const progressColumns = (s: Omit<ConversationOutcome, 'status' | 'endedAt'>): ProgressColumns => ({
  transcript: s.transcript,
  transcript_truncated: s.transcriptTruncated,
  interruption_count: s.interruptionCount,
  latencies_ms: s.latenciesMs,
  tool_calls: s.toolCalls,
  first_message_delivered: s.firstMessageDelivered,
});

/** One conversation's save: its id and ProgressColumns, as one JSON object (read and serialised at the tick). */
export type ProgressJson = string;

/** A tick's saves go in statements of about this many bytes of JSON, the event loop free between them. */
const STATEMENT_BYTES = 1024 * 1024;

/**
 * `update <table> set <the progress columns> from jsonb_to_recordset($1)` for `saves`, one statement.
 * `where` adds a condition on the table's row (alias `t`), `set` more assignments.
 */
export async function writeProgress(db: Knex, table: string, saves: ProgressJson[], opts: { where?: Knex.Raw; set?: string } = {}): Promise<void> {
  const sql = `update ?? as t set transcript = v.transcript, transcript_truncated = v.transcript_truncated,
      interruption_count = v.interruption_count, latencies_ms = v.latencies_ms, tool_calls = v.tool_calls,
      first_message_delivered = v.first_message_delivered${opts.set ? `, ${opts.set}` : ''}
    from jsonb_to_recordset(?::jsonb) as v(id text, transcript jsonb, transcript_truncated boolean, interruption_count integer,
      latencies_ms jsonb, tool_calls jsonb, first_message_delivered boolean)
    where t.id = v.id${opts.where ? ' and ?' : ''}`;
  const json = `[${saves.join(',')}]`;
  await db.raw(sql, opts.where ? [table, json, opts.where] : [table, json]);
}

type Read = () => ProgressColumns | null;

/** A conversation taken by a tick: how to read it, and what to call once its save is written or skipped. */
interface Due {
  id: string;
  read: Read;
  done: () => void;
}

export class ProgressSaves {
  /** Conversations changed since the last tick: how to read each one's progress (null: nothing to save). */
  private changes = new Map<string, Read>();
  private timer: NodeJS.Timeout | undefined;
  /** The ticks' reads and writes, one tick after the other (so a conversation's saves land in order). */
  private ticking: Promise<void> = Promise.resolve();
  /** Conversations taken by a tick not yet written: resolved once the statement holding the save is sent. */
  private readonly unwritten = new Map<string, Promise<void>>();

  constructor(
    private readonly write: (saves: ProgressJson[]) => Promise<void>,
    private readonly everyMs: number,
    private readonly log: Logger,
  ) {}

  /** `id` changed: its progress is read and written at the next tick. */
  changed(id: string, read: Read): void {
    this.changes.set(id, read);
    this.timer ??= setTimeout(() => this.tick(), this.everyMs);
  }

  /**
   * No more saves of `id`; resolves once a save of it already taken by a tick is written (not the rest
   * of that tick: other conversations' statements do not hold up this one's end).
   */
  async settle(id: string): Promise<void> {
    this.changes.delete(id);
    await this.unwritten.get(id);
  }

  /** Stops the timer; changes not yet written are dropped (the conversations' own ends write them). */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.changes.clear();
  }

  private tick(): void {
    this.timer = undefined;
    const due = [...this.changes].map(([id, read]) => this.take(id, read));
    this.changes.clear();
    this.ticking = this.ticking
      .then(() => this.save(due))
      .catch((err: unknown) => this.log.warn({ err }, 'could not save the progress of live conversations'))
      // Whatever failed, no settle waits for ever.
      .finally(() => due.forEach((d) => d.done()));
  }

  /** `id` is in the tick being queued: its settle waits for this tick's statement holding it. */
  private take(id: string, read: Read): Due {
    let resolve!: () => void;
    const written = new Promise<void>((r) => (resolve = r));
    // A later tick replaces an earlier one's entry: it runs after it.
    this.unwritten.set(id, written);
    const done = () => {
      if (this.unwritten.get(id) === written) this.unwritten.delete(id);
      resolve();
    };
    return { id, read, done };
  }

  /**
   * Reads and writes `due` a statement's worth at a time, yielding to the event loop between
   * statements: serialising hundreds of long transcripts at once would hold up every other
   * conversation of the instance. Each one is serialised as it is read, since it goes on changing.
   */
  private async save(due: Due[]): Promise<void> {
    let saves: ProgressJson[] = [];
    let held: Due[] = [];
    let bytes = 0;
    const send = async () => {
      const batch = saves;
      const sent = held;
      saves = [];
      held = [];
      bytes = 0;
      await this.write(batch).catch((err: unknown) => this.log.warn({ err, conversations: batch.length }, 'could not save the progress of live conversations'));
      sent.forEach((d) => d.done());
    };
    for (const d of due) {
      const progress = d.read();
      if (!progress) {
        d.done();
        continue;
      }
      const one = JSON.stringify({ id: d.id, ...progress });
      saves.push(one);
      held.push(d);
      bytes += one.length;
      if (bytes >= STATEMENT_BYTES) {
        await send();
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    if (saves.length) await send();
  }
}
