/**
 * Recordings: started by a live conversation when its setting says so, shown on the call record and in
 * `call.completed` (metadata and a signed link), served as WAV with `Range`, deleted on request or when
 * the workspace's retention has passed (a job, every RECORDING_RETENTION_SWEEP_MS).
 */
import { Readable } from 'node:stream';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { components } from '../../generated/openapi.js';
import { ApiError, conflict, forbidden } from '../errors/api-error.js';
import type { Clock } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import { jobKind, type JobQueue } from '../jobs/queue.js';
import { mulawToPcm16 } from '../audio/pcm16.js';
import { parseRange } from './range.js';
import type { RecordingLinks } from './signed-url.js';
import type { RecordingStorage } from './storage.js';
import type { RecordingEncoding, RecordingKind, RecordingRow, RecordingStore } from './store.js';
import { TwoChannelRecorder } from './two-channel.js';
import { ClockedTwoChannelRecorder } from './clocked.js';
import { WAV_HEADER_BYTES, wavHeader } from './wav.js';
import { RecordingWriter } from './writer.js';
import { RedactionGate, type AudioSink } from './redaction-gate.js';

export type Recording = components['schemas']['Recording'];
export type RecordingSettings = components['schemas']['RecordingSettings'];
export interface RecordingView {
  recording: Recording;
  recording_url: string;
}

export interface NewRecording {
  workspaceId: string;
  conversationId: string;
  kind: RecordingKind;
  sampleRate: number;
  /** The conversation's redaction setting covers recordings: audio is held until what was said in it is known (redaction-gate.ts). */
  redacted?: boolean;
}

export interface RecordingOptions {
  flushMs: number;
  /** A redacted recording holds undecided audio at most this long; older audio is written as silence. */
  redactionHoldMs: number;
  maxBytes: number;
  retentionDays: number;
  retentionSweepMs: number;
}

export const RETENTION_JOB = jobKind<Record<string, never>>({
  name: 'recordings_retention',
  parse: () => ({}),
  key: () => 'recordings_retention',
  maxAttempts: 3,
});

/** Chunks read from the database per query while streaming (about a second each). */
const READ_BATCH = 16;
/** Recordings removed per retention query. */
const SWEEP_BATCH = 100;

export type NotFoundReason = 'not_enabled' | 'not_started' | 'deleted' | 'expired';

const REASON_TEXT: Record<RecordingKind, Record<NotFoundReason, string>> = {
  phone_call: {
    not_enabled: "recording was off for it (the agent's, call's or batch's recording setting)",
    not_started: 'no audio has been recorded (the conversation was not answered, or has not started yet)',
    deleted: 'its recording was deleted',
    expired: "its recording was removed by the workspace's retention",
  },
  web_session: {
    not_enabled: "recording was off for it (the agent's recording setting when the session started; text sessions are never recorded)",
    not_started: 'no audio has been recorded (the session ended as it started)',
    deleted: 'its recording was deleted',
    expired: "its recording was removed by the workspace's retention",
  },
};

export function recordingNotFound(conversationId: string, reason: NotFoundReason, kind: RecordingKind = 'phone_call'): ApiError<404> {
  return new ApiError(404, 'not_found_error', 'recording_not_found', `${conversationId} has no recording: ${REASON_TEXT[kind][reason]}.`, { reason });
}

/** A conversation whose recording is asked for: its id, kind and whether its recording setting was on. */
export interface RecordedConversation {
  id: string;
  kind: RecordingKind;
  recordingEnabled: boolean;
  /** Erased (src/erasure): its recording went with its content. */
  erased?: boolean;
}

export interface WavReply {
  status: 200 | 206;
  headers: Record<string, string>;
  body: Readable;
}

export class RecordingService {
  constructor(
    readonly store: RecordingStore,
    private readonly storage: RecordingStorage,
    readonly links: RecordingLinks,
    private readonly clock: Clock,
    private readonly opts: RecordingOptions,
    private readonly log: Logger,
  ) {}

  /** Starts recording a conversation in two channels of mu-law, the person's audio its clock (a phone call: a frame every 20 ms). */
  startTwoChannel(c: NewRecording, log: Logger): TwoChannelRecorder {
    return new TwoChannelRecorder(this.sink(c, 'mulaw', log), c.sampleRate);
  }

  /** Starts recording a conversation in two channels of PCM16 on `clock` (a web session: the browser's audio comes in bursts). */
  startClockedTwoChannel(c: NewRecording, clock: Clock, log: Logger): ClockedTwoChannelRecorder {
    return new ClockedTwoChannelRecorder(this.sink(c, 'pcm16', log), c.sampleRate, clock);
  }

  /** Where a recorder writes: the writer, behind a redaction gate when the conversation redacts its recording. */
  private sink(c: NewRecording, encoding: RecordingEncoding, log: Logger): AudioSink {
    const writer = this.writer(c, encoding, log);
    return c.redacted ? new RedactionGate(writer, encoding, Math.round((this.opts.redactionHoldMs * c.sampleRate) / 1000)) : writer;
  }

