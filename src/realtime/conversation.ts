/**
 * Finalisation of a web session: the conversation record (the shared write-up of
 * src/conversation/write-up.ts plus user_id and source), its usage metered by workspace admission in
 * the same transaction, then `call.completed` (provider `web`, call_sid and to_number null,
 * conversation_id the session's `conv_` id).
 */
import type { Logger } from 'pino';
import type { VoiceService } from '../voice/types.js';
import { costOf, type WorkspaceAdmission } from '../workspaces/admission.js';
import { analyseConversation, writeUp } from '../conversation/write-up.js';
import type { CallCompletedPublisher } from '../webhooks/events.js';
import { callCompletedPayload } from '../webhooks/payloads.js';
import { sessionCallFacts } from './records.js';
import type { SessionInfo, SessionOutcome } from './bridge.js';
import type { ConversationRow, RealtimeStore } from './store.js';

export type { CallCompletedPublisher } from '../webhooks/events.js';

export interface Metering {
  centsPerMinute: number;
  textCentsPerMinute: number;
}

/** Cents for a session: every started minute at the session kind's rate. */
export function sessionCost(source: SessionInfo['source'], elapsedMs: number, m: Metering): number {
  return costOf(elapsedMs, source === 'text' ? m.textCentsPerMinute : m.centsPerMinute);
}

export class ConversationFinaliser {
  constructor(
    private readonly store: RealtimeStore,
    private readonly voice: VoiceService,
    private readonly admission: WorkspaceAdmission,
    private readonly events: CallCompletedPublisher | null,
    private readonly metering: Metering,
    private readonly log: Logger,
  ) {}

  async finalise(info: SessionInfo, instruction: string, outcome: SessionOutcome): Promise<ConversationRow> {
    const elapsedMs = outcome.endedAt.getTime() - info.startedAt.getTime();
    const analysis = await analyseConversation(this.voice, instruction, outcome.transcript, this.log.child({ sessionId: info.id }));
    const w = writeUp(outcome, elapsedMs, analysis);
    const row: ConversationRow = {
      id: info.id,
      workspace_id: info.workspaceId,
      agent_id: info.agentId,
      user_id: info.userId,
      source: info.source,
      status: outcome.status,
      first_message: info.firstMessage,
      first_message_delivered: w.first_message_delivered,
      variables: info.variables,
      started_at: info.startedAt,
      ended_at: outcome.endedAt,
      duration: w.duration,
      transcript: w.transcript,
      message_count: w.message_count,
      interruption_count: w.interruption_count,
      latency_avg_ms: w.latency_avg_ms,
      summary: w.summary,
      sentiment: w.sentiment,
      goal_met: w.goal_met,
      needs_review: w.needs_review,
      unanswered_questions: w.unanswered_questions,
      tool_calls: w.tool_calls,
      cost_cents: sessionCost(info.source, elapsedMs, this.metering),
    };
    const payload = callCompletedPayload(sessionCallFacts(row));
    await this.store.saveConversation(row, (trx) =>
      this.admission.meter({ workspaceId: row.workspace_id, kind: 'web_session', refId: row.id, seconds: row.duration, cents: row.cost_cents, startedAt: row.started_at }, trx),
    );
    if (this.events) {
      // The session id stands in the deliveries' call column, so its deliveries can be listed.
      await this.events.callCompleted({ workspaceId: row.workspace_id, callId: row.id, webhookUrl: null, payload });
    } else {
      this.log.warn({ sessionId: row.id }, 'no event publisher configured; call.completed not sent');
    }
    this.log.info({ sessionId: row.id, workspaceId: row.workspace_id, status: row.status, duration: row.duration, costCents: row.cost_cents }, 'realtime session finalised');
    return row;
  }
}
