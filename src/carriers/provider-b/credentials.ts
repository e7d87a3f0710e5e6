/** provider_b's account of an agent: API key and Call Control connection (its public key checks its webhooks). */
import type { CarrierCredentials } from '../carrier.js';
import { accountState, heldAccount, type AccountState, type CarrierAccounts, type CredentialsSchema } from '../credentials.js';

export interface ProviderBCredentials extends CarrierCredentials {
  provider: 'provider_b';
  apiKey: string;
  connectionId: string;
}

type Account = { apiKey: string | null; connectionId: string | null; publicKey: string | null } & AccountState;

/** The holder's provider_b account (its `provider_b_config`), read by shape. */
export function providerBAccount(accounts: CarrierAccounts | null): Account | null {
  const b = heldAccount(accounts, 'provider_b');
  return b && { apiKey: b.config.api_key ?? null, connectionId: b.config.connection_id ?? null, publicKey: b.config.public_key ?? null, ...b };
}

export const providerBCredentials: CredentialsSchema = {
  dialFields: 'api_key and connection_id',
  inboundFields: 'api_key, connection_id, phone_number and public_key',
  agentConfig: { secretFields: ['api_key', 'public_key'], requiredFields: ['api_key', 'connection_id', 'public_key'] },
  account: (accounts) => accountState(providerBAccount(accounts)),
  credentials(accounts): ProviderBCredentials | null {
    const b = providerBAccount(accounts);
    return b?.apiKey && b.connectionId ? { provider: 'provider_b', apiKey: b.apiKey, connectionId: b.connectionId } : null;
  },
};
