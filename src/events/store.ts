/**
 * Conversation events in PostgreSQL (`conversation_events`, migration 027). A write numbers the new
 * events after the conversation's last by bumping its head (`conversation_event_heads`, migration
 * 029) in the same statement, and NOTIFYs `conversation_events` with `<conversation id> <last seq>`
 * per conversation, delivered on commit. Reads are scoped by workspace.
 */
import type { Knex } from 'knex';

export const EVENTS_CHANNEL = 'conversation_events';

export type LiveEventType = 'status' | 'transcript' | 'tool_call' | 'tool_result' | 'interrupted' | 'transfer' | 'dtmf' | 'idle' | 'end';

/** An event to store: its fields other than type, seq and conversation_id (timestamp included). */
export interface NewLiveEvent {
  workspaceId: string;
  conversationId: string;
  type: LiveEventType;
  data: Record<string, unknown>;
}

export interface StoredLiveEvent {
  conversation_id: string;
  seq: number;
  type: LiveEventType;
  data: Record<string, unknown>;
}

export class LiveEventStore {
  constructor(
    readonly db: Knex,
    /** Events kept per conversation; beyond, only `end` is still stored. */
    private readonly maxPerConversation: number,
  ) {}

  /**
   * Stores `events` (in the given order within each conversation) in `trx`, or on its own, in one
   * statement: each conversation's head (`conversation_event_heads`) is bumped by its number of events,
   * in id order (the heads' row locks order concurrent writers and never deadlock), and the events take
   * the numbers between. Beyond `maxPerConversation` only `end` is stored (the numbers of the events
   * not kept are skipped: a reader resumes after any `seq`, so gaps are harmless). Returns the rows
   * stored, numbered.
   */
  async insert(events: NewLiveEvent[], trx?: Knex.Transaction): Promise<StoredLiveEvent[]> {
    if (events.length === 0) return [];
    const ctes = this.insertCtes(events);
    const result = await (trx ?? this.db).raw(
      `with ${ctes.sql}
       select conversation_id, seq, type, data, (select count(*) from notified) as notifications
         from kept order by conversation_id, seq`,
      ctes.bindings,
    );
    return (result.rows as Array<StoredLiveEvent & { notifications: unknown }>).map(({ conversation_id, seq, type, data }) => ({
      conversation_id,
      seq,
      type,
      data,
    }));
  }

  /**
   * The write of `insert` as common table expressions (`input` ... `kept`, `notified`), for a statement
   * of the caller's that stores the events along with its own write. `gate`: the name of one of that
   * statement's earlier CTEs; the events are stored only when it has a row. The statement must read
   * `notified` (e.g. `(select count(*) from notified)`), which is what sends the NOTIFY.
   */
  insertCtes(events: NewLiveEvent[], gate?: string): { sql: string; bindings: Knex.RawBinding[] } {
    const input = events.map((e, i) => ({ w: e.workspaceId, c: e.conversationId, o: i + 1, t: e.type, d: e.data }));
    return {
      sql: `input as (
         select * from jsonb_to_recordset(?::jsonb) as x(w text, c text, o int, t text, d jsonb)${gate ? ` where exists (select 1 from ${gate})` : ''}
       ), counts as (
         select c, min(w) as w, count(*)::int as n from input group by c
       ), heads as (
         insert into conversation_event_heads as h (conversation_id, workspace_id, last_seq)
         select c, w, n from counts order by c
         on conflict (conversation_id) do update set last_seq = h.last_seq + excluded.last_seq, updated_at = now()
         returning conversation_id, last_seq
       ), numbered as (
         select i.*, h.last_seq - k.n + row_number() over (partition by i.c order by i.o) as seq
           from input i join counts k on k.c = i.c join heads h on h.conversation_id = i.c
       ), kept as (
         insert into conversation_events (workspace_id, conversation_id, seq, type, data)
         select w, c, seq, t, d from numbered
          where seq <= ? or t = 'end'
         returning conversation_id, seq, type, data
       ), notified as (
         select pg_notify(?, conversation_id || ' ' || max(seq)) from kept group by conversation_id
       )`,
      bindings: [JSON.stringify(input), this.maxPerConversation, EVENTS_CHANNEL],
    };
  }

  /** The conversation's events after `afterSeq`, in order, at most `limit`. */
  async after(workspaceId: string, conversationId: string, afterSeq: number, limit: number): Promise<StoredLiveEvent[]> {
    return this.db('conversation_events')
      .where({ workspace_id: workspaceId, conversation_id: conversationId })
      .where('seq', '>', afterSeq)
      .orderBy('seq')
      .limit(limit)
      .select('conversation_id', 'seq', 'type', 'data');
  }

  /** The conversation's last event number (0: none yet). */
  async head(workspaceId: string, conversationId: string): Promise<number> {
    const row = await this.db('conversation_event_heads').where({ workspace_id: workspaceId, conversation_id: conversationId }).first('last_seq');
    return row?.last_seq ?? 0;
  }

  /** Whether the conversation's `end` is stored. */
  async hasEnd(workspaceId: string, conversationId: string): Promise<boolean> {
    const row = await this.db('conversation_events').where({ workspace_id: workspaceId, conversation_id: conversationId, type: 'end' }).first('seq');
    return Boolean(row);
  }

  /**
   * Removes events written before `before`, at most `limit` a call, and the heads of conversations
   * with no event left that have not moved since; returns how many events.
   */
  async pruneBefore(before: Date, limit: number): Promise<number> {
    const result = await this.db.raw(`delete from conversation_events where ctid in (select ctid from conversation_events where created_at < ? limit ?)`, [
      before,
      limit,
    ]);
    await this.db.raw(
      `delete from conversation_event_heads h where h.conversation_id in (
         select conversation_id from conversation_event_heads where updated_at < ? limit ?)
         and not exists (select 1 from conversation_events e where e.conversation_id = h.conversation_id)`,
      [before, limit],
    );
    return result.rowCount ?? 0;
  }
}

/** The `end` of a finished conversation that has none stored (expired, or ended before events existed), written once. */
export async function ensureEnd(store: LiveEventStore, event: NewLiveEvent): Promise<void> {
  await store.db.transaction(async (trx) => {
    // The conversation's head, made if missing and locked: one of two readers at once writes the end.
    await trx.raw(
      `insert into conversation_event_heads as h (conversation_id, workspace_id, last_seq) values (?, ?, 0)
       on conflict (conversation_id) do update set last_seq = h.last_seq`,
      [event.conversationId, event.workspaceId],
    );
    const found = await trx('conversation_events').where({ conversation_id: event.conversationId, type: 'end' }).first('seq');
    if (!found) await store.insert([event], trx);
  });
}
