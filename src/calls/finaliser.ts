/**
 * The end of a call, exactly once: whoever learns that a call is over (the bridge when its media stream
 * ends, a carrier callback, the deadline job, an API cancel) calls `finalise`. One claimant runs the
 * post-call analysis; then, in one transaction, the call becomes terminal (guarded by its live status),
 * its usage is metered (up to what its reservation covered) and its reservation released,
 * `call.completed` is recorded for delivery, its concurrency slot is released and its deadline job
 * removed. A claimant that dies mid-analysis leaves a stale claim that the deadline job takes over, so
 * no call stays live and none is reported twice.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import type { VoiceService } from '../voice/types.js';
import { analyseConversation, redactedAnalysis, writeUp } from '../conversation/write-up.js';
import type { WorkspaceAdmission } from '../workspaces/admission.js';
import type { CallCompletedPublisher } from '../webhooks/events.js';
import type { JobAdd, JobQueue } from '../jobs/queue.js';
import { endTime, finalState } from './lifecycle.js';
import { DEADLINE_JOB } from './job-kinds.js';
import { callCompletedFacts, callRedactor } from './records.js';
import type { RecordingView } from '../recordings/service.js';
import { LIVE_STATUSES, type CallRow, type CallStore, type EndReason } from './store.js';

/** A claim older than this is presumed dead (analysis is bounded well below it). */
export const FINALISE_CLAIM_STALE_MS = 2 * 60 * 1000;

export interface FinaliseOptions {
  /** The deadline passed with no word from the carrier or the instance running the call. */
  forced?: boolean;
  /** Facts the caller knows better than the row (the bridge's end time). */
  endedAt?: Date;
  endReason?: EndReason;
}

/**
 * Runs in the transaction that makes a call terminal (the batch engine records its recipient's
 * outcome); returns the jobs to add, which the finaliser adds in the transaction with its own.
 */
export type FinalisedHook = (call: CallRow, trx: Knex.Transaction) => Promise<JobAdd[]>;

export class CallFinaliser {
  private readonly hooks: FinalisedHook[] = [];
  /** Set once recordings exist (src/service.ts): completes the call's recording and shows it in `call.completed`. */
  recordings: { completeIn(conversationId: string, at: Date, trx: Knex.Transaction): Promise<RecordingView | null> } | null = null;

  constructor(
    private readonly store: CallStore,
    private readonly voice: Pick<VoiceService, 'analyze'>,
    private readonly admission: WorkspaceAdmission,
    private readonly events: CallCompletedPublisher,
    private readonly jobs: JobQueue,
    private readonly clock: Clock,
    private readonly opts: { centsPerMinute: number },
    private readonly log: Logger,
  ) {}

  /** Adds a step to every call's terminal transaction. */
  onFinalised(hook: FinalisedHook): void {
    this.hooks.push(hook);
  }

  /** Finalises the call if it is live and nobody else is finalising it; returns the terminal row when this call did it. */
  async finalise(callId: string, o: FinaliseOptions = {}): Promise<CallRow | undefined> {
    const claimed = await this.store.claimFinalise(callId, FINALISE_CLAIM_STALE_MS);
    if (!claimed) return undefined;
    return this.finaliseClaimed(claimed, o);
  }

