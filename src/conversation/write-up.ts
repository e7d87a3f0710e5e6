/**
 * The write-up of a finished conversation, shared by web sessions and phone calls: post-call analysis
 * (through the voice service; a failed analysis gives an empty one flagged for review), the structured
 * results of the agent's `analysis` setting, and the fields every conversation record and
 * `call.completed` carry (duration, transcript and its count, interruptions, mean reply latency, tool
 * calls).
 *
 * Structured results (AgentAnalysis in the contract): the data and the success judgement come in the
 * same model request as the fixed fields, so they add no request to the end of a conversation. `data`
 * is kept only when it validates against the agent's schema (checked in the schema pool's worker
 * thread) and `success` only when it is `{met: boolean, reason: string}`; otherwise the field is null
 * with an AnalysisError (`no_conversation`, `analysis_failed`, `invalid_output`) and the conversation
 * is flagged needs_review. Only the parts the setting asked for are present.
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import type { components } from '../../generated/openapi.js';
import { analysisDataProblem } from '../agents/analysis-check.js';
import type { AnalysisStored } from '../agents/store.js';
import type { AnalysisAnswer, AnswerPart, ConversationAnalysis, TranscriptTurn, VoiceService } from '../voice/types.js';
import type { ConversationOutcome, ToolCallRecord } from './engine.js';
import type { Redactor } from '../redaction/redactor.js';

export type AnalysisError = components['schemas']['AnalysisError'];
export type SuccessEvaluation = components['schemas']['SuccessEvaluation'];
export type { AnalysisStored as AnalysisSetting } from '../agents/store.js';

/** The results of an `analysis` setting: `data`/`data_error` when it has a schema, `success`/`success_error` when it has criteria. */
export interface AnalysisResults {
  data?: Record<string, unknown> | null;
  data_error?: AnalysisError | null;
  success?: SuccessEvaluation | null;
  success_error?: AnalysisError | null;
}

export const EMPTY_ANALYSIS: ConversationAnalysis = { summary: '', sentiment: 'neutral', goal_met: false, needs_review: false, unanswered_questions: [] };

/** A post-call analysis and the structured results of the setting it ran with (null: no setting). */
export type WrittenAnalysis = ConversationAnalysis & { results: AnalysisResults | null };

const successSchema = z.object({ met: z.boolean(), reason: z.string().max(2000) }).strict();

/** The fields a setting asks for, all null: a conversation not finished yet, or one whose results cannot be had. */
export function pendingResults(setting: AnalysisStored | null, error: AnalysisError | null = null): AnalysisResults | null {
  if (!setting) return null;
  return {
    ...(setting.schema ? { data: null, data_error: error } : {}),
    ...(setting.success_criteria ? { success: null, success_error: error } : {}),
  };
}

async function dataResult(
  workspaceId: string,
  schema: Record<string, unknown>,
  part: AnswerPart | undefined,
  log: Logger,
): Promise<Pick<AnalysisResults, 'data' | 'data_error'>> {
  if (!part) return { data: null, data_error: { code: 'analysis_failed', message: 'the analysis gave no data' } };
  if (!part.ok) return { data: null, data_error: { code: part.code, message: part.message } };
  let problem: string | null;
  try {
    problem = await analysisDataProblem(workspaceId, schema, part.value);
  } catch (err) {
    log.warn({ err }, 'the extracted data could not be checked against the schema');
    return { data: null, data_error: { code: 'analysis_failed', message: 'the extracted data could not be checked against the schema in time' } };
  }
  if (problem !== null)
    return { data: null, data_error: { code: 'invalid_output', message: `the model's data does not match the schema: ${problem}`.slice(0, 1000) } };
  return { data: part.value as Record<string, unknown>, data_error: null };
}

