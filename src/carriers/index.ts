/**
 * The carriers' front door: the registry of carrier plug-ins (provider id -> plug-in) and what the
 * rest of the service asks of them. Each carrier lives in its own folder and is registered in
 * `PLUGINS`; nothing outside src/carriers/ imports a carrier's folder (test/unit/import-boundaries.test.ts).
 */
import type { CallbackUrls, Carrier, CarrierCredentials, Provider } from './carrier.js';
import { MissingCredentialsError, type AgentConfigSchema, type CarrierAccount, type CarrierAccounts } from './credentials.js';
import type { CarrierModule, CarrierPlugin, PluginOptions } from './plugin.js';
import { providerA } from './provider-a/index.js';
import { providerB } from './provider-b/index.js';
import { sip } from './sip/index.js';

/** Every carrier there is, by provider id. */
const PLUGINS: Record<Provider, CarrierModule> = { provider_a: providerA, provider_b: providerB, sip };

/** The providers, in the order the API lists them. */
export const PROVIDERS = Object.keys(PLUGINS) as Provider[];

/**
 * The carriers whose account is the agent's own `<provider>_config` (the contract's
 * `<Provider>ConfigInput` and `telephony.<provider>`), with its fields: the agents room stores, seals and
 * shows them from this.
 */
export const AGENT_CONFIG_CARRIERS: ReadonlyArray<readonly [Provider, AgentConfigSchema]> = PROVIDERS.flatMap((p) => {
  const schema = PLUGINS[p].credentials.agentConfig;
  return schema ? [[p, schema] as const] : [];
});

/**
 * The carriers with a REST API, and the configuration variable naming its base URL (src/config.ts
 * reads them): the provider's id upper-cased, `provider_a` -> `PROVIDER_A_API_URL`, so the README's
 * one rule covers a new carrier.
 */
export const CARRIER_API_URL_VARIABLES: ReadonlyArray<readonly [Provider, string]> = PROVIDERS.flatMap((p) =>
  PLUGINS[p].restApi ? [[p, `${p.toUpperCase()}_API_URL`] as const] : [],
);

/**
 * Where each carrier's REST API is (the carrier's or a sandbox carrier's: only the URL differs), and its
 * own options; a carrier left out gets none (an in-process one is then off).
 */
export type CarrierSettings = Partial<Record<Provider, Omit<PluginOptions, 'urls' | 'timeoutMs'>>>;

export class Carriers {
  private readonly plugins: Map<Provider, CarrierPlugin>;

  constructor(plugins: CarrierPlugin[]) {
    this.plugins = new Map(plugins.map((p) => [p.provider, p]));
  }

  get(provider: Provider): CarrierPlugin {
    const plugin = this.plugins.get(provider);
    if (!plugin) throw new Error(`no carrier ${provider} is registered`);
    return plugin;
  }

  list(): CarrierPlugin[] {
    return [...this.plugins.values()];
  }

  /** Whether this instance can place `provider`'s calls: an in-process carrier only where its stack runs. */
  dialsHere(provider: Provider): boolean {
    return this.get(provider).inProcess?.enabled ?? true;
  }

  /** Whether `provider`'s calls are dialed in-process (so only by an instance running its stack). */
  dialsInProcess(provider: Provider): boolean {
    return this.get(provider).inProcess !== undefined;
  }

  /** Whether this instance runs any in-process carrier's stack. */
  get anyInProcess(): boolean {
    return this.list().some((p) => p.inProcess?.enabled);
  }

  /** Starts the carriers that run in-process (the SIP user agent). */
  async start(): Promise<void> {
    for (const p of this.list()) await p.inProcess?.start();
  }

  /** The instance drains: in-process carriers take no new calls. */
  drain(): void {
    for (const p of this.list()) p.inProcess?.drain();
  }

  async stop(): Promise<void> {
    for (const p of this.list()) await p.inProcess?.stop();
  }

  /** The REST adapters by provider. */
  get byProvider(): Record<Provider, Carrier> {
    return Object.fromEntries(this.list().map((p) => [p.provider, p.rest])) as Record<Provider, Carrier>;
  }

  /** The holder's account at `provider`, if any. */
  account(accounts: CarrierAccounts, provider: Provider): CarrierAccount | null {
    return this.get(provider).credentials.account(accounts);
  }

  /** Whether `accounts` can place calls through `provider`. */
  canDial(accounts: CarrierAccounts, provider: Provider): boolean {
    return this.get(provider).credentials.credentials(accounts) !== null;
  }

  /** The credentials to call `provider` with; MissingCredentialsError when the account lacks them. */
  credentialsOf(accounts: CarrierAccounts, provider: Provider): CarrierCredentials {
    const plugin = this.get(provider);
    const credentials = plugin.credentials.credentials(accounts);
    if (!credentials) throw new MissingCredentialsError(`The agent has no ${provider} ${plugin.credentials.dialFields}.`);
    return credentials;
  }
}

export function createCarriers(settings: CarrierSettings, urls: CallbackUrls, timeoutMs: number): Carriers {
  return new Carriers(PROVIDERS.map((provider) => PLUGINS[provider].create({ apiUrl: '', ...settings[provider], urls, timeoutMs })));
}

export type { CarrierPlugin, MediaSocket, MediaTransport } from './plugin.js';
export type { SipLineOptions, SipTermination, TrunkDecision } from './sip/index.js';
export type { CallbackAction, CallbackReply, CallbackRequest, CarrierEvent, CarrierMessage, SignatureCheck } from './callbacks.js';
export { MissingCredentialsError, type AgentConfigSchema, type CarrierAccount, type CarrierAccounts, type HeldAccount } from './credentials.js';
export {
  CarrierError,
  callbackUrls,
  type AnsweredBy,
  type CallbackUrls,
  type Carrier,
  type CarrierCredentials,
  type CarrierOutcome,
  type DialRequest,
  type Provider,
} from './carrier.js';
