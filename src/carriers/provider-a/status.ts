/** provider_a's call statuses and answering-machine results (PROTOCOLS.md) in our words. */
import type { AnsweredBy, CarrierStatus } from '../carrier.js';

/** `CallStatus` of a status callback; `queued`/`initiated` both mean the carrier took the call. null: not a status we know. */
export function providerAStatus(value: string): CarrierStatus | null {
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

/** `AnsweredBy` of an answering-machine callback; `machine_end_*` also means the greeting is over. */
export function providerAAnsweredBy(value: string): { answeredBy: AnsweredBy; greetingEnded: boolean } {
  if (value === 'human') return { answeredBy: 'human', greetingEnded: false };
  if (value.startsWith('machine_end_')) return { answeredBy: 'machine', greetingEnded: true };
  if (value.startsWith('machine') || value === 'fax') return { answeredBy: 'machine', greetingEnded: false };
  return { answeredBy: 'unknown', greetingEnded: false };
}
