/** provider_b's hang-up causes and answering-machine results (PROTOCOLS.md) in our words. */
import type { AnsweredBy, CarrierOutcome } from '../carrier.js';

/**
 * `hangup_cause` of `call.hangup`. Causes that name an unanswered outcome (busy, no answer, canceled,
 * failed) mean a normal end once the call was answered.
 */
export function providerBHangup(cause: string | null, answered: boolean): CarrierOutcome {
  const outcome = hangupCause(cause);
  return answered && outcome !== 'time_limit' ? 'completed' : outcome;
}

function hangupCause(cause: string | null): CarrierOutcome {
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

/** `result` of `call.machine.detection.ended`. */
export function providerBAnsweredBy(result: string | null): AnsweredBy {
  if (result === 'human') return 'human';
  if (result === 'machine') return 'machine';
  return 'unknown';
}
