/**
 * The carriers' front door: the registry of carrier plug-ins (provider id -> plug-in) and what the
 * rest of the service asks of them. Each carrier lives in its own folder and is registered in
 * `PLUGINS`; nothing outside src/carriers/ imports a carrier's folder (test/unit/import-boundaries.test.ts).
 */
import type { CallbackUrls, Carrier, CarrierCredentials, Provider } from './carrier.js';
import { MissingCredentialsError, type CarrierAccount, type CarrierAccounts } from './credentials.js';
import type { CarrierPlugin, PluginFactory, PluginOptions } from './plugin.js';
import { providerA } from './provider-a/index.js';
import { providerB } from './provider-b/index.js';

/** Every carrier there is, by provider id. */
const PLUGINS: Record<Provider, PluginFactory> = { provider_a: providerA, provider_b: providerB };

/** The providers, in the order the API lists them. */
export const PROVIDERS = Object.keys(PLUGINS) as Provider[];

/** Where each carrier's REST API is (the carrier's or a sandbox carrier's: only the URL differs), and its own options. */
export type CarrierSettings = Record<Provider, Omit<PluginOptions, 'urls' | 'timeoutMs'>>;

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
  return new Carriers(PROVIDERS.map((provider) => PLUGINS[provider]({ ...settings[provider], urls, timeoutMs })));
}

export type { CarrierPlugin, MediaTransport } from './plugin.js';
export type { CallbackAction, CallbackReply, CallbackRequest, CarrierEvent, CarrierMessage, SignatureCheck } from './callbacks.js';
export { MissingCredentialsError, type CarrierAccount, type CarrierAccounts } from './credentials.js';
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
