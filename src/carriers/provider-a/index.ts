/** provider_a as a plug-in: its REST API, callbacks, media framing and account. */
import type { CarrierModule } from '../plugin.js';
import { providerACallbacks } from './callbacks.js';
import { providerACredentials } from './credentials.js';
import { providerAMedia } from './media.js';
import { ProviderACarrier } from './rest.js';

export const providerA: CarrierModule = {
  provider: 'provider_a',
  credentials: providerACredentials,
  restApi: true,
  create: ({ apiUrl, urls, timeoutMs }) => ({
    provider: 'provider_a',
    rest: new ProviderACarrier(apiUrl, urls, timeoutMs),
    callbacks: providerACallbacks(urls),
    media: { kind: 'websocket', dialect: providerAMedia },
    credentials: providerACredentials,
    machineResultAfterGreeting: true,
  }),
};
