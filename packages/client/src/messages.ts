/** The realtime WebSocket's server messages (the service's AsyncAPI document, channel `realtime`). */

export type Source = 'voice' | 'camera' | 'screen' | 'text';

export interface SessionStartedMessage {
  type: 'session_started';
  session_id: string;
  agent_id: string;
  user_id: string;
  source: Source;
  /** Format of the agent's `audio` messages; null in a text session. */
  audio_format: { encoding: 'pcm16le'; sample_rate: number; channels: number } | null;
}

export interface AudioMessage {
  type: 'audio';
  mime_type: string;
  /** Base64 of PCM16 little-endian mono samples. */
  data: string;
}

export interface TranscriptMessage {
  type: 'transcript';
  role: 'user' | 'model';
  /** The whole utterance so far (each message replaces the previous partial of its role). */
  text: string;
  final: boolean;
  /** When the utterance began, Unix time in seconds. */
  timestamp: number;
}

export interface TextMessage {
  type: 'text';
  text: string;
}

export interface TurnCompleteMessage {
  type: 'turn_complete';
}

export interface InterruptedMessage {
  type: 'interrupted';
}

export interface ToolCallMessage {
  type: 'tool_call';
  name: string;
  status: 'started' | 'completed' | 'failed';
}

export interface SessionEndedMessage {
  type: 'session_ended';
  reason?: 'agent_ended';
}

export interface ErrorMessage {
  type: 'error';
  code: string;
  error: string;
}

export type ServerMessage =
  | SessionStartedMessage
  | AudioMessage
  | TranscriptMessage
  | TextMessage
  | TurnCompleteMessage
  | InterruptedMessage
  | ToolCallMessage
  | SessionEndedMessage
  | ErrorMessage;
