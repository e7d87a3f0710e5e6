/**
 * Live web sessions kept durable while they run. A session gets its `realtime_live_sessions` row at
 * admission; the bridge's conversation is saved into it as it grows (every session's changes
 * together at each tick, as phone calls' are: src/conversation/progress-saves.ts), and this instance
 * renews `alive_at` of its sessions every heartbeat. The row goes in the transaction that writes the
 * session's record. A row whose `alive_at` is older than the lease expiry belongs to a dead instance:
 * any instance claims it (FOR UPDATE SKIP LOCKED, so one does) and finalises it from what was saved
 * (ConversationFinaliser.finaliseOrphan).
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { ConversationOutcome } from '../conversation/engine.js';
import type { TranscriptTurn } from '../voice/types.js';
import type { AnalysisSetting } from '../conversation/write-up.js';
import type { RedactionSetting } from '../redaction/setting.js';
import type { Source } from './store.js';
import { ProgressSaves, progressColumns, writeProgress } from '../conversation/progress-saves.js';

export type Progress = Omit<ConversationOutcome, 'status' | 'endedAt'>;

export interface LiveSessionRow {
  id: string;
  workspace_id: string;
  agent_id: string;
  /** The agent version the session runs; null for sessions from before 047. */
  agent_version: number | null;
  user_id: string;
  source: Source;
  instruction: string;
  first_message: string | null;
  variables: Record<string, string>;
  analysis: AnalysisSetting | null;
  /** The agent's analysis model as the session started; null: the service's default. */
  analysis_model: string | null;
  redaction: RedactionSetting | null;
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
  | 'id'
  | 'workspace_id'
  | 'agent_id'
  | 'agent_version'
  | 'user_id'
  | 'source'
  | 'instruction'
  | 'first_message'
  | 'variables'
  | 'analysis'
  | 'analysis_model'
  | 'redaction'
  | 'started_at'
  | 'recording_enabled'
>;

interface LocalSession {
  /** The row's insert (saves wait for it: an update before it would find no row). */
  opened: Promise<void>;
  isOpen: boolean;
  /** A change made before the insert was done, saved once it is. */
  early?: () => Progress;
  ending?: boolean;
}

export class LiveSessions {
  private readonly local = new Map<string, LocalSession>();
  /** Every session's progress saves here, one statement a tick. */
  private readonly saves: ProgressSaves;

  constructor(
    private readonly db: Knex,
    private readonly log: Logger,
    /** A session's change is saved within this long (a burst of turns is one write; a crash loses at most this much). */
    saveEveryMs: number,
  ) {
    this.saves = new ProgressSaves((saves) => writeProgress(db, 'realtime_live_sessions', saves), saveEveryMs, log);
  }

  /** Records a session that just started; its saves wait for this insert. */
  open(row: NewLiveSession): void {
    const s: LocalSession = { opened: Promise.resolve(), isOpen: false };
    s.opened = this.db('realtime_live_sessions')
      .insert({
        ...row,
        variables: JSON.stringify(row.variables),
        analysis: row.analysis ? JSON.stringify(row.analysis) : null,
        redaction: row.redaction ? JSON.stringify(row.redaction) : null,
      })
      .then(() => undefined)
      .catch((err) => this.log.warn({ err, sessionId: row.id }, 'could not record the live session; a crash would lose it'))
      .finally(() => {
        s.isOpen = true;
        if (s.early && !s.ending) this.changed(row.id, s.early);
        s.early = undefined;
      });
    this.local.set(row.id, s);
  }

  /** Saves `read()` at the next tick (once for a burst of changes). */
  changed(id: string, read: () => Progress): void {
    const s = this.local.get(id);
    if (!s || s.ending) return;
    if (!s.isOpen) s.early = read;
    else this.saves.changed(id, () => progressColumns(read()));
  }

  /**
   * The session is ending here: no more saves; resolves once earlier writes are done. Its row is still
   * renewed until forget(): writing its record (the analysis by the voice service) can outlast the
   * lease expiry, and another instance must not take a session being finalised for a dead one's.
   */
  async settle(id: string): Promise<void> {
    const s = this.local.get(id);
    if (!s) return;
    s.ending = true;
    await s.opened;
    await this.saves.settle(id);
  }

  /** Stops the saves' timer (the instance is stopping; every session here has settled). */
  stop(): void {
    this.saves.stop();
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
