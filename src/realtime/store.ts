/** Realtime tokens and the conversation records of web sessions in PostgreSQL. */
import type { Knex } from 'knex';
import { paginate, type Page, type PageParams } from '../lib/pagination.js';
import type { AnalysisResults } from '../conversation/write-up.js';
import type { ConversationSettingsInput } from '../voice/conversation-settings.js';

export type Source = 'voice' | 'camera' | 'screen' | 'text';
export type EndReason =
  | 'client_closed'
  | 'agent_ended'
  | 'idle_timeout'
  | 'time_limit'
  | 'service_error'
  | 'model_refused'
  | 'shutdown'
  | 'instance_lost'
  | 'insufficient_credit'
  | 'plan_limit_reached';

export interface TokenRow {
  token_hash: string;
  workspace_id: string;
  agent_id: string;
  /** The agent version the session runs (named, else published when the token was made); null: a token from before 047. */
  agent_version: number | null;
  user_id: string;
  source: Source;
  expires_at: Date;
  used_at: Date | null;
  created_at: Date;
  /** The API key or dashboard session that minted it (voided with it). */
  minted_by: string | null;
  /** The session's override of the agent's conversation settings; null: the agent's. */
  conversation?: ConversationSettingsInput | null;
}

export interface CreationWindow {
  limit: number;
  windowMs: number;
}

export interface ConversationRow {
  id: string;
  workspace_id: string;
  agent_id: string;
  /** The agent version the session ran; null for sessions from before 047. */
  agent_version: number | null;
  user_id: string;
  source: Source;
  status: 'completed' | 'failed';
  end_reason: EndReason;
  first_message: string | null;
  first_message_delivered: boolean;
  variables: Record<string, string>;
  started_at: Date;
  ended_at: Date;
  duration: number;
  transcript: Array<{ role: 'model' | 'user'; text: string; timestamp: number }>;
  transcript_truncated: boolean;
  message_count: number;
  interruption_count: number;
  latency_avg_ms: number;
  summary: string;
  sentiment: 'positive' | 'neutral' | 'negative';
  goal_met: boolean;
  needs_review: boolean;
  unanswered_questions: string[];
  tool_calls: unknown[] | null;
  /** The structured results of the agent's `analysis` setting; null when it had none. */
  analysis_results: AnalysisResults | null;
  cost_cents: number;
  /** Whether the session was to be recorded (the agent's setting as it started; never for text). */
  recording_enabled: boolean;
  /** When its content was erased (src/erasure): the row is then a tombstone. */
  erased_at?: Date | null;
}

/** What a web session's recording routes need of it, finished or live. */
export interface RecordedSessionRow {
  id: string;
  workspace_id: string;
  recording_enabled: boolean;
  erased_at: Date | null;
}

/** Serialises work of one workspace across every instance on the database (held until the transaction ends). */
function lockWorkspace(trx: Knex.Transaction, purpose: string, workspaceId: string) {
  return trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`${purpose}:${workspaceId}`]);
}

export class RealtimeStore {
  constructor(private readonly db: Knex) {}

  /**
   * Issues a token unless a creation window is full. The issued tokens are what the windows count, and
   * the count and the insert happen under one per-workspace lock, so a refused request uses up nothing
   * and instances sharing the database share the limit.
   * Hand-written rather than rate-limiter-flexible: two limiters (hour and day) cannot refuse together
   * without one of them having consumed a point.
   */
  async issueToken(row: Omit<TokenRow, 'used_at'>, windows: CreationWindow[]): Promise<{ issued: true } | { issued: false; retryAfterMs: number }> {
    return this.db.transaction(async (trx) => {
      await lockWorkspace(trx, 'realtime-create', row.workspace_id);
      let retryAfterMs = 0;
      for (const w of windows) {
        const since = new Date(row.created_at.getTime() - w.windowMs);
        const recent = await trx('realtime_tokens')
          .where('workspace_id', row.workspace_id)
          .where('created_at', '>', since)
          .orderBy('created_at', 'desc')
          .offset(w.limit - 1)
          .limit(1)
          .first('created_at');
        // The limit-th most recent creation must leave the window before another one fits.
        if (recent) retryAfterMs = Math.max(retryAfterMs, (recent.created_at as Date).getTime() + w.windowMs - row.created_at.getTime());
      }
      if (retryAfterMs > 0) return { issued: false as const, retryAfterMs };
      await trx('realtime_tokens').insert({ ...row, conversation: row.conversation ? JSON.stringify(row.conversation) : null });
      return { issued: true as const };
    });
  }

