/** An agent's stored provider config as the credentials a carrier adapter takes (plaintext: never log them). */
import type { RuntimeAgent } from '../agents/service.js';
import type { CarrierCredentials, Provider } from './carrier.js';

export class MissingCredentialsError extends Error {}

export function credentialsOf(agent: RuntimeAgent, provider: Provider): CarrierCredentials {
  if (provider === 'provider_a') {
    const a = agent.providerA;
    if (!a?.accountSid || !a.authToken) throw new MissingCredentialsError(`The agent has no provider_a account_sid and auth_token.`);
    return { provider, accountSid: a.accountSid, authToken: a.authToken };
  }
  const b = agent.providerB;
  if (!b?.apiKey || !b.connectionId) throw new MissingCredentialsError(`The agent has no provider_b api_key and connection_id.`);
  return { provider, apiKey: b.apiKey, connectionId: b.connectionId };
}
