/**
 * Conversation events in PostgreSQL (`conversation_events`, migration 027). Writes take a
 * transaction-scoped advisory lock per conversation (in id order, so two writers never deadlock),
 * number the new events after the conversation's last, and NOTIFY `conversation_events` with
 * `<conversation id> <last seq>` per conversation, delivered on commit. Reads are scoped by workspace.
 */
import type { Knex } from 'knex';

export const EVENTS_CHANNEL = 'conversation_events';

export type LiveEventType = 'status' | 'transcript' | 'tool_call' | 'tool_result' | 'interrupted' | 'transfer' | 'dtmf' | 'end';

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
   * Stores `events` (in the given order within each conversation) in `trx`, or in a transaction of
   * its own. Returns the rows stored, numbered.
   */
  async insert(events: NewLiveEvent[], trx?: Knex.Transaction): Promise<StoredLiveEvent[]> {
    if (events.length === 0) return [];
    const run = async (t: Knex.Transaction) => {
      const ids = [...new Set(events.map((e) => e.conversationId))].sort();
      await t.raw(`select pg_advisory_xact_lock(hashtextextended(id, 27)) from unnest(?::text[]) as id order by id`, [ids]);
      const input = events.map((e, i) => ({ w: e.workspaceId, c: e.conversationId, o: i + 1, t: e.type, d: e.data }));
      const result = await t.raw(
        `with input as (
           select * from jsonb_to_recordset(?::jsonb) as x(w text, c text, o int, t text, d jsonb)
         ), numbered as (
           select i.*, row_number() over (partition by i.c order by i.o) as n,
                  coalesce((select max(e.seq) from conversation_events e where e.conversation_id = i.c), 0) as top
             from input i
         ), kept as (
           insert into conversation_events (workspace_id, conversation_id, seq, type, data)
           select w, c, top + n, t, d from numbered
            where top + n <= ? or t = 'end'
           returning conversation_id, seq, type, data
         ), notified as (
           select pg_notify(?, conversation_id || ' ' || max(seq)) from kept group by conversation_id
         )
         select conversation_id, seq, type, data, (select count(*) from notified) as notifications
           from kept order by conversation_id, seq`,
        [JSON.stringify(input), this.maxPerConversation, EVENTS_CHANNEL],
      );
      return (result.rows as Array<StoredLiveEvent & { notifications: unknown }>).map(({ conversation_id, seq, type, data }) => ({
        conversation_id,
        seq,
        type,
        data,
      }));
    };
    return trx ? run(trx) : this.db.transaction(run);
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

  /** Whether the conversation's `end` is stored. */
  async hasEnd(workspaceId: string, conversationId: string): Promise<boolean> {
    const row = await this.db('conversation_events').where({ workspace_id: workspaceId, conversation_id: conversationId, type: 'end' }).first('seq');
    return Boolean(row);
  }

  /** Removes events written before `before`, at most `limit` a call; returns how many. */
  async pruneBefore(before: Date, limit: number): Promise<number> {
    const result = await this.db.raw(`delete from conversation_events where ctid in (select ctid from conversation_events where created_at < ? limit ?)`, [
      before,
      limit,
    ]);
    return result.rowCount ?? 0;
  }
}

/** The `end` of a finished conversation that has none stored (expired, or ended before events existed), written once. */
export async function ensureEnd(store: LiveEventStore, event: NewLiveEvent): Promise<void> {
  await store.db.transaction(async (trx) => {
    await trx.raw(`select pg_advisory_xact_lock(hashtextextended(?::text, 27))`, [event.conversationId]);
    const found = await trx('conversation_events').where({ conversation_id: event.conversationId, type: 'end' }).first('seq');
    if (!found) await store.insert([event], trx);
  });
}
