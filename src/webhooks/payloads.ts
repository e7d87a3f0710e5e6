/**
 * The one place that builds event payloads. Each builder takes the facts of a finished call, web
 * session or batch, writes the fields in the contract's order (`tool_calls` only when a tool was
 * called, `transfers` only when the agent tried one, `data`/`success` and their errors only when the agent's `analysis` setting asked), and
 * validates the result against the AsyncAPI message schema (generated/asyncapi.json), so a payload
 * that does not match the contract is refused before anything is recorded or sent.
 */
import {
  webhookEvents,
  type BatchCompletedEvent,
  type CallCompletedEvent,
  type CallStatusChangedEvent,
  type CallTranscriptEvent,
  type ToolCallRecord,
  type WebhookEventKind,
} from '../../generated/asyncapi-types.js';
import { asyncapiPayloadValidator } from '../contract/documents.js';

/** The event kinds are the AsyncAPI document's webhook messages (`npm run generate` lists them). */
export type EventKind = WebhookEventKind;

const KINDS = Object.keys(webhookEvents) as EventKind[];

/** The kinds only webhooks that list them receive (no own `webhook_url` target, no event kept without a target). */
export const OPT_IN_KINDS: readonly EventKind[] = KINDS.filter((k) => webhookEvents[k].optIn);

/** What a webhook registered without `events` receives. */
export const DEFAULT_KINDS: readonly EventKind[] = KINDS.filter((k) => !webhookEvents[k].optIn);

type Timestamp = string | Date;

/** What a finished call or web session provides; `event` is implied, `tool_calls` may be empty. */
export type CallCompletedInput = Omit<CallCompletedEvent, 'event' | 'tool_calls' | 'transfers' | 'created_at' | 'message_count'> & {
  event?: 'call.completed';
  created_at: Timestamp;
  /** Defaults to the number of transcript entries. */
  message_count?: number;
  tool_calls?: ToolCallRecord[] | null;
  /** A call's transfer attempts; may be empty (web sessions have none). */
  transfers?: NonNullable<CallCompletedEvent['transfers']> | [] | null;
};

export type BatchCompletedInput = Omit<BatchCompletedEvent, 'event' | 'created_at' | 'completed_at'> & {
  event?: 'batch.completed';
  created_at: Timestamp;
  completed_at: Timestamp;
};

export class InvalidEventPayloadError extends Error {
  constructor(
    readonly kind: EventKind,
    readonly problems: string[],
  ) {
    super(`The ${kind} payload does not match the contract: ${problems.join('; ')}`);
  }
}

const validatorFor = (kind: EventKind) => asyncapiPayloadValidator(webhookEvents[kind].message);

/** Throws InvalidEventPayloadError when the payload does not match its AsyncAPI schema. */
export function validateEventPayload(kind: EventKind, payload: unknown): void {
  const validate = validatorFor(kind);
  if (!validate(payload)) {
    throw new InvalidEventPayloadError(
      kind,
      (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`),
    );
  }
}

const iso = (t: Timestamp) => (t instanceof Date ? t.toISOString() : t);

export function callCompletedPayload(input: CallCompletedInput): CallCompletedEvent {
  const payload: CallCompletedEvent = {
    event: 'call.completed',
    conversation_id: input.conversation_id,
    call_sid: input.call_sid,
    agent_id: input.agent_id,
    to_number: input.to_number,
    provider: input.provider,
    first_message: input.first_message,
    first_message_delivered: input.first_message_delivered,
    variables: input.variables,
    duration: input.duration,
    status: input.status,
    message_count: input.message_count ?? input.transcript.length,
    transcript: input.transcript,
    transcript_truncated: input.transcript_truncated,
    summary: input.summary,
    sentiment: input.sentiment,
    goal_met: input.goal_met,
    needs_review: input.needs_review,
    unanswered_questions: input.unanswered_questions,
    interruption_count: input.interruption_count,
    latency_avg_ms: input.latency_avg_ms,
    created_at: iso(input.created_at),
  };
  // The agent's version the conversation ran (null for calls before versions, and web sessions before 047).
  if (input.agent_version !== undefined) payload.agent_version = input.agent_version;
  // Only a call in which the person opted out says so.
  if (input.opt_out) payload.opt_out = input.opt_out;
  if (input.tool_calls && input.tool_calls.length > 0) payload.tool_calls = input.tool_calls as CallCompletedEvent['tool_calls'];
  if (input.transfers && input.transfers.length > 0) payload.transfers = input.transfers as CallCompletedEvent['transfers'];
  // The structured results of the agent's `analysis` setting: only the parts it asked for.
  if (input.data !== undefined) Object.assign(payload, { data: input.data, data_error: input.data_error ?? null });
  if (input.success !== undefined) Object.assign(payload, { success: input.success, success_error: input.success_error ?? null });
  // Only a conversation that was recorded carries its recording.
  if (input.recording && input.recording_url) Object.assign(payload, { recording: input.recording, recording_url: input.recording_url });
  validateEventPayload('call.completed', payload);
  return payload;
}

export function batchCompletedPayload(input: BatchCompletedInput): BatchCompletedEvent {
  const payload: BatchCompletedEvent = {
    event: 'batch.completed',
    batch_id: input.batch_id,
    agent_id: input.agent_id,
    agent_version: input.agent_version,
    name: input.name,
    status: input.status,
    total: input.total,
    completed_count: input.completed_count,
    failed_count: input.failed_count,
    voicemail_count: input.voicemail_count,
    created_at: iso(input.created_at),
    completed_at: iso(input.completed_at),
  };
  validateEventPayload('batch.completed', payload);
  return payload;
}

export type CallStatusChangedInput = Omit<CallStatusChangedEvent, 'event' | 'timestamp'> & { timestamp: Timestamp };

export function callStatusChangedPayload(input: CallStatusChangedInput): CallStatusChangedEvent {
  const payload: CallStatusChangedEvent = {
    event: 'call.status_changed',
    call_id: input.call_id,
    agent_id: input.agent_id,
    batch_id: input.batch_id,
    status: input.status,
    call_status: input.call_status,
    end_reason: input.end_reason,
    reason: input.reason,
    timestamp: iso(input.timestamp),
  };
  validateEventPayload('call.status_changed', payload);
  return payload;
}

export type CallTranscriptInput = Omit<CallTranscriptEvent, 'event'>;

export function callTranscriptPayload(input: CallTranscriptInput): CallTranscriptEvent {
  const payload: CallTranscriptEvent = {
    event: 'call.transcript',
    call_id: input.call_id,
    agent_id: input.agent_id,
    role: input.role,
    text: input.text,
    ...(input.dtmf !== undefined ? { dtmf: input.dtmf } : {}),
    timestamp: input.timestamp,
  };
  validateEventPayload('call.transcript', payload);
  return payload;
}
