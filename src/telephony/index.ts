/**
 * The carriers for the rest of the service: the real provider_a and provider_b adapters, each pointed
 * at its configured API URL, or, when that is unset, at the sandbox carriers started here in-process
 * (stopped by close()). With the sandbox, provider_b webhooks are verified with the sandbox's own key:
 * it cannot sign with the key an agent configured.
 */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { CallbackUrls, Carrier, Provider } from './carrier.js';
import { ProviderACarrier } from './provider-a/rest.js';
import { ProviderBCarrier } from './provider-b/rest.js';
import { startSandboxCarriers, type SandboxCarriers } from './sandbox/server.js';

export interface Carriers {
  byProvider: Record<Provider, Carrier>;
  providerB: ProviderBCarrier;
  /** The in-process sandbox, when a provider runs on it. */
  sandbox: { carriers: SandboxCarriers; providers: Set<Provider> } | null;
  providerBKeyOverride: string | null;
  close(): Promise<void>;
}

type CarrierConfig = Pick<
  Config,
  'PROVIDER_A_API_URL' | 'PROVIDER_B_API_URL' | 'CARRIER_TIMEOUT_MS' | 'SANDBOX_CARRIERS_PORT' | 'SANDBOX_CARRIERS_SPEED' | 'SANDBOX_CARRIERS_RING_MS'
>;

export async function createCarriers(config: CarrierConfig, urls: CallbackUrls, log: Logger): Promise<Carriers> {
  const providers = new Set<Provider>();
  if (!config.PROVIDER_A_API_URL) providers.add('provider_a');
  if (!config.PROVIDER_B_API_URL) providers.add('provider_b');
  const sandbox = providers.size
    ? await startSandboxCarriers({
        port: config.SANDBOX_CARRIERS_PORT,
        speed: config.SANDBOX_CARRIERS_SPEED,
        ringMs: config.SANDBOX_CARRIERS_RING_MS,
        log: log.child({ component: 'sandbox-carriers' }),
      })
    : null;
  const providerA = new ProviderACarrier(config.PROVIDER_A_API_URL ?? sandbox!.providerAUrl, urls, config.CARRIER_TIMEOUT_MS);
  const providerB = new ProviderBCarrier(config.PROVIDER_B_API_URL ?? sandbox!.providerBUrl, urls, config.CARRIER_TIMEOUT_MS);
  log.info({ sandbox: [...providers], sandboxUrl: sandbox?.url }, 'carriers ready');
  return {
    byProvider: { provider_a: providerA, provider_b: providerB },
    providerB,
    sandbox: sandbox ? { carriers: sandbox, providers } : null,
    providerBKeyOverride: sandbox && providers.has('provider_b') ? sandbox.providerBPublicKey : null,
    close: async () => {
      await sandbox?.close();
    },
  };
}
