/** Recordings and their chunk index in PostgreSQL; every read by conversation id is checked against the workspace by the service. */
import type { Knex } from 'knex';

export type RecordingKind = 'phone_call' | 'web_session';
export type RemovedReason = 'deleted' | 'expired';
/** How chunks hold samples (migration 031): PCM16 as served, or a phone call's mu-law as carried. */
export type RecordingEncoding = 'pcm16' | 'mulaw';

export interface RecordingRow {
  id: string;
  workspace_id: string;
  conversation_id: string;
  kind: RecordingKind;
  storage: 'postgres' | 's3';
  sample_rate: number;
  channels: number;
  encoding: RecordingEncoding;
  /** Bytes of the served PCM16 written so far (chunks' `offset` and `size` count these too). */
  bytes: number;
  chunks: number;
  truncated: boolean;
  status: 'recording' | 'completed' | 'removed';
  removed_reason: RemovedReason | null;
  created_at: Date;
  completed_at: Date | null;
  removed_at: Date | null;
}

export interface ChunkRow {
  seq: number;
  offset: number;
  size: number;
  data: Buffer | null;
}

const num = (r: RecordingRow): RecordingRow => ({ ...r, bytes: Number(r.bytes) });

export class RecordingStore {
  constructor(readonly knex: Knex) {}

  async create(
    row: Pick<RecordingRow, 'id' | 'workspace_id' | 'conversation_id' | 'kind' | 'storage' | 'sample_rate' | 'channels' | 'encoding' | 'created_at'>,
  ): Promise<RecordingRow> {
    const [inserted] = await this.knex('recordings').insert(row).onConflict('conversation_id').ignore().returning('*');
    if (inserted) return num(inserted);
    return num(await this.knex('recordings').where({ conversation_id: row.conversation_id }).first());
  }

  /**
   * Adds chunk `seq` at `offset` and moves the recording's size past it, in one statement (atomic as a
   * transaction would be, without holding a connection across four round trips: every recorded
   * conversation writes one a second).
   */
  async appendChunk(recordingId: string, chunk: { seq: number; offset: number; size: number; data: Buffer | null }, truncated: boolean): Promise<void> {
    await this.knex.raw(
      `with chunk as (
         insert into recording_chunks (recording_id, seq, "offset", size, data) values (?, ?, ?, ?, ?)
       )
       update recordings set bytes = ?, chunks = ?, truncated = ? where id = ?`,
      [recordingId, chunk.seq, chunk.offset, chunk.size, chunk.data, chunk.offset + chunk.size, chunk.seq + 1, truncated, recordingId],
    );
  }

  async markTruncated(recordingId: string): Promise<void> {
    await this.knex('recordings').where({ id: recordingId }).update({ truncated: true });
  }

  async complete(recordingId: string, at: Date): Promise<void> {
    await this.knex('recordings').where({ id: recordingId, status: 'recording' }).update({ status: 'completed', completed_at: at });
  }

  /** Completes the recording of a conversation that ended (its instance may have died mid-write). */
  /** Completes the conversation's recording still being written; returns it when there was one. */
  async completeConversation(conversationId: string, at: Date, trx?: Knex.Transaction): Promise<RecordingRow | undefined> {
    const [row] = await (trx ?? this.knex)('recordings')
      .where({ conversation_id: conversationId, status: 'recording' })
      .update({ status: 'completed', completed_at: at })
      .returning('*');
    return row ? num(row) : undefined;
  }

  async byConversation(conversationId: string, trx?: Knex.Transaction): Promise<RecordingRow | undefined> {
    const row = await (trx ?? this.knex)('recordings').where({ conversation_id: conversationId }).first();
    return row ? num(row) : undefined;
  }

  async byConversations(ids: string[]): Promise<RecordingRow[]> {
    if (!ids.length) return [];
    return (await this.knex('recordings').whereIn('conversation_id', ids)).map(num);
  }

  /** Up to `limit` chunks holding bytes at or after `from`, in order. */
  async chunksFrom(recordingId: string, from: number, limit: number): Promise<ChunkRow[]> {
    const rows = await this.knex('recording_chunks')
      .where({ recording_id: recordingId })
      .andWhereRaw('"offset" + size > ?', [from])
      .orderBy('seq')
      .limit(limit)
      .select('seq', 'offset', 'size', 'data');
    return rows.map((r) => ({ ...r, offset: Number(r.offset) }));
  }

  async chunkSeqs(recordingId: string): Promise<number[]> {
    return (await this.knex('recording_chunks').where({ recording_id: recordingId }).orderBy('seq').select('seq')).map((r) => r.seq as number);
  }

  /** Marks the recording removed (why and when) and drops its chunk index; only from `completed`. */
  async remove(recordingId: string, reason: RemovedReason, at: Date): Promise<boolean> {
    return this.knex.transaction(async (trx) => {
      const n = await trx('recordings')
        .where({ id: recordingId, status: 'completed' })
        .update({ status: 'removed', removed_reason: reason, removed_at: at, bytes: 0, chunks: 0 });
      if (!n) return false;
      await trx('recording_chunks').where({ recording_id: recordingId }).delete();
      return true;
    });
  }

  /** Completed recordings older than their workspace's retention, oldest first. */
  async expired(now: Date, defaultDays: number, limit: number): Promise<RecordingRow[]> {
    const rows = await this.knex('recordings as r')
      .join('workspaces as w', 'w.id', 'r.workspace_id')
      .where('r.status', 'completed')
      .andWhereRaw(`r.created_at < ?::timestamptz - make_interval(days => coalesce(w.recording_retention_days, ?))`, [now.toISOString(), defaultDays])
      .orderBy('r.created_at')
      .limit(limit)
      .select('r.*');
    return rows.map(num);
  }

  /** The workspace's retention rules: its recordings' days, and its conversations' content's (src/erasure applies those). */
  async retention(workspaceId: string): Promise<{ days: number | null; transcriptDays: number | null; updatedAt: Date | null }> {
    const row = await this.knex('workspaces')
      .where({ id: workspaceId })
      .first('recording_retention_days', 'transcript_retention_days', 'recording_settings_updated_at');
    return {
      days: row?.recording_retention_days ?? null,
      transcriptDays: row?.transcript_retention_days ?? null,
      updatedAt: row?.recording_settings_updated_at ?? null,
    };
  }

  /** Sets the rules given (a key left out keeps its value). */
  async setRetention(workspaceId: string, change: { days?: number | null; transcriptDays?: number | null }, at: Date): Promise<void> {
    await this.knex('workspaces')
      .where({ id: workspaceId })
      .update({
        ...(change.days !== undefined ? { recording_retention_days: change.days } : {}),
        ...(change.transcriptDays !== undefined ? { transcript_retention_days: change.transcriptDays } : {}),
        recording_settings_updated_at: at,
      });
  }
}
