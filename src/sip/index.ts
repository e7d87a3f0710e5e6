/**
 * The SIP room's front door: the user agent, its calls and their neutral events, the status-to-outcome
 * table. It knows no call record, carrier or agent; the carrier adapter (provider `sip`) builds on it.
 * Its options are read from the configuration by ./settings.ts (the assembly's: the configuration
 * reads the carriers' registry, which builds on this).
 */
import { SipUserAgent, type SipUserAgentOptions } from './user-agent.js';

export { SipUserAgent } from './user-agent.js';
export type { InboundDecision, InboundRequest, OutboundCallOptions, SipLog, SipUserAgentOptions } from './user-agent.js';
export { SipCall } from './call.js';
export type { CallEnded, EndReason, ReferRequest, TransferProgress } from './call.js';
export { outcomeOfStatus, STATUS_OUTCOMES } from './outcomes.js';
export type { SipOutcome } from './outcomes.js';
export type { Peer, TransportName } from './transport.js';
export type { PacedStream, RtpPacer } from './rtp-clock.js';

/** Make and start the user agent. */
export async function createSipUserAgent(options: SipUserAgentOptions): Promise<SipUserAgent> {
  const ua = new SipUserAgent(options);
  await ua.start();
  return ua;
}