  /** Finalises a call whose finalisation claim the caller took (`claimed`: the row as its claim left it). */
  async finaliseClaimed(claimed: CallRow, o: FinaliseOptions = {}): Promise<CallRow | undefined> {
    const callId = claimed.id;
    const row: CallRow = { ...claimed, end_reason_hint: o.endReason ?? claimed.end_reason_hint };
    const { status, endReason } = finalState(row, o.forced ?? false);
    const endedAt = endTime(row, o.forced ?? false, o.endedAt, this.clock.now());
    const talkMs = row.answered_at ? Math.max(0, endedAt.getTime() - new Date(row.answered_at).getTime()) : 0;
    const log = this.log.child({ callId });
    const redactor = callRedactor(row);
    // Made from the stored transcript (redacted when the setting covers it); kept redacted when it covers analysis.
    const made = await analyseConversation(this.voice, row.instruction, row.transcript, log, row.analysis, row.workspace_id, row.analysis_model);
    const analysis = redactor?.covers('analysis') ? redactedAnalysis(redactor, made) : made;
    const w = writeUp(
      {
        transcript: row.transcript,
        transcriptTruncated: row.transcript_truncated,
        interruptionCount: row.interruption_count,
        latenciesMs: row.latencies_ms,
        toolCalls: row.tool_calls,
        firstMessageDelivered: row.first_message_delivered,
      },
      talkMs,
      analysis,
    );
    // Billed up to what its reservation covered (the bridge ends the call when that runs out); no talk
    // time bills nothing, whatever the reservation (not read then).
    const bill = talkMs > 0 ? await this.admission.bill(callId, talkMs, this.opts.centsPerMinute) : { cents: 0, seconds: 0, minutes: 0 };
    const cost = row.answered_at ? bill.cents : 0;
    const final = await this.store.knex.transaction(async (trx) => {
      // The row as claimed: with it the store writes the call's `status` and `end` events in this
      // update's own statement (they assume the carrier outcome it read; src/calls/live-events.ts).
      const done = await this.store.update(
        row,
        {
          status,
          end_reason: endReason,
          ended_at: endedAt,
          duration: w.duration,
          first_message_delivered: w.first_message_delivered,
          summary: w.summary,
          sentiment: w.sentiment,
          goal_met: w.goal_met,
          needs_review: w.needs_review,
          unanswered_questions: w.unanswered_questions,
          analysis_results: w.analysis_results,
          latency_avg_ms: w.latency_avg_ms,
          cost_cents: cost,
          bridge_instance: null,
          stream_token_hash: null,
        },
        LIVE_STATUSES,
        trx,
      );
      if (!done) return undefined;
      // Only a call recorded by its setting can have a recording (none is ever written otherwise).
      const recording = this.recordings && done.recording_enabled ? await this.recordings.completeIn(done.id, endedAt, trx) : null;
      // Attempts still open (the instance stopped while the carrier was asked) are settled by how the call ended.
      await this.store.transfers.settleOpen(done.workspace_id, done.id, done.end_reason === 'transferred', endedAt, trx);
      const transfers = (await this.store.transfers.of(done.workspace_id, [done.id], trx)).get(done.id) ?? [];
      const facts = callCompletedFacts(done, recording, transfers);
      await this.events.callCompleted(
        {
          workspaceId: done.workspace_id,
          callId: done.id,
          webhookUrl: done.webhook_url,
          batchId: done.batch_id,
          payload: redactor?.covers('webhooks') ? redactor.content(facts) : facts,
        },
        trx,
      );
      const jobs: JobAdd[] = [];
      for (const hook of this.hooks) jobs.push(...(await hook(done, trx)));
      // The charge takes the workspace's admission lock: after the hooks' rows (a batch row), in the
      // order a batch's dispatch round takes them, so the two never wait on each other.
      await this.admission.meter(
        {
          workspaceId: done.workspace_id,
          kind: 'phone_call',
          refId: done.id,
          agentId: done.agent_id,
          seconds: Math.min(done.duration, bill.seconds),
          minutes: row.answered_at ? bill.minutes : 0,
          cents: cost,
          startedAt: new Date(done.created_at),
        },
        trx,
        // Its concurrency slot goes with its reservation (the same statement).
        { releaseSlot: true },
      );
      // The hooks' jobs and the deadline job's removal in one statement.
      await this.jobs.change({ add: jobs, remove: [{ kind: DEADLINE_JOB, payload: { call_id: done.id } }] }, trx);
      return done;
    });
    if (final) log.info({ status: final.status, endReason: final.end_reason, duration: final.duration, forced: o.forced ?? false }, 'call finalised');
    return final;
  }
}
