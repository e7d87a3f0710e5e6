/**
 * The rules of a call's status (the transition table of `Call` in the contract), as pure functions:
 * how a carrier's progress report (already in our words, src/carriers/) moves a live call, and what
 * terminal status and end reason a call ends with given everything recorded about it.
 */
import type { CallRow, CallStatus, EndReason, LiveStatus } from './store.js';

const ORDER: Record<LiveStatus, number> = { queued: 0, initiated: 1, ringing: 2, in_progress: 3 };

/** The statuses from which `to` is a forward move (carriers report out of order; never go back). */
export function movableFrom(to: 'initiated' | 'ringing' | 'in_progress'): LiveStatus[] {
  return (Object.keys(ORDER) as LiveStatus[]).filter((s) => ORDER[s] < ORDER[to]);
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
  if (hint === 'do_not_call') return { status: 'canceled', endReason: 'do_not_call' };
  if (row.answered_at) {
    if (hint === 'service_error' || hint === 'model_refused') return { status: 'failed', endReason: hint };
    // Forced with the media stream never ended normally: the instance running it died.
    if (forced && !row.media_ended_at && row.media_started_at && !hint) return { status: 'failed', endReason: 'service_error' };
    if (forced && !row.media_started_at && !hint) return { status: 'failed', endReason: 'service_error' };
    const status: CallStatus = row.answered_by === 'machine' ? 'voicemail' : 'completed';
    // Hung up through the API while dialing, and answered before the carrier took the hang-up: a hang-up of a live call.
    if (hint === 'canceled') return { status, endReason: 'api_hangup' };
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

/**
 * When a call ended, from what is recorded: the carrier's word, else the caller's (`reported`), else the
 * end of its media stream. Forced with the stream never ended (the instance running it died), it ended
 * when that instance was last known alive, as an orphaned web session does: not at its deadline.
 */
export function endTime(
  row: Pick<CallRow, 'ended_at' | 'media_started_at' | 'media_ended_at' | 'alive_at'>,
  forced: boolean,
  reported: Date | undefined,
  now: Date,
): Date {
  const orphaned = forced && row.media_started_at && !row.media_ended_at ? row.alive_at : null;
  return row.ended_at ?? reported ?? row.media_ended_at ?? (orphaned ? new Date(orphaned) : now);
}