function successResult(part: AnswerPart | undefined): Pick<AnalysisResults, 'success' | 'success_error'> {
  if (!part) return { success: null, success_error: { code: 'analysis_failed', message: 'the analysis gave no judgement' } };
  if (!part.ok) return { success: null, success_error: { code: part.code, message: part.message } };
  const parsed = successSchema.safeParse(part.value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      success: null,
      success_error: {
        code: 'invalid_output',
        message: `the model's success is not {met: boolean, reason: string}: /${issue.path.join('/')} ${issue.message}`.slice(0, 1000),
      },
    };
  }
  return { success: parsed.data, success_error: null };
}

async function resultsOf(workspaceId: string, setting: AnalysisStored, answer: AnalysisAnswer, log: Logger): Promise<AnalysisResults> {
  return {
    ...(setting.schema ? await dataResult(workspaceId, setting.schema, answer.data, log) : {}),
    ...(setting.success_criteria ? successResult(answer.success) : {}),
  };
}

/**
 * Post-call analysis of a transcript, with the structured results `setting` asks for; nothing said
 * gives the empty analysis (and `no_conversation` results) without asking the model.
 */
export async function analyseConversation(
  voice: Pick<VoiceService, 'analyze'>,
  instruction: string,
  transcript: TranscriptTurn[],
  log: Logger,
  setting: AnalysisStored | null,
  /** Whose conversation: its data is validated in that workspace's turn of the schema pool. */
  workspaceId: string,
  /** The agent's analysis model as the conversation started; null: the service's default. */
  model: string | null = null,
): Promise<WrittenAnalysis> {
  if (!transcript.length) {
    return { ...EMPTY_ANALYSIS, results: pendingResults(setting, { code: 'no_conversation', message: 'nothing was said in the conversation' }) };
  }
  let answer: AnalysisAnswer;
  try {
    answer = await voice.analyze({ instruction, transcript, dataSchema: setting?.schema ?? null, successCriteria: setting?.success_criteria ?? null, model });
  } catch (err) {
    log.warn({ err }, 'post-call analysis failed');
    return { ...EMPTY_ANALYSIS, needs_review: true, results: pendingResults(setting, { code: 'analysis_failed', message: 'the post-call analysis failed' }) };
  }
  const { data: _data, success: _success, ...fixed } = answer;
  return { ...fixed, results: setting ? await resultsOf(workspaceId, setting, answer, log) : null };
}

/** An analysis as kept with the `analysis` redaction target: summary, unanswered questions, `data` and `success.reason` redacted. */
export function redactedAnalysis(r: Redactor, a: WrittenAnalysis): WrittenAnalysis {
  const { summary, unanswered_questions } = r.analysis({ summary: a.summary, unanswered_questions: a.unanswered_questions });
  return { ...a, summary, unanswered_questions, results: a.results && r.analysis(a.results) };
}

/** A result that could not be had or did not validate: the conversation is worth a look. */
function resultsFailed(r: AnalysisResults | null): boolean {
  return [r?.data_error, r?.success_error].some((e) => e && e.code !== 'no_conversation');
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
  /** The structured results; null when the conversation ran without an `analysis` setting. */
  analysis_results: AnalysisResults | null;
}

/** Mean of the measured reply latencies, to 0.1 ms; 0 when none was measured. */
export function meanLatency(latenciesMs: number[]): number {
  if (!latenciesMs.length) return 0;
  return Math.round((latenciesMs.reduce((a, b) => a + b, 0) / latenciesMs.length) * 10) / 10;
}

/**
 * The record fields of a conversation. `talkMs` is the time that counts as its duration (a web
 * session's whole length; a call's time from answer to hang-up). A failed tool call, or a structured
 * result that failed, flags the conversation for review.
 */
export function writeUp(
  outcome: Omit<ConversationOutcome, 'status' | 'endedAt'>,
  talkMs: number,
  analysis: ConversationAnalysis & { results?: AnalysisResults | null },
): ConversationWriteUp {
  const results = analysis.results ?? null;
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
    needs_review: analysis.needs_review || outcome.toolCalls.some((t) => !t.ok) || resultsFailed(results),
    unanswered_questions: analysis.unanswered_questions,
    tool_calls: outcome.toolCalls.length ? outcome.toolCalls : null,
    analysis_results: results,
  };
}