  /** The recording's writer; its row is written in the background (the first chunk waits for it). */
  private writer(c: NewRecording, encoding: RecordingEncoding, log: Logger): RecordingWriter {
    const row = this.store
      .create({
        id: newId('recording'),
        workspace_id: c.workspaceId,
        conversation_id: c.conversationId,
        kind: c.kind,
        storage: this.storage.kind,
        sample_rate: c.sampleRate,
        channels: 2,
        encoding,
        created_at: this.clock.now(),
      })
      .catch((err) => {
        log.warn({ err: (err as Error).message }, 'recording could not be started; the conversation goes on unrecorded');
        return null;
      });
    return new RecordingWriter(
      row,
      this.store,
      this.storage,
      this.clock,
      { flushMs: this.opts.flushMs, maxBytes: this.opts.maxBytes, encoding, channels: 2 },
      log,
    );
  }

  /** What the call record and `call.completed` show: null when there is no recording (or it was removed). */
  view(row: RecordingRow | undefined): RecordingView | null {
    if (!row || row.status === 'removed') return null;
    const bytesPerSecond = row.sample_rate * row.channels * 2;
    return {
      recording: {
        status: row.status,
        format: 'wav',
        channels: 2,
        sample_rate: row.sample_rate as 8000 | 16000,
        duration: Math.round((row.bytes / bytesPerSecond) * 1000) / 1000,
        size_bytes: WAV_HEADER_BYTES + row.bytes,
        truncated: row.truncated,
        created_at: new Date(row.created_at).toISOString(),
      },
      recording_url: this.links.url(row.conversation_id, row.kind, this.clock.now()),
    };
  }

  /** Completes a conversation's recording in the transaction that ends it (its writer may have died with its instance); its view. */
  async completeIn(conversationId: string, at: Date, trx: Knex.Transaction): Promise<RecordingView | null> {
    const completed = await this.store.completeConversation(conversationId, at, trx);
    return this.view(completed ?? (await this.store.byConversation(conversationId, trx)));
  }

  async viewsOf(conversationIds: string[]): Promise<Map<string, RecordingView>> {
    const out = new Map<string, RecordingView>();
    for (const row of await this.store.byConversations(conversationIds)) {
      const v = this.view(row);
      if (v) out.set(row.conversation_id, v);
    }
    return out;
  }

  /** The conversation's recording as WAV (whole, or the part `range` asks for). */
  async wav(c: RecordedConversation, range: string | undefined): Promise<WavReply> {
    if (c.erased) throw recordingNotFound(c.id, 'deleted', c.kind);
    const row = await this.store.byConversation(c.id);
    if (!row) throw recordingNotFound(c.id, c.recordingEnabled ? 'not_started' : 'not_enabled', c.kind);
    if (row.status === 'removed') throw recordingNotFound(c.id, row.removed_reason ?? 'deleted', c.kind);
    if (row.status === 'recording' && row.bytes === 0) throw recordingNotFound(c.id, 'not_started', c.kind);
    const size = WAV_HEADER_BYTES + row.bytes;
    const r = parseRange(range, size);
    if (r === 'unsatisfiable') {
      throw new ApiError(416, 'invalid_request_error', 'range_not_satisfiable', `The range asks for bytes beyond the file's ${size} bytes.`, {
        param: 'Range',
        headers: { 'Content-Range': `bytes */${size}` },
      });
    }
    const start = r ? r.start : 0;
    const end = r ? r.end : size - 1;
    const headers: Record<string, string> = { 'Accept-Ranges': 'bytes', 'Content-Length': String(end - start + 1) };
    if (r) headers['Content-Range'] = `bytes ${start}-${end}/${size}`;
    return { status: r ? 206 : 200, headers, body: Readable.from(this.bytes(row, start, end + 1)) };
  }

  /** The file's bytes [start, end): the header made from the row, then the chunks, a batch of rows at a time. */
  private async *bytes(row: RecordingRow, start: number, end: number): AsyncGenerator<Buffer> {
    const header = wavHeader(row.bytes, row.sample_rate, row.channels);
    if (start < WAV_HEADER_BYTES) yield header.subarray(start, Math.min(end, WAV_HEADER_BYTES));
    let at = Math.max(0, start - WAV_HEADER_BYTES);
    const stop = end - WAV_HEADER_BYTES;
    while (at < stop) {
      const chunks = await this.store.chunksFrom(row.id, at, READ_BATCH);
      if (!chunks.length) return;
      for (const c of chunks) {
        if (c.offset >= stop) return;
        const stored = await this.storage.get({ workspaceId: row.workspace_id, recordingId: row.id, seq: c.seq }, c.data);
        const data = row.encoding === 'mulaw' ? mulawToPcm16(stored) : stored;
        const from = Math.max(0, at - c.offset);
        const to = Math.min(c.size, stop - c.offset);
        if (to > from) yield data.subarray(from, to);
        at = c.offset + to;
      }
    }
  }

