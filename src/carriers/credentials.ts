/**
 * Carrier credentials from whatever holds an account's stored config (an agent, at runtime), read by
 * shape so this room needs nothing of the domains. Plaintext: never log them.
 */
import type { CarrierCredentials, Provider } from './carrier.js';

/** The provider accounts of a holder of carrier configuration (RuntimeAgent has this shape). */
export interface CarrierAccounts {
  providerA: { accountSid: string | null; authToken: string | null } | null;
  providerB: { apiKey: string | null; connectionId: string | null } | null;
}

export class MissingCredentialsError extends Error {}

/** Whether `accounts` can place calls through `provider`. */
export function canDial(accounts: CarrierAccounts, provider: Provider): boolean {
  return provider === 'provider_a'
    ? Boolean(accounts.providerA?.accountSid && accounts.providerA.authToken)
    : Boolean(accounts.providerB?.apiKey && accounts.providerB.connectionId);
}

export function credentialsOf(accounts: CarrierAccounts, provider: Provider): CarrierCredentials {
  if (provider === 'provider_a') {
    const a = accounts.providerA;
    if (!a?.accountSid || !a.authToken) throw new MissingCredentialsError(`The agent has no provider_a account_sid and auth_token.`);
    return { provider, accountSid: a.accountSid, authToken: a.authToken };
  }
  const b = accounts.providerB;
  if (!b?.apiKey || !b.connectionId) throw new MissingCredentialsError(`The agent has no provider_b api_key and connection_id.`);
  return { provider, apiKey: b.apiKey, connectionId: b.connectionId };
}
