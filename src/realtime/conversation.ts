/**
 * Finalisation of a web session, exactly once: the conversation record (the shared write-up of
 * src/conversation/write-up.ts plus user_id, source and end_reason), its usage metered by workspace
 * admission (up to what its reservation covered, which the charge releases) and its `call.completed`
 * (provider `web`, call_sid and to_number null, conversation_id the session's `conv_` id) in one
 * transaction, which also removes the session's live row. Whoever inserts
 * the record first (the instance that ran the session, or one finalising it as an orphan) does the rest.
 */
import { NO_LINKS } from '../agents/service.js';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { VoiceService } from '../voice/types.js';
import type { WorkspaceAdmission } from '../workspaces/admission.js';
import { analyseConversation, redactedAnalysis, writeUp } from '../conversation/write-up.js';
import { Redactor } from '../redaction/redactor.js';
import type { CallCompletedPublisher } from '../webhooks/events.js';
import { callCompletedPayload } from '../webhooks/payloads.js';
import { sessionCallFacts } from './records.js';
import type { SessionInfo, SessionOutcome } from './bridge.js';
import type { ConversationRow, EndReason, RealtimeStore } from './store.js';
import type { LiveSessionRow, LiveSessions, Progress } from './live-sessions.js';
import type { LiveEventWriter } from '../events/writer.js';
import type { RecordingService } from '../recordings/service.js';

export type { CallCompletedPublisher } from '../webhooks/events.js';

export interface Metering {
  centsPerMinute: number;
  textCentsPerMinute: number;
}

/** The per-minute price of a session kind. */
export function sessionPrice(source: SessionInfo['source'], m: Metering): number {
  return source === 'text' ? m.textCentsPerMinute : m.centsPerMinute;
}

export class ConversationFinaliser {
  /** Set once live events exist (src/realtime/index.ts): the session's status and `end` on its event stream. */
  live: LiveEventWriter | null = null;
  /** Completes a session's recording and shows it in `call.completed` (null: recordings are not set up). */
  recordings: Pick<RecordingService, 'completeIn'> | null = null;

  constructor(
    private readonly store: RealtimeStore,
    private readonly sessions: LiveSessions,
    private readonly voice: VoiceService,
    private readonly admission: WorkspaceAdmission,
    private readonly events: CallCompletedPublisher | null,
    private readonly metering: Metering,
    private readonly log: Logger,
  ) {}

  /** A session started: it is durable from now on, its conversation saved as it grows. */
  track(info: SessionInfo, instruction: string, progress: (onChange: () => void) => () => Progress): void {
    this.sessions.open({
      id: info.id,
      workspace_id: info.workspaceId,
      agent_id: info.agentId,
      agent_version: info.agentVersion,
      user_id: info.userId,
      source: info.source,
      instruction,
      first_message: info.firstMessage,
      variables: info.variables,
      analysis: info.analysis,
      analysis_model: info.analysisModel,
      redaction: info.redaction,
      started_at: info.startedAt,
      recording_enabled: info.recording,
    });
    const read = progress(() => this.sessions.changed(info.id, read));
    this.live?.append(info.workspaceId, info.id, 'status', {
      agent_version: info.agentVersion,
      status: 'in_progress',
      call_status: null,
      end_reason: null,
      reason: null,
    });
  }

  /** The session ended here: its record, usage and `call.completed`; undefined when another instance had finalised it. */
  async finalise(info: SessionInfo, instruction: string, outcome: SessionOutcome): Promise<ConversationRow | undefined> {
    await this.sessions.settle(info.id);
    // The session's queued live events are written before its end.
    await this.live?.flush();
    const elapsedMs = outcome.endedAt.getTime() - info.startedAt.getTime();
    try {
      return await this.record(info, instruction, outcome, outcome.endReason, elapsedMs);
    } finally {
      this.sessions.forget(info.id);
    }
  }

  /**
   * A session whose instance died (its row not renewed for the lease expiry), in the transaction that
   * holds the row: recorded as `failed`/`instance_lost` from what was saved, ended and billed at the
   * last moment the instance was known alive.
   */
  async finaliseOrphan(row: LiveSessionRow, trx: Knex.Transaction): Promise<void> {
    const info: SessionInfo = {
      id: row.id,
      workspaceId: row.workspace_id,
      agentId: row.agent_id,
      // Recorded, not run: no tool is called for it.
      links: NO_LINKS,
      agentVersion: row.agent_version,
      userId: row.user_id,
      source: row.source,
      startedAt: new Date(row.started_at),
      firstMessage: row.first_message,
      variables: row.variables,
      analysis: row.analysis,
      analysisModel: row.analysis_model,
      recording: row.recording_enabled,
      redaction: row.redaction,
    };
    const endedAt = new Date(row.alive_at);
    const outcome: SessionOutcome = {
      status: 'failed',
      endReason: 'instance_lost',
      endedAt,
      transcript: row.transcript,
      transcriptTruncated: row.transcript_truncated,
      interruptionCount: row.interruption_count,
      latenciesMs: row.latencies_ms,
      toolCalls: row.tool_calls,
      firstMessageDelivered: row.first_message_delivered,
    };
    await this.record(info, row.instruction, outcome, 'instance_lost', Math.max(0, endedAt.getTime() - info.startedAt.getTime()), trx);
    await this.admission.slots.releaseFixed(row.id, trx);
  }

