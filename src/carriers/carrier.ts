/**
 * The one interface the rest of the service uses to talk to a telephony provider, whichever it is:
 * place a call with a media stream and answering-machine detection, hang it up, transfer it, and point
 * a number's inbound calls at this service. `provider-a/` and `provider-b/` implement it over the real
 * wire protocols (`../shared/PROTOCOLS.md`), against the real carrier or the sandbox carriers
 * (`sandbox/`): only the base URL differs.
 */
import type { components } from '../../generated/openapi.js';

/** A carrier's id: the contract's `Provider` enum (a new carrier starts there). */
export type Provider = components['schemas']['Provider'];

/**
 * A carrier's news about a call in our words; each provider's own values are translated by its
 * `status.ts`. What the carrier said became of the call:
 */
export type CarrierOutcome = 'completed' | 'busy' | 'no_answer' | 'failed' | 'canceled' | 'time_limit';
/** Who answered, by answering-machine detection. */
export type AnsweredBy = 'human' | 'machine' | 'unknown';
/** A carrier's report of a call's progress or end. */
export type CarrierStatus = { kind: 'progress'; status: 'initiated' | 'ringing' | 'in_progress' } | { kind: 'ended'; outcome: CarrierOutcome };

/**
 * An account's credentials, as its carrier's plug-in reads them from the holder's accounts; each
 * carrier names its own fields (provider-a/credentials.ts, provider-b/credentials.ts).
 */
export interface CarrierCredentials {
  provider: Provider;
  [field: string]: string;
}

export interface DialRequest {
  callId: string;
  from: string;
  to: string;
  /** Single-use secret the media stream must present (TwiML `<Parameter>` / `client_state`). */
  streamToken: string;
  ringTimeoutS: number;
  timeLimitS: number;
  /** Answering-machine detection; null: none. */
  machineDetection: { timeoutS: number } | null;
}

export type CarrierErrorKind =
  /** The carrier rejected the credentials. */
  | 'auth'
  /** The carrier refused the request as such (an invalid or unreachable number...). */
  | 'refused'
  /** The number or call does not exist at the carrier. */
  | 'not_found'
  /** No usable answer: network failure, timeout, 5xx. The request may or may not have taken effect. */
  | 'unavailable';

export class CarrierError extends Error {
  constructor(
    readonly kind: CarrierErrorKind,
    message: string,
    /** The HTTP status and the carrier's own error code, for logs. */
    readonly detail: { status?: number; code?: string } = {},
  ) {
    super(message);
  }
}

export interface Carrier {
  readonly provider: Provider;
  /** Places the call; resolves with the carrier's id of it (provider_a CallSid, provider_b call_control_id). */
  dial(credentials: CarrierCredentials, request: DialRequest): Promise<{ callSid: string }>;
  /** Ends the call (cancels it before answer). A call already over is not an error. */
  hangup(credentials: CarrierCredentials, callSid: string, opts: { answered: boolean }): Promise<void>;
  /** Hands the call over to `to` (the agent's transfer number); the media stream ends. */
  transfer(credentials: CarrierCredentials, callSid: string, to: string): Promise<void>;
  /**
   * Presses keys on the call (DTMF: `0`-`9`, `*`, `#`, `A`-`D`, pauses `w` 0.5 s and `W` 1 s) by the
   * carrier's own command. A carrier without one (provider_a: its bidirectional media stream takes
   * only audio, marks and clear, and new TwiML would end the stream) has the keys played as tones in
   * the agent's audio instead (src/audio/dtmf.ts).
   */
  sendDtmf?(credentials: CarrierCredentials, callSid: string, keys: string): Promise<void>;
  /** Points (or stops pointing) inbound calls of `phoneNumber` at this service. */
  setInbound(credentials: CarrierCredentials, phoneNumber: string, enabled: boolean): Promise<void>;
}

/** The URLs of this service the carriers call, from PUBLIC_BASE_URL. */
export interface CallbackUrls {
  /** http(s) origin, no trailing slash. */
  base(): string;
  /** ws(s) URL of a provider's media stream endpoint. */
  media(provider: Provider): string;
}

export function callbackUrls(publicBaseUrl: () => string): CallbackUrls {
  return {
    base: () => publicBaseUrl().replace(/\/+$/, ''),
    media: (provider) => `${publicBaseUrl().replace(/\/+$/, '').replace(/^http/, 'ws')}/telephony/${provider}/media`,
  };
}
