/**
 * A carrier as a plug-in: everything the service needs of one telephony provider, in one object, so
 * adding a carrier is one folder under src/carriers/ and one line in the registry (index.ts): its
 * `CarrierModule` says what is known of it before anything starts (its account, its configuration),
 * and makes the plug-in.
 */
import type { CallbackUrls, Carrier, Provider } from './carrier.js';
import type { CallbackReply, CarrierCallbacks, CarrierMessage } from './callbacks.js';
import type { CredentialsSchema } from './credentials.js';
import type { MediaDialect } from './media.js';
import type { MediaSocket } from './media-socket.js';
import type { SipLineOptions } from './sip/options.js';

export type { MediaSocket } from './media-socket.js';

/**
 * How the call's audio travels: over a WebSocket the carrier opens to `/telephony/<provider>/media`
 * in its own framing (`dialect`), or on streams the plug-in opens in-process (the SIP user agent's
 * RTP), each a MediaSocket in its dialect handed to `accept`.
 */
export type MediaTransport =
  { kind: 'websocket'; dialect: MediaDialect } | { kind: 'in_process'; dialect: MediaDialect; onStream(accept: (socket: MediaSocket) => void): void };

/**
 * A carrier whose messages come from an in-process user agent rather than HTTP callbacks: it hands
 * each to `receive` (the calls side's check and effects, src/calls/callbacks.ts) and starts, drains
 * and stops with the service.
 */
export interface InProcessCarrier {
  /**
   * Whether this instance runs the carrier's stack. Its calls are dialed only where it does (their
   * dial job is IN_PROCESS_DIAL_JOB, which only such instances take); instances without it serve the
   * rest of the API for those calls.
   */
  readonly enabled: boolean;
  listen(receive: (operation: string, message: CarrierMessage) => Promise<CallbackReply>): void;
  start(): Promise<void>;
  /** The instance is draining: new calls are refused, live ones run on. */
  drain(): void;
  stop(): Promise<void>;
}

export interface CarrierPlugin {
  readonly provider: Provider;
  /** Dialling, hang-up, transfer, keys and inbound numbers at the carrier. */
  readonly rest: Carrier;
  /** Its messages about calls, read into neutral events, and its replies. */
  readonly callbacks: CarrierCallbacks;
  readonly media: MediaTransport;
  /** Its account of an agent. */
  readonly credentials: CredentialsSchema;
  /**
   * Its answering-machine detection reports a machine only once the greeting is over (provider_a's
   * DetectMessageEnd), so a machine result already recorded means the beep has come.
   */
  readonly machineResultAfterGreeting: boolean;
  /** Set for a carrier that runs in-process (SIP). */
  readonly inProcess?: InProcessCarrier;
}

/** What a plug-in is made from: its REST base URL, our callback URLs, the request deadline, and its own options. */
export interface PluginOptions {
  apiUrl: string;
  urls: CallbackUrls;
  timeoutMs: number;
  /** Its callbacks are checked with this key instead of the account's (a sandbox carrier signs with its own). */
  verifyKeyOverride?: string | null;
  /** provider `sip`: the user agent's settings and the trunks' lookups; absent, SIP is off (no call can be placed or taken). */
  sip?: SipLineOptions;
}

export type PluginFactory = (opts: PluginOptions) => CarrierPlugin;

/** A carrier as the registry lists it. */
export interface CarrierModule {
  readonly provider: Provider;
  /** Its account of an agent (the agents room stores and shows an `agentConfig` account from it alone). */
  readonly credentials: CredentialsSchema;
  /**
   * It has a REST API whose base URL is configured: the variable is named after the provider
   * (`<PROVIDER>_API_URL`, index.ts), read and checked with the rest of the configuration
   * (src/config.ts: an http(s) URL, required in production). Unset, its sandbox simulator stands in.
   * Absent for a carrier without one (in-process: SIP).
   */
  readonly restApi?: boolean;
  readonly create: PluginFactory;
}
