/**
 * What a SIP final response to our INVITE means for the call, in the carriers' words (plus
 * `declined`, which SIP alone tells apart): 486/600 busy; 408, 480, 487 no_answer; 603 declined;
 * 404, 484, 5xx and everything else failed.
 */
export type SipOutcome = 'completed' | 'busy' | 'no_answer' | 'declined' | 'failed' | 'canceled';

export function outcomeOfStatus(status: number): Exclude<SipOutcome, 'completed' | 'canceled'> {
  if (status === 486 || status === 600) return 'busy';
  if (status === 408 || status === 480 || status === 487) return 'no_answer';
  if (status === 603) return 'declined';
  return 'failed';
}

/** The table itself, for documentation and the carrier adapter's tests. */
export const STATUS_OUTCOMES: ReadonlyArray<[status: number, outcome: ReturnType<typeof outcomeOfStatus>]> = [
  [486, 'busy'],
  [600, 'busy'],
  [408, 'no_answer'],
  [480, 'no_answer'],
  [487, 'no_answer'],
  [603, 'declined'],
  [404, 'failed'],
  [484, 'failed'],
  [500, 'failed'],
  [503, 'failed'],
];
