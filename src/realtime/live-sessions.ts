/**
 * Live web sessions kept durable while they run. A session gets its `realtime_live_sessions` row at
 * admission; the bridge's conversation is saved into it as it grows (debounced, like a phone call's
 * progress), and this instance renews `alive_at` of its sessions every heartbeat. The row goes in the
 * transaction that writes the session's record. A row whose `alive_at` is older than the lease expiry
 * belongs to a dead instance: any instance claims it (FOR UPDATE SKIP LOCKED, so one does) and
 * finalises it from what was saved (ConversationFinaliser.finaliseOrphan).
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { ConversationOutcome } from '../conversation/engine.js';
import type { TranscriptTurn } from '../voice/types.js';
import type { AnalysisSetting } from '../conversation/write-up.js';
import type { Source } from './store.js';

export type Progress = Omit<ConversationOutcome, 'status' | 'endedAt'>;

export interface LiveSessionRow {
  id: string;
  workspace_id: string;
  agent_id: string;
  user_id: string;
  source: Source;
  instruction: string;
  first_message: string | null;
  variables: Record<string, string>;
  analysis: AnalysisSetting | null;
  started_at: Date;
  alive_at: Date;
  transcript: TranscriptTurn[];
  transcript_truncated: boolean;
  interruption_count: number;
  latencies_ms: number[];
  tool_calls: ConversationOutcome['toolCalls'];
  first_message_delivered: boolean;
  /** Whether the session records (its recording is completed when an orphan is finalised). */
  recording_enabled: boolean;
}

export type NewLiveSession = Pick<
  LiveSessionRow,
  'id' | 'workspace_id' | 'agent_id' | 'user_id' | 'source' | 'instruction' | 'first_message' | 'variables' | 'analysis' | 'started_at' | 'recording_enabled'
>;

/** A progress save waits this long for more to save with it (a burst of turns is one write). */
const SAVE_DEBOUNCE_MS = 250;

export class LiveSessions {
  private readonly local = new Map<string, { opened: Promise<void>; timer?: NodeJS.Timeout; saving: Promise<void>; read?: () => Progress; ending?: boolean }>();

  constructor(
    private readonly db: Knex,
    private readonly log: Logger,
  ) {}

  /** Records a session that just started; its later saves wait for this insert. */
  open(row: NewLiveSession): void {
    const opened = this.db('realtime_live_sessions')
      .insert({ ...row, variables: JSON.stringify(row.variables), analysis: row.analysis ? JSON.stringify(row.analysis) : null })
      .then(() => undefined)
      .catch((err) => this.log.warn({ err, sessionId: row.id }, 'could not record the live session; a crash would lose it'));
    this.local.set(row.id, { opened, saving: opened });
  }

  /** Saves `read()` soon (once for a burst of changes). */
  changed(id: string, read: () => Progress): void {
    const s = this.local.get(id);
    if (!s || s.ending) return;
    s.read = read;
    if (s.timer) return;
    s.timer = setTimeout(() => {
      s.timer = undefined;
      s.saving = s.saving.then(() => this.save(id, read())).catch((err) => this.log.warn({ err, sessionId: id }, 'could not save session progress'));
    }, SAVE_DEBOUNCE_MS);
  }

  private async save(id: string, p: Progress): Promise<void> {
    await this.db('realtime_live_sessions')
      .where({ id })
      .update({
        transcript: JSON.stringify(p.transcript),
        transcript_truncated: p.transcriptTruncated,
        interruption_count: p.interruptionCount,
        latencies_ms: JSON.stringify(p.latenciesMs),
        tool_calls: JSON.stringify(p.toolCalls),
        first_message_delivered: p.firstMessageDelivered,
      });
  }

  /**
   * The session is ending here: no more saves; resolves once earlier writes are done. Its row is still
   * renewed until forget(): writing its record (the analysis by the voice service) can outlast the
   * lease expiry, and another instance must not take a session being finalised for a dead one's.
   */
  async settle(id: string): Promise<void> {
    const s = this.local.get(id);
    if (!s) return;
    clearTimeout(s.timer);
    s.ending = true;
    await s.saving;
  }

  /** The session's record is written (or given up): its row is no longer renewed from here. */
  forget(id: string): void {
    this.local.delete(id);
  }

  /** Removes the row in the transaction that writes the record; false when it was already gone (finalised elsewhere). */
  async remove(id: string, trx: Knex.Transaction): Promise<boolean> {
    return (await trx('realtime_live_sessions').where({ id }).delete()) > 0;
  }

  /** Heartbeat: this instance is alive for each of its sessions (database clock). */
  async renew(): Promise<void> {
    const ids = [...this.local.keys()];
    if (ids.length) await this.db('realtime_live_sessions').whereIn('id', ids).update({ alive_at: this.db.fn.now() });
  }

  /**
   * Runs `finalise` on one session not renewed for `expiryMs`, holding its row (other instances skip
   * it) in `finalise`'s transaction; false when there is none.
   */
  async claimOrphan(expiryMs: number, finalise: (row: LiveSessionRow, trx: Knex.Transaction) => Promise<void>): Promise<boolean> {
    return this.db.transaction(async (trx) => {
      const row = (await trx('realtime_live_sessions')
        .where('alive_at', '<', trx.raw(`now() - ? * interval '1 millisecond'`, [expiryMs]))
        .orderBy('alive_at')
        .forUpdate()
        .skipLocked()
        .first()) as LiveSessionRow | undefined;
      if (!row) return false;
      await finalise(row, trx);
      await trx('realtime_live_sessions').where({ id: row.id }).delete();
      return true;
    });
  }
}
