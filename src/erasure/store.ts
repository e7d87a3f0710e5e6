/**
 * The erasure of one conversation's content, in one transaction holding its row: the row becomes a
 * tombstone (content emptied, `erased_at` set, billing facts kept) and every other row holding the
 * conversation's content is deleted (live events, a call's transfer attempts, webhook events and their deliveries, idempotent
 * replies that carry it, the recording and its chunk index). The row lock and the state check make it
 * safe against a finalisation on another instance: a call is erased only once terminal, and the
 * terminal transaction (guarded by the live statuses) cannot write after it; a web session is erased
 * only once its record exists, which its finalisation writes with everything else at once.
 */
import type { Knex } from 'knex';

export type ConversationTable = 'calls' | 'realtime_conversations';

/** What the locked row said: absent, someone else's, live, already erased, or erased now. */
export type EraseOutcome = 'not_found' | 'other_workspace' | 'live' | 'already_erased' | 'erased';

const LIVE_CALL_STATUSES = ['queued', 'initiated', 'ringing', 'in_progress'];

/** The content columns of each table and what an erased row holds in them. */
const TOMBSTONE: Record<ConversationTable, Record<string, unknown>> = {
  calls: {
    transcript: '[]',
    tool_calls: '[]',
    unanswered_questions: '[]',
    variables: '{}',
    instruction: '',
    first_message: null,
    summary: null,
    sentiment: null,
    goal_met: null,
    needs_review: null,
    analysis: null,
    analysis_results: null,
    inbound_setup: null,
    stream_token_hash: null,
  },
  realtime_conversations: {
    transcript: '[]',
    message_count: 0,
    tool_calls: null,
    unanswered_questions: '[]',
    variables: '{}',
    first_message: null,
    summary: null,
    sentiment: null,
    goal_met: null,
    needs_review: null,
    analysis_results: null,
  },
};

export class ErasureStore {
  constructor(readonly knex: Knex) {}

  /**
   * Erases the conversation in `trx` (the caller's transaction, which also removes its recording):
   * locks its row, checks whose it is and that it has ended, then writes the tombstone and deletes the
   * rest. A web session's live row (admitted, not yet finalised) makes it `live`.
   */
  async erase(table: ConversationTable, workspaceId: string | null, id: string, at: Date, trx: Knex.Transaction): Promise<EraseOutcome> {
    const row = await trx(table)
      .where({ id })
      .forUpdate()
      .first('workspace_id', 'erased_at', ...(table === 'calls' ? ['status'] : []));
    if (!row) {
      if (table === 'realtime_conversations') {
        const live = await trx('realtime_live_sessions').where({ id }).first('workspace_id');
        if (live) return workspaceId !== null && live.workspace_id !== workspaceId ? 'other_workspace' : 'live';
      }
      return 'not_found';
    }
    if (workspaceId !== null && row.workspace_id !== workspaceId) return 'other_workspace';
    if (row.erased_at) return 'already_erased';
    if (table === 'calls' && LIVE_CALL_STATUSES.includes(row.status)) return 'live';
    const ws = row.workspace_id as string;
    await trx(table)
      .where({ id, workspace_id: ws })
      .update({ ...TOMBSTONE[table], erased_at: at, ...(table === 'calls' ? { updated_at: at } : {}) });
    await trx('conversation_events').where({ workspace_id: ws, conversation_id: id }).delete();
    // A call's transfer attempts carry the reason the agent gave in its words.
    if (table === 'calls') await trx('call_transfers').where({ workspace_id: ws, call_id: id }).delete();
    await trx('conversation_event_heads').where({ workspace_id: ws, conversation_id: id }).delete();
    // Deliveries go with their events (a foreign key); deleted by call id too, whatever their event.
    await trx('webhook_deliveries').where({ workspace_id: ws, call_id: id }).delete();
    await trx('webhook_events').where({ workspace_id: ws, call_id: id }).delete();
    // A create's idempotent reply carries the call's variables and first message (kept IDEMPOTENCY_TTL_MS).
    await trx('idempotency_keys').where({ scope: ws }).andWhereRaw(`response_body->>'call_id' = ?`, [id]).delete();
    return 'erased';
  }

  /** Finished conversations of workspaces with a transcript retention that ended before it, not yet erased (oldest first). */
  async expired(table: ConversationTable, now: Date, limit: number): Promise<Array<{ id: string; workspace_id: string }>> {
    return this.knex(`${table} as c`)
      .join('workspaces as w', 'w.id', 'c.workspace_id')
      .whereNull('c.erased_at')
      .whereNotNull('c.ended_at')
      .whereNotNull('w.transcript_retention_days')
      .andWhereRaw(`c.ended_at < ?::timestamptz - make_interval(days => w.transcript_retention_days)`, [now.toISOString()])
      .orderBy('c.ended_at')
      .limit(limit)
      .select('c.id', 'c.workspace_id');
  }
}
