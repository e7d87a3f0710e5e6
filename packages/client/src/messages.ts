/**
 * The realtime WebSocket's server messages, under the library's names. The types themselves are
 * generated from the service's AsyncAPI document (`realtime-messages.ts`, by `npm run generate`).
 */
import type {
  RealtimeAudio,
  RealtimeError,
  RealtimeInterrupted,
  RealtimeServerMessage,
  RealtimeSessionEnded,
  RealtimeSessionStarted,
  RealtimeSource,
  RealtimeText,
  RealtimeToolCall,
  RealtimeTranscript,
  RealtimeTurnComplete,
} from './realtime-messages.js';

export type Source = RealtimeSource;
export type SessionStartedMessage = RealtimeSessionStarted;
export type AudioMessage = RealtimeAudio;
export type TranscriptMessage = RealtimeTranscript;
export type TextMessage = RealtimeText;
export type TurnCompleteMessage = RealtimeTurnComplete;
export type InterruptedMessage = RealtimeInterrupted;
export type ToolCallMessage = RealtimeToolCall;
export type SessionEndedMessage = RealtimeSessionEnded;
/** An in-session error; `code` is one of the AsyncAPI `RealtimeError` codes. */
export type ErrorMessage = RealtimeError;
export type ServerMessage = RealtimeServerMessage;
