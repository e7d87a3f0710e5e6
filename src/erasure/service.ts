/**
 * Erasure of calls and web sessions (issue 36): on request (`deleteCall`, `deleteRealtimeConversation`)
 * and by the workspace's `transcript_retention_days` (a job every TRANSCRIPT_RETENTION_SWEEP_MS, modelled
 * on the recordings' retention job). Both go through `ErasureStore.erase` in one transaction with the
 * recording's rows; the recording's objects (S3) are removed after the commit.
 */
import type { Logger } from 'pino';
import { conflict, otherWorkspace } from '../errors/api-error.js';
import type { Clock } from '../lib/clock.js';
import { jobKind, type JobQueue } from '../jobs/queue.js';
import type { RecordingService } from '../recordings/service.js';
import type { ConversationTable, ErasureStore, EraseOutcome } from './store.js';

export const TRANSCRIPT_RETENTION_JOB = jobKind<Record<string, never>>({
  name: 'transcripts_retention',
  parse: () => ({}),
  key: () => 'transcripts_retention',
  maxAttempts: 3,
});

/** Conversations erased per retention query. */
const SWEEP_BATCH = 100;

export interface ErasureOptions {
  retentionSweepMs: number;
}

/** How each kind of conversation is named in refusals, and found missing. */
export interface ConversationKind {
  table: ConversationTable;
  /** What a refusal calls it ('call', 'web session'). */
  noun: string;
  notFound(id: string): Error;
}

export class ErasureService {
  constructor(
    private readonly store: ErasureStore,
    private readonly recordings: Pick<RecordingService, 'eraseIn'>,
    private readonly clock: Clock,
    private readonly opts: ErasureOptions,
    private readonly log: Logger,
  ) {}

  /** Erases the conversation (null workspace: the retention job's, any workspace); its outcome. */
  private async run(table: ConversationTable, workspaceId: string | null, id: string): Promise<EraseOutcome> {
    let removeObjects: (() => Promise<void>) | null = null;
    const outcome = await this.store.knex.transaction(async (trx) => {
      const o = await this.store.erase(table, workspaceId, id, this.clock.now(), trx);
      if (o === 'erased') removeObjects = await this.recordings.eraseIn(id, trx);
      return o;
    });
    if (removeObjects) await (removeObjects as () => Promise<void>)();
    return outcome;
  }

  /** The request's erasure: 404 / 403 / 409 `conversation_live`; erasing an erased one again is a no-op. */
  async erase(kind: ConversationKind, workspaceId: string, id: string): Promise<void> {
    const outcome = await this.run(kind.table, workspaceId, id);
    if (outcome === 'not_found') throw kind.notFound(id);
    if (outcome === 'other_workspace') throw otherWorkspace(kind.noun);
    if (outcome === 'live')
      throw conflict('conversation_live', `The ${kind.noun} is still live; erase it once it has ended${kind.table === 'calls' ? ' (hang it up first)' : ''}.`);
    if (outcome === 'erased') this.log.info({ conversationId: id, workspaceId }, 'conversation erased');
  }

  /** Erases every finished conversation past its workspace's transcript retention; returns how many. */
  async sweep(): Promise<number> {
    let erased = 0;
    for (const table of ['calls', 'realtime_conversations'] as const) {
      for (;;) {
        const rows = await this.store.expired(table, this.clock.now(), SWEEP_BATCH);
        let progress = 0;
        for (const row of rows) if ((await this.run(table, row.workspace_id, row.id)) === 'erased') progress++;
        erased += progress;
        if (rows.length < SWEEP_BATCH || progress === 0) break;
      }
    }
    if (erased) this.log.info({ erased }, 'conversations past their retention erased');
    return erased;
  }

  /** The retention job: sweeps, then runs again after TRANSCRIPT_RETENTION_SWEEP_MS. */
  register(jobs: JobQueue): { schedule(): Promise<void> } {
    const next = () => new Date(this.clock.now().getTime() + this.opts.retentionSweepMs);
    jobs.register(TRANSCRIPT_RETENTION_JOB, async () => {
      await this.sweep();
      await jobs.add(TRANSCRIPT_RETENTION_JOB, {}, { runAt: next() });
    });
    // A pending run keeps its time (every instance schedules at start; one job exists).
    return { schedule: () => jobs.add(TRANSCRIPT_RETENTION_JOB, {}, { runAt: this.clock.now(), keyMode: 'preserve_run_at' }) };
  }
}
