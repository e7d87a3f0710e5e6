/**
 * Finalisation of a web session: the conversation record (transcript, duration, counts, average reply
 * latency, post-call analysis), usage metered against the workspace's credit, then `call.completed`
 * (provider `web`, call_sid and to_number null, conversation_id the session's `conv_` id).
 */
import type { Logger } from 'pino';
import type { CallCompletedEvent } from '../../generated/asyncapi-types.js';
import type { ConversationAnalysis, VoiceService } from '../voice/types.js';
import { callCompletedPayload } from '../webhooks/payloads.js';
import { sessionCallFacts } from './records.js';
import type { SessionInfo, SessionOutcome } from './bridge.js';
import type { ConversationRow, RealtimeStore } from './store.js';

/** The EventPublisher of src/webhooks/events.ts as realtime uses it. */
export interface CallCompletedPublisher {
  callCompleted(input: { workspaceId: string; callId: string | null; webhookUrl: string | null; payload: CallCompletedEvent }): Promise<unknown>;
}

export interface Metering {
  centsPerMinute: number;
  textCentsPerMinute: number;
}

/** Cents for a session: every started minute at the session kind's rate. */
export function sessionCost(source: SessionInfo['source'], elapsedMs: number, m: Metering): number {
  const rate = source === 'text' ? m.textCentsPerMinute : m.centsPerMinute;
  return Math.ceil(Math.max(0, elapsedMs) / 60_000) * rate;
}

const EMPTY_ANALYSIS: ConversationAnalysis = { summary: '', sentiment: 'neutral', goal_met: false, needs_review: false, unanswered_questions: [] };

export class ConversationFinaliser {
  constructor(
    private readonly store: RealtimeStore,
    private readonly voice: VoiceService,
    private readonly events: CallCompletedPublisher | null,
    private readonly metering: Metering,
    private readonly log: Logger,
  ) {}

  async finalise(info: SessionInfo, instruction: string, outcome: SessionOutcome): Promise<ConversationRow> {
    const elapsedMs = outcome.endedAt.getTime() - info.startedAt.getTime();
    const duration = Math.max(0, Math.round(elapsedMs / 1000));
    const latency = outcome.latenciesMs.length ? outcome.latenciesMs.reduce((a, b) => a + b, 0) / outcome.latenciesMs.length : 0;
    let analysis = EMPTY_ANALYSIS;
    if (outcome.transcript.length) {
      try {
        analysis = await this.voice.analyze({ instruction, transcript: outcome.transcript });
      } catch (err) {
        this.log.warn({ err, sessionId: info.id }, 'post-call analysis failed');
        analysis = { ...EMPTY_ANALYSIS, needs_review: true };
      }
    }
    const row: ConversationRow = {
      id: info.id,
      workspace_id: info.workspaceId,
      agent_id: info.agentId,
      user_id: info.userId,
      source: info.source,
      status: outcome.status,
      first_message: info.firstMessage,
      first_message_delivered: outcome.firstMessageDelivered,
      variables: info.variables,
      started_at: info.startedAt,
      ended_at: outcome.endedAt,
      duration,
      transcript: outcome.transcript,
      message_count: outcome.transcript.length,
      interruption_count: outcome.interruptionCount,
      latency_avg_ms: Math.round(latency * 10) / 10,
      summary: analysis.summary,
      sentiment: analysis.sentiment,
      goal_met: analysis.goal_met,
      needs_review: analysis.needs_review || outcome.toolCalls.some((t) => !t.ok),
      unanswered_questions: analysis.unanswered_questions,
      tool_calls: outcome.toolCalls.length ? outcome.toolCalls : null,
      cost_cents: sessionCost(info.source, elapsedMs, this.metering),
    };
    const payload = callCompletedPayload(sessionCallFacts(row));
    await this.store.saveConversation(row);
    if (this.events) {
      // The session id stands in the deliveries' call column, so its deliveries can be listed.
      await this.events.callCompleted({ workspaceId: row.workspace_id, callId: row.id, webhookUrl: null, payload });
    } else {
      this.log.warn({ sessionId: row.id }, 'no event publisher configured; call.completed not sent');
    }
    this.log.info({ sessionId: row.id, workspaceId: row.workspace_id, status: row.status, duration, costCents: row.cost_cents }, 'realtime session finalised');
    return row;
  }
}