  private async record(
    info: SessionInfo,
    instruction: string,
    outcome: SessionOutcome,
    endReason: EndReason,
    elapsedMs: number,
    outer?: Knex.Transaction,
  ): Promise<ConversationRow | undefined> {
    const redactor = Redactor.of(info.redaction);
    // Made from the transcript as kept (redacted when the setting covers it); kept redacted when it covers analysis.
    const made = await analyseConversation(
      this.voice,
      instruction,
      outcome.transcript,
      this.log.child({ sessionId: info.id }),
      info.analysis,
      info.workspaceId,
      info.analysisModel,
    );
    const analysis = redactor?.covers('analysis') ? redactedAnalysis(redactor, made) : made;
    const w = writeUp(outcome, elapsedMs, analysis);
    // Billed up to what its reservation covered (the session is closed when that runs out).
    const bill = await this.admission.bill(info.id, elapsedMs, sessionPrice(info.source, this.metering), outer);
    const row: ConversationRow = {
      id: info.id,
      workspace_id: info.workspaceId,
      agent_id: info.agentId,
      agent_version: info.agentVersion,
      user_id: info.userId,
      source: info.source,
      status: outcome.status,
      end_reason: endReason,
      first_message: info.firstMessage,
      first_message_delivered: w.first_message_delivered,
      variables: info.variables,
      started_at: info.startedAt,
      ended_at: outcome.endedAt,
      duration: w.duration,
      transcript: w.transcript,
      transcript_truncated: w.transcript_truncated,
      message_count: w.message_count,
      interruption_count: w.interruption_count,
      latency_avg_ms: w.latency_avg_ms,
      summary: w.summary,
      sentiment: w.sentiment,
      goal_met: w.goal_met,
      needs_review: w.needs_review,
      unanswered_questions: w.unanswered_questions,
      tool_calls: w.tool_calls,
      analysis_results: w.analysis_results,
      cost_cents: bill.cents,
      recording_enabled: info.recording,
    };
    const saved = await this.store.saveConversation(
      row,
      async (trx) => {
        await this.sessions.remove(row.id, trx);
        // Its recording ends with it (also when its instance died mid-write) and is shown in call.completed.
        const recording = this.recordings ? await this.recordings.completeIn(row.id, row.ended_at, trx) : null;
        const facts = sessionCallFacts(row, recording);
        const payload = callCompletedPayload(redactor?.covers('webhooks') ? redactor.content(facts) : facts);
        await this.admission.meter(
          {
            workspaceId: row.workspace_id,
            kind: 'web_session',
            refId: row.id,
            agentId: row.agent_id,
            seconds: Math.min(row.duration, bill.seconds),
            minutes: bill.minutes,
            cents: row.cost_cents,
            startedAt: row.started_at,
          },
          trx,
        );
        // The session id stands in the deliveries' call column, so its deliveries can be listed.
        if (this.events) await this.events.callCompleted({ workspaceId: row.workspace_id, callId: row.id, webhookUrl: null, payload }, trx);
        else this.log.warn({ sessionId: row.id }, 'no event publisher configured; call.completed not sent');
        // The stream's last events, written with the record: a stream ends once the record is final.
        await this.live?.writeIn(trx, [
          {
            workspaceId: row.workspace_id,
            conversationId: row.id,
            type: 'status',
            data: { agent_version: row.agent_version, status: 'ended', call_status: row.status, end_reason: row.end_reason, reason: null },
          },
          {
            workspaceId: row.workspace_id,
            conversationId: row.id,
            type: 'end',
            data: { status: row.status, end_reason: row.end_reason, timestamp: row.ended_at.getTime() / 1000 },
          },
        ]);
      },
      outer,
    );
    if (!saved) {
      this.log.info({ sessionId: row.id }, 'realtime session had already been finalised by another instance');
      return undefined;
    }
    this.log.info(
      { sessionId: row.id, workspaceId: row.workspace_id, status: row.status, endReason, duration: row.duration, costCents: row.cost_cents },
      'realtime session finalised',
    );
    return row;
  }
}
