/**
 * A call as the API shows it (the `Call` schema) and as `call.completed` states it: one mapping from
 * the stored row, so `GET /api/v1/calls/{call_id}` of a terminal call carries exactly the values of
 * its event.
 */
import type { components } from '../../generated/openapi.js';
import type { ToolCallRecord as EventToolCallRecord } from '../../generated/asyncapi-types.js';
import type { CallCompletedInput } from '../webhooks/payloads.js';
import { pendingResults } from '../conversation/write-up.js';
import { isTerminal, type CallRow } from './store.js';
import type { RecordingView } from '../recordings/service.js';
import { Redactor } from '../redaction/redactor.js';
import type { CallTransferView } from './transfers.js';

export type Call = components['schemas']['Call'];

const iso = (d: Date | string | null) => (d === null ? null : new Date(d).toISOString());

/** The person's number: the one called, or the caller's. */
const personNumber = (row: Pick<CallRow, 'direction' | 'from_number' | 'to_number'>) => (row.direction === 'inbound' ? row.from_number : row.to_number);

/** The call's redactor (its `redaction` setting as it started with it; the person's country for national numbers); null without one. */
export function callRedactor(row: Pick<CallRow, 'redaction' | 'direction' | 'from_number' | 'to_number'>): Redactor | null {
  return Redactor.of(row.redaction, personNumber(row));
}

/** The person's opt-out during the call, if they asked not to be called again (their number: the one called, or the caller's). */
function optOutOf(row: CallRow): Call['opt_out'] {
  if (!row.opted_out_at) return null;
  return { number: personNumber(row), listed_at: iso(row.opted_out_at) as string };
}

/** `recording`: the call's recording as the record shows it, null when it has none; `transfers`: its transfer attempts. */
export function toCall(row: CallRow, recording: RecordingView | null, transfers: CallTransferView[]): Call {
  const terminal = isTerminal(row.status);
  return {
    call_id: row.id,
    conversation_id: row.id,
    call_sid: row.call_sid,
    agent_id: row.agent_id,
    agent_version: row.agent_version,
    batch_id: row.batch_id,
    direction: row.direction,
    provider: row.provider,
    from_number: row.from_number,
    to_number: row.to_number,
    status: row.status,
    first_message: row.first_message,
    conversation: row.conversation,
    first_message_delivered: row.first_message_delivered,
    variables: row.variables,
    duration: row.duration,
    message_count: row.transcript.length,
    transcript: row.transcript,
    transcript_truncated: row.transcript_truncated,
    summary: terminal ? row.summary : null,
    sentiment: terminal ? row.sentiment : null,
    goal_met: terminal ? row.goal_met : null,
    needs_review: terminal ? row.needs_review : null,
    unanswered_questions: row.unanswered_questions,
    interruption_count: row.interruption_count,
    latency_avg_ms: terminal ? row.latency_avg_ms : null,
    tool_calls: row.tool_calls as Call['tool_calls'],
    transfers,
    inbound_setup: row.inbound_setup,
    answered_by: row.answered_by,
    end_reason: row.end_reason,
    webhook_url: row.webhook_url,
    created_at: iso(row.created_at) as string,
    answered_at: iso(row.answered_at),
    ended_at: terminal ? iso(row.ended_at) : null,
    recording: recording?.recording ?? null,
    recording_url: recording?.recording_url ?? null,
    opt_out: optOutOf(row),
    erased_at: iso(row.erased_at ?? null),
    // The results once written; until then the fields the setting asks for, null.
    ...((terminal ? row.analysis_results : null) ?? pendingResults(row.analysis)),
  };
}

/** The facts of a terminal call as its `call.completed` states them. */
export function callCompletedFacts(row: CallRow, recording: RecordingView | null, transfers: CallTransferView[]): CallCompletedInput {
  return {
    ...(recording ? { recording: recording.recording, recording_url: recording.recording_url } : {}),
    ...(row.opted_out_at ? { opt_out: optOutOf(row)! } : {}),
    conversation_id: row.id,
    call_sid: row.call_sid,
    agent_id: row.agent_id,
    agent_version: row.agent_version,
    to_number: row.to_number,
    provider: row.provider,
    first_message: row.first_message,
    first_message_delivered: row.first_message_delivered,
    variables: row.variables,
    duration: row.duration,
    status: row.status as CallCompletedInput['status'],
    message_count: row.transcript.length,
    transcript: row.transcript,
    transcript_truncated: row.transcript_truncated,
    summary: row.summary ?? '',
    sentiment: row.sentiment ?? 'neutral',
    goal_met: row.goal_met ?? false,
    needs_review: row.needs_review ?? false,
    unanswered_questions: row.unanswered_questions,
    interruption_count: row.interruption_count,
    latency_avg_ms: Number(row.latency_avg_ms ?? 0),
    created_at: new Date(row.created_at),
    tool_calls: row.tool_calls as EventToolCallRecord[],
    transfers,
    ...(row.analysis_results ?? pendingResults(row.analysis)),
  };
}
