/** What provider `sip` is made from: the user agent's settings and the SIP trunks' decisions, read by shape (src/sip-trunks is a domain above this room). */
import type { SipUserAgentOptions } from '../../sip/index.js';

/** The SIP trunks' decision on an INVITE (src/sip-trunks' authorizeInbound), read by shape. */
export type TrunkDecision =
  | { allowed: true; trunk: { id: string; workspaceId: string }; number: string; agent: { id: string } }
  | { allowed: false; reason: 'unknown_source' | 'credentials_required' | 'wrong_credentials' | 'unknown_number' };

/** A trunk's outbound side, with its password in plaintext (never log it). */
export interface SipTermination {
  host: string;
  port: number;
  transport: 'udp' | 'tcp' | 'tls';
  credentials: { username: string; password: string } | null;
  callerIdNumbers: string[];
}

/**
 * Hang-ups for a SIP call held by another instance: a call's dialog lives on the instance whose user
 * agent made or took it, while `POST /calls/{id}/hangup` or a call's deadline can run on any. `send`
 * reaches every instance (PostgreSQL NOTIFY); `on` takes those sent from any.
 */
export interface SipHangupRelay {
  send(callSid: string): Promise<void>;
  on(handler: (callSid: string) => void): void;
}

export interface SipLineOptions {
  /** The user agent's settings around our trust hook (sipOptionsFromConfig); undefined: SIP is off. */
  userAgent(authenticateInbound: SipUserAgentOptions['authenticateInbound']): SipUserAgentOptions | undefined;
  /** Whether this instance runs the user agent (SIP_PORT is set): only such an instance takes SIP dial jobs. */
  enabled: boolean;
  authorize(req: { sourceAddress: string; toNumber: string; digest?: { username: string; matches(password: string): boolean } }): Promise<TrunkDecision>;
  termination(workspaceId: string, trunkId: string): Promise<SipTermination | null>;
  hangups: SipHangupRelay;
  /** How long an inbound call rings unanswered before it is given up (CALL_RING_TIMEOUT_S). */
  ringTimeoutS: number;
  log: { info(obj: object, msg?: string): void; warn(obj: object, msg?: string): void; debug(obj: object, msg?: string): void };
}