  /** Deletes the recording's audio for good (the row stays, saying why, so a download can tell). */
  async remove(c: RecordedConversation): Promise<void> {
    if (c.erased) throw recordingNotFound(c.id, 'deleted', c.kind);
    const row = await this.store.byConversation(c.id);
    if (!row) throw recordingNotFound(c.id, c.recordingEnabled ? 'not_started' : 'not_enabled', c.kind);
    if (row.status === 'removed') throw recordingNotFound(c.id, row.removed_reason ?? 'deleted', c.kind);
    if (row.status === 'recording') {
      const what = c.kind === 'web_session' ? 'web session' : 'call';
      throw conflict('recording_in_progress', `The ${what} is still in progress; delete its recording once it has ended.`);
    }
    await this.removeRow(row, 'deleted');
  }

  private async removeRow(row: RecordingRow, reason: 'deleted' | 'expired'): Promise<boolean> {
    const chunks = row.chunks;
    if (!(await this.store.remove(row.id, reason, this.clock.now()))) return false;
    const keys = Array.from({ length: chunks }, (_, seq) => ({ workspaceId: row.workspace_id, recordingId: row.id, seq }));
    // After the rows: a crash here leaves unreadable objects behind, never an index pointing at nothing.
    await this.storage.remove(keys).catch((err) => this.log.warn({ err: (err as Error).message, recordingId: row.id }, 'recording objects not removed'));
    return true;
  }

  /**
   * Erases the conversation's recording in `trx` (its erasure, src/erasure): the row goes with its
   * chunk index (a foreign key), so a writer still flushing a last chunk fails rather than bringing it
   * back; returns what removes the chunks' objects, to run once `trx` has committed.
   */
  async eraseIn(conversationId: string, trx: Knex.Transaction): Promise<() => Promise<void>> {
    const [row] = (await trx('recordings').where({ conversation_id: conversationId }).delete().returning(['id', 'workspace_id', 'chunks'])) as RecordingRow[];
    if (!row || !row.chunks) return async () => undefined;
    const keys = Array.from({ length: row.chunks }, (_, seq) => ({ workspaceId: row.workspace_id, recordingId: row.id, seq }));
    return () =>
      this.storage.remove(keys).catch((err) => this.log.warn({ err: (err as Error).message, recordingId: row.id }, 'erased recording objects not removed'));
  }

  /** Removes every recording past its workspace's retention; returns how many. */
  async sweep(): Promise<number> {
    let removed = 0;
    for (;;) {
      const rows = await this.store.expired(this.clock.now(), this.opts.retentionDays, SWEEP_BATCH);
      for (const row of rows) if (await this.removeRow(row, 'expired')) removed++;
      if (rows.length < SWEEP_BATCH) break;
    }
    if (removed) this.log.info({ removed }, 'expired recordings removed');
    return removed;
  }

  /** The retention job: sweeps, then runs again after RECORDING_RETENTION_SWEEP_MS. */
  register(jobs: JobQueue): { schedule(): Promise<void> } {
    const next = () => new Date(this.clock.now().getTime() + this.opts.retentionSweepMs);
    jobs.register(RETENTION_JOB, async () => {
      await this.sweep();
      await jobs.add(RETENTION_JOB, {}, { runAt: next() });
    });
    // A pending run keeps its time (every instance schedules at start; one job exists).
    return { schedule: () => jobs.add(RETENTION_JOB, {}, { runAt: this.clock.now(), keyMode: 'preserve_run_at' }) };
  }

  async settings(workspaceId: string): Promise<RecordingSettings> {
    const r = await this.store.retention(workspaceId);
    return {
      retention_days: r.days ?? this.opts.retentionDays,
      retention_days_default: r.days === null,
      transcript_retention_days: r.transcriptDays,
      updated_at: r.updatedAt ? new Date(r.updatedAt).toISOString() : null,
    };
  }

  async updateSettings(workspaceId: string, body: { retention_days?: number | null; transcript_retention_days?: number | null }): Promise<RecordingSettings> {
    const has = (key: string) => Object.prototype.hasOwnProperty.call(body, key);
    if (has('retention_days') || has('transcript_retention_days')) {
      await this.store.setRetention(
        workspaceId,
        {
          days: has('retention_days') ? (body.retention_days ?? null) : undefined,
          transcriptDays: has('transcript_retention_days') ? (body.transcript_retention_days ?? null) : undefined,
        },
        this.clock.now(),
      );
    }
    return this.settings(workspaceId);
  }

  /** For the signed download: 403 unless the link verifies and has not expired. */
  checkLink(conversationId: string, kind: RecordingKind, expires: number, signature: string): void {
    const verdict = this.links.check(conversationId, expires, signature, this.clock.now());
    if (verdict === 'invalid') throw forbidden('invalid_signature', 'This recording link is not valid.', 'signature');
    if (verdict === 'expired') {
      const record = kind === 'web_session' ? "the web session's record" : 'the call';
      throw forbidden('recording_url_expired', `This recording link has expired; fetch ${record} again for a fresh recording_url.`, 'expires');
    }
  }
}
