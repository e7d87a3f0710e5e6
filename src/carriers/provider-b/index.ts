/** provider_b as a plug-in: its Call Control API, webhooks, media framing and account. */
import type { CarrierModule } from '../plugin.js';
import { providerBCallbacks } from './callbacks.js';
import { providerBCredentials } from './credentials.js';
import { providerBMedia } from './media.js';
import { ProviderBCarrier } from './rest.js';

export const providerB: CarrierModule = {
  provider: 'provider_b',
  credentials: providerBCredentials,
  restApi: true,
  create: ({ apiUrl, urls, timeoutMs, verifyKeyOverride }) => {
    const rest = new ProviderBCarrier(apiUrl, urls, timeoutMs);
    return {
      provider: 'provider_b',
      rest,
      callbacks: providerBCallbacks(rest, verifyKeyOverride ?? null),
      media: { kind: 'websocket', dialect: providerBMedia },
      credentials: providerBCredentials,
      machineResultAfterGreeting: false,
    };
  },
};
