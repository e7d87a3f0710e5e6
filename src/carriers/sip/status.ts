/** How a SIP call's end reads in our words: the stack's outcome (src/sip/outcomes.ts) as a CarrierOutcome. */
import type { SipOutcome } from '../../sip/index.js';
import type { CarrierOutcome } from '../carrier.js';

/** 603 Decline has no outcome of its own in our contract: a person who refused the call reads as busy (as provider_b's call_rejected). */
export function carrierOutcome(outcome: SipOutcome): CarrierOutcome {
  return outcome === 'declined' ? 'busy' : outcome;
}
