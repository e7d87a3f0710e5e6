/**
 * The rules of a call's status (the transition table of `Call` in the contract), as pure functions:
 * how a carrier's progress report moves a live call, and what terminal status and end reason a call
 * ends with given everything recorded about it.
 */
import type { AnsweredBy, CallRow, CallStatus, CarrierOutcome, EndReason, LiveStatus } from './store.js';

const ORDER: Record<LiveStatus, number> = { queued: 0, initiated: 1, ringing: 2, in_progress: 3 };

/** A report from the carrier about a call, in our words. */
export type CarrierUpdate =
  | { kind: 'progress'; status: 'initiated' | 'ringing' | 'in_progress'; at: Date }
  | { kind: 'ended'; outcome: CarrierOutcome; at: Date }
  | { kind: 'amd'; answeredBy: AnsweredBy; greetingEnded: boolean }
  | { kind: 'greeting_ended' };

/** The statuses from which `to` is a forward move (carriers report out of order; never go back). */
export function movableFrom(to: 'initiated' | 'ringing' | 'in_progress'): LiveStatus[] {
  return (Object.keys(ORDER) as LiveStatus[]).filter((s) => ORDER[s] < ORDER[to]);
}

/** provider_a's CallStatus in our words (`queued`/`initiated` both mean the carrier took the call). */
export function providerAStatus(
  value: string,
): { kind: 'progress'; status: 'initiated' | 'ringing' | 'in_progress' } | { kind: 'ended'; outcome: CarrierOutcome } | null {
  switch (value) {
    case 'queued':
    case 'initiated':
      return { kind: 'progress', status: 'initiated' };
    case 'ringing':
      return { kind: 'progress', status: 'ringing' };
    case 'in-progress':
    case 'answered':
      return { kind: 'progress', status: 'in_progress' };
    case 'completed':
      return { kind: 'ended', outcome: 'completed' };
    case 'busy':
      return { kind: 'ended', outcome: 'busy' };
    case 'no-answer':
      return { kind: 'ended', outcome: 'no_answer' };
    case 'failed':
      return { kind: 'ended', outcome: 'failed' };
    case 'canceled':
      return { kind: 'ended', outcome: 'canceled' };
    default:
      return null;
  }
}

/** provider_a's AnsweredBy in our words; `machine_end_*` also means the greeting is over. */
export function providerAAnsweredBy(value: string): { answeredBy: AnsweredBy; greetingEnded: boolean } {
  if (value === 'human') return { answeredBy: 'human', greetingEnded: false };
  if (value.startsWith('machine_end_')) return { answeredBy: 'machine', greetingEnded: true };
  if (value.startsWith('machine') || value === 'fax') return { answeredBy: 'machine', greetingEnded: false };
  return { answeredBy: 'unknown', greetingEnded: false };
}

/** provider_b's hangup_cause in our words (whether the call was answered decides what is left). */
export function providerBHangup(cause: string | null): CarrierOutcome {
  switch (cause) {
    case 'user_busy':
    case 'call_rejected':
      return 'busy';
    case 'timeout':
    case 'no_answer':
      return 'no_answer';
    case 'originator_cancel':
      return 'canceled';
    case 'time_limit':
      return 'time_limit';
    case 'normal_clearing':
      return 'completed';
    default:
      return 'failed';
  }
}

export function providerBAnsweredBy(result: string | null): AnsweredBy {
  if (result === 'human') return 'human';
  if (result === 'machine') return 'machine';
  return 'unknown';
}

/**
 * The terminal status and end reason of a call from what is recorded. `forced`: the deadline passed
 * with no word from the carrier or the instance running it.
 */
export function finalState(
  row: Pick<CallRow, 'answered_at' | 'answered_by' | 'carrier_outcome' | 'end_reason_hint' | 'media_started_at' | 'media_ended_at'>,
  forced: boolean,
): { status: CallStatus; endReason: EndReason } {
  const hint = row.end_reason_hint;
  if (hint === 'not_allowed') return { status: 'failed', endReason: 'not_allowed' };
  if (row.answered_at) {
    if (hint === 'service_error') return { status: 'failed', endReason: 'service_error' };
    // Forced with the media stream never ended normally: the instance running it died.
    if (forced && !row.media_ended_at && row.media_started_at && !hint) return { status: 'failed', endReason: 'service_error' };
    if (forced && !row.media_started_at && !hint) return { status: 'failed', endReason: 'service_error' };
    const status: CallStatus = row.answered_by === 'machine' ? 'voicemail' : 'completed';
    if (hint) return { status, endReason: hint };
    if (row.carrier_outcome === 'time_limit') return { status, endReason: 'time_limit' };
    return { status, endReason: 'remote_hangup' };
  }
  switch (row.carrier_outcome) {
    case 'busy':
      return { status: 'busy', endReason: 'not_answered' };
    case 'no_answer':
      return { status: 'no_answer', endReason: 'not_answered' };
    case 'canceled':
      return { status: 'canceled', endReason: 'canceled' };
    case 'failed':
      return { status: 'failed', endReason: 'carrier_error' };
    default:
      break;
  }
  if (hint === 'canceled' || hint === 'api_hangup') return { status: 'canceled', endReason: 'canceled' };
  if (hint === 'carrier_error') return { status: 'failed', endReason: 'carrier_error' };
  return { status: 'failed', endReason: 'carrier_error' };
}
