/**
 * The voice service as the rest of the system sees it: one live conversation with the model, fed with
 * user audio (PCM16 LE 16 kHz), images (JPEG) and text, answering with agent audio (PCM16 LE 24 kHz),
 * transcripts, tool calls, turn and interruption events, and the end of the conversation.
 * Implemented by the Gemini Live adapter (gemini-live.ts), which talks to VOICE_SERVICE_URL or to the
 * sandbox voice service (sandbox/) started in-process when that is unset.
 */
import type { ConversationSettings } from './conversation-settings.js';

export interface ToolDeclaration {
  name: string;
  description: string;
  /** JSON Schema of the arguments (an object schema). */
  parameters: Record<string, unknown>;
}

export interface VoiceSessionConfig {
  /** System instruction of the agent, placeholders already filled (src/contract/placeholders.ts). */
  instruction: string;
  /** What the agent says first, placeholders already filled; null: the agent waits for the user to speak first. */
  firstMessage: string | null;
  /** The live model; null or absent: the adapter's default (`VOICE_MODEL`). */
  model?: string | null;
  voiceId: string | null;
  language: string | null;
  languageCode: string | null;
  tools: ToolDeclaration[];
  /** The agent may end the conversation (the model gets an `end_conversation` tool). */
  canEndConversation: boolean;
  /** For logs and the sandbox: what kind of session this is. */
  source: 'voice' | 'camera' | 'screen' | 'text' | 'phone';
  /**
   * Turn detection and interruptions (the agent's `conversation` settings, src/conversation/settings.ts),
   * sent in the setup; null or absent: the voice service's defaults.
   */
  conversation?: ConversationSettings | null;
  /**
   * Benchmarks (scripts/bench/turn-latency.ts): called with `process.hrtime.bigint()` taken on receipt
   * of each voice-service message that carries agent audio, before the message is parsed.
   */
  onAudioReceived?: (at: bigint) => void;
}

export interface ToolCallRequest {
  id: string;
  name: string;
  args: Record<string, unknown>;
}

export interface ToolCallResponse {
  id: string;
  name: string;
  response: Record<string, unknown>;
}

export type VoiceEvent =
  /** Agent speech, PCM16 LE mono 24 kHz. */
  | { type: 'audio'; pcm: Buffer }
  /** What the user said so far in the current turn (whole utterance, not a delta). */
  | { type: 'input_transcript'; text: string; final: boolean }
  /** What the agent said so far in the current turn (whole utterance, not a delta). */
  | { type: 'output_transcript'; text: string }
  /** Agent reply as text (text sessions). */
  | { type: 'text'; text: string }
  | { type: 'turn_complete' }
  /** The user barged in; queued agent audio must be dropped. */
  | { type: 'interrupted' }
  | { type: 'tool_call'; calls: ToolCallRequest[] }
  | { type: 'tool_call_cancellation'; ids: string[] }
  /** The agent ended the conversation (only when canEndConversation). */
  | { type: 'end_conversation' }
  /** The voice service could not be reached after the bounded retries; `closed` follows. */
  | { type: 'unavailable'; message: string }
  /** Always the last event, once: after `unavailable`, or when close() is called. */
  | { type: 'closed' };

export interface VoiceSession {
  sendAudio(pcm16k: Buffer): void;
  sendImage(jpeg: Buffer): void;
  /** A user turn as text; the session reports it back as the user's final `input_transcript`. */
  sendText(text: string): void;
  /**
   * Keys the person pressed on the phone keypad (DTMF), as the model's input (a text turn saying
   * which keys); not reported back as an input transcript (the conversation records the keys itself).
   */
  sendKeys(keys: string): void;
  /**
   * Has the agent say a line now, e.g. a filler while a slow tool runs; not a user turn (no input
   * transcript) and a pending tool call stays pending. The line arrives as a normal agent turn.
   */
  say(text: string): void;
  sendToolResponses(responses: ToolCallResponse[]): void;
  /** Events in order; one listener. */
  onEvent(listener: (event: VoiceEvent) => void): void;
  close(): Promise<void>;
}

export interface TranscriptTurn {
  role: 'model' | 'user';
  text: string;
  /** Keys pressed on a phone keypad (DTMF) instead of speech; `text` holds the same keys. */
  dtmf?: string;
  /** Unix seconds. */
  timestamp: number;
}

export interface ConversationAnalysis {
  summary: string;
  sentiment: 'positive' | 'neutral' | 'negative';
  goal_met: boolean;
  needs_review: boolean;
  unanswered_questions: string[];
}

/** What post-call analysis is asked about one finished conversation. */
export interface AnalysisRequest {
  instruction: string;
  transcript: TranscriptTurn[];
  /** JSON Schema (2020-12) of structured data to extract as well (an agent's `analysis.schema`). */
  dataSchema?: Record<string, unknown> | null;
  /** Criteria to judge the conversation by (an agent's `analysis.success_criteria`). */
  successCriteria?: string | null;
  /** The analysis model (an agent's `analysis_model`); null or absent: the adapter's default (`VOICE_ANALYSIS_MODEL`). */
  model?: string | null;
}

/** One asked-for part of the model's answer, as it came (not yet checked against the schema), or why there is none. */
export type AnswerPart = { ok: true; value: unknown } | { ok: false; code: 'analysis_failed' | 'invalid_output'; message: string };

/**
 * The fixed analysis (from the model, else the transcript analyzer flagged for review), and `data` /
 * `success` exactly when they were asked for.
 */
export interface AnalysisAnswer extends ConversationAnalysis {
  data?: AnswerPart;
  success?: AnswerPart;
}

/** The voice service refused the session's model at setup: trying again cannot help (the conversation ends `model_refused`). */
export class VoiceModelRefusedError extends Error {}

export interface VoiceService {
  /**
   * Opens a session; rejects when the voice service cannot start one (callers close with 1011), with a
   * VoiceModelRefusedError when it refused the model.
   */
  open(config: VoiceSessionConfig): Promise<VoiceSession>;
  /** Post-call analysis of a finished conversation, in one request to the analysis model. */
  analyze(input: AnalysisRequest): Promise<AnalysisAnswer>;
  close(): Promise<void>;
}