  /** Tokens the workspace created after `since` (what the per-workspace creation limit counts). */
  async tokensCreatedSince(workspaceId: string, since: Date): Promise<number> {
    const [{ count }] = await this.db('realtime_tokens')
      .where('workspace_id', workspaceId)
      .where('created_at', '>', since)
      .count<{ count: string }[]>('* as count');
    return Number(count);
  }

  /** Marks the token used (first attempt wins, even a failing one) and returns it; undefined if unknown or used. */
  async redeemToken(tokenHash: string, now: Date): Promise<TokenRow | undefined> {
    const [row] = await this.db('realtime_tokens').where({ token_hash: tokenHash }).whereNull('used_at').update({ used_at: now }).returning('*');
    return row;
  }

  /** Removes tokens older than the longest rate-limit window (they count for nothing any more). */
  async pruneTokens(before: Date): Promise<void> {
    await this.db('realtime_tokens').where('created_at', '<', before).delete();
  }

  /**
   * Stores the record unless one exists (false then); `alongside` runs in the same transaction (the
   * usage charge and the event commit with it). In `outer` when given.
   */
  async saveConversation(row: ConversationRow, alongside: (trx: Knex.Transaction) => Promise<unknown>, outer?: Knex.Transaction): Promise<boolean> {
    const run = async (trx: Knex.Transaction) => {
      const inserted = await trx('realtime_conversations')
        .insert({
          ...row,
          variables: JSON.stringify(row.variables),
          transcript: JSON.stringify(row.transcript),
          unanswered_questions: JSON.stringify(row.unanswered_questions),
          tool_calls: row.tool_calls ? JSON.stringify(row.tool_calls) : null,
          analysis_results: row.analysis_results ? JSON.stringify(row.analysis_results) : null,
        })
        .onConflict('id')
        .ignore()
        .returning('id');
      if (!inserted.length) return false;
      await alongside(trx);
      return true;
    };
    return outer ? run(outer) : this.db.transaction(run);
  }

  /** The workspace of a live session (one still running, or whose instance died and is not yet finalised). */
  async liveSessionWorkspace(id: string): Promise<string | undefined> {
    const row = await this.db('realtime_live_sessions').where({ id }).first('workspace_id');
    return row?.workspace_id as string | undefined;
  }

  /** A web session finished or still live (one statement: a session being finalised is found either way). */
  async recordedSession(id: string): Promise<RecordedSessionRow | undefined> {
    const { rows } = await this.db.raw<{ rows: RecordedSessionRow[] }>(
      `select id, workspace_id, recording_enabled, erased_at from realtime_conversations where id = ?
       union all select id, workspace_id, recording_enabled, null from realtime_live_sessions where id = ?
       limit 1`,
      [id, id],
    );
    return rows[0];
  }

  getConversation(id: string): Promise<ConversationRow | undefined> {
    return this.db('realtime_conversations').where({ id }).first();
  }

  /** A page of the workspace's records, newest first (ids are time-ordered), optionally by agent and user. */
  listConversations(workspaceId: string, params: PageParams & { agent_id?: string; user_id?: string }): Promise<Page<ConversationRow>> {
    const query = this.db('realtime_conversations').where({ workspace_id: workspaceId }).select('*');
    if (params.agent_id !== undefined) query.where('agent_id', params.agent_id);
    if (params.user_id !== undefined) query.where('user_id', params.user_id);
    return paginate<ConversationRow, ConversationRow>(query, params, (r) => r);
  }
}
