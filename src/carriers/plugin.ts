/**
 * A carrier as a plug-in: everything the service needs of one telephony provider, in one object, so
 * adding a carrier is one folder under src/carriers/ and one line in the registry (index.ts).
 */
import type { CallbackUrls, Carrier, Provider } from './carrier.js';
import type { CarrierCallbacks } from './callbacks.js';
import type { CredentialsSchema } from './credentials.js';
import type { MediaDialect } from './media.js';

/**
 * How the call's audio travels. Both carriers today stream it over a WebSocket they open to
 * `/telephony/<provider>/media` in their own framing (`dialect`); a carrier whose media is RTP from an
 * in-process user agent adds its own kind here.
 */
export type MediaTransport = { kind: 'websocket'; dialect: MediaDialect };

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
}

/** What a plug-in is made from: its REST base URL, our callback URLs, the request deadline, and its own options. */
export interface PluginOptions {
  apiUrl: string;
  urls: CallbackUrls;
  timeoutMs: number;
  /** Its callbacks are checked with this key instead of the account's (a sandbox carrier signs with its own). */
  verifyKeyOverride?: string | null;
}

export type PluginFactory = (opts: PluginOptions) => CarrierPlugin;
