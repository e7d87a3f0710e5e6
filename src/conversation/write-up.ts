/**
 * The write-up of a finished conversation, shared by web sessions and phone calls: post-call analysis
 * (through the voice service; a failed analysis gives an empty one flagged for review) and the fields
 * every conversation record and `call.completed` carry (duration, transcript and its count,
 * interruptions, mean reply latency, tool calls).
 */
import type { Logger } from 'pino';
import type { ConversationAnalysis, TranscriptTurn, VoiceService } from '../voice/types.js';
import type { ConversationOutcome, ToolCallRecord } from './engine.js';

export const EMPTY_ANALYSIS: ConversationAnalysis = { summary: '', sentiment: 'neutral', goal_met: false, needs_review: false, unanswered_questions: [] };

/** Post-call analysis of a transcript; nothing said gives the empty analysis without asking the model. */
export async function analyseConversation(
  voice: Pick<VoiceService, 'analyze'>,
  instruction: string,
  transcript: TranscriptTurn[],
  log: Logger,
): Promise<ConversationAnalysis> {
  if (!transcript.length) return EMPTY_ANALYSIS;
  try {
    return await voice.analyze({ instruction, transcript });
  } catch (err) {
    log.warn({ err }, 'post-call analysis failed');
    return { ...EMPTY_ANALYSIS, needs_review: true };
  }
}

export interface ConversationWriteUp {
  duration: number;
  transcript: TranscriptTurn[];
  transcript_truncated: boolean;
  message_count: number;
  interruption_count: number;
  latency_avg_ms: number;
  first_message_delivered: boolean;
  summary: string;
  sentiment: ConversationAnalysis['sentiment'];
  goal_met: boolean;
  needs_review: boolean;
  unanswered_questions: string[];
  tool_calls: ToolCallRecord[] | null;
}

/** Mean of the measured reply latencies, to 0.1 ms; 0 when none was measured. */
export function meanLatency(latenciesMs: number[]): number {
  if (!latenciesMs.length) return 0;
  return Math.round((latenciesMs.reduce((a, b) => a + b, 0) / latenciesMs.length) * 10) / 10;
}

/**
 * The record fields of a conversation. `talkMs` is the time that counts as its duration (a web
 * session's whole length; a call's time from answer to hang-up). A failed tool call flags the
 * conversation for review.
 */
export function writeUp(outcome: Omit<ConversationOutcome, 'status' | 'endedAt'>, talkMs: number, analysis: ConversationAnalysis): ConversationWriteUp {
  return {
    duration: Math.max(0, Math.round(talkMs / 1000)),
    transcript: outcome.transcript,
    transcript_truncated: outcome.transcriptTruncated,
    message_count: outcome.transcript.length,
    interruption_count: outcome.interruptionCount,
    latency_avg_ms: meanLatency(outcome.latenciesMs),
    first_message_delivered: outcome.firstMessageDelivered,
    summary: analysis.summary,
    sentiment: analysis.sentiment,
    goal_met: analysis.goal_met,
    needs_review: analysis.needs_review || outcome.toolCalls.some((t) => !t.ok),
    unanswered_questions: analysis.unanswered_questions,
    tool_calls: outcome.toolCalls.length ? outcome.toolCalls : null,
  };
}
