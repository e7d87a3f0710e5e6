/**
 * The carriers for the rest of the service: the real provider_a and provider_b adapters, each pointed
 * at its API base URL (the carrier's, or the sandbox carriers' that src/service.ts started in its
 * place: only the URL differs).
 */
import type { CallbackUrls, Carrier, Provider } from './carrier.js';
import { ProviderACarrier } from './provider-a/rest.js';
import { ProviderBCarrier } from './provider-b/rest.js';

export interface Carriers {
  byProvider: Record<Provider, Carrier>;
  /** provider_b's adapter as itself: inbound calls are answered and rejected by Call Control commands. */
  providerB: ProviderBCarrier;
}

export function createCarriers(opts: { providerAUrl: string; providerBUrl: string; timeoutMs: number }, urls: CallbackUrls): Carriers {
  const providerA = new ProviderACarrier(opts.providerAUrl, urls, opts.timeoutMs);
  const providerB = new ProviderBCarrier(opts.providerBUrl, urls, opts.timeoutMs);
  return { byProvider: { provider_a: providerA, provider_b: providerB }, providerB };
}
