/** provider_b's account of an agent: API key and Call Control connection (its public key checks its webhooks). */
import type { CarrierCredentials } from '../carrier.js';
import { accountState, type AccountState, type CarrierAccounts, type CredentialsSchema } from '../credentials.js';

export interface ProviderBCredentials extends CarrierCredentials {
  provider: 'provider_b';
  apiKey: string;
  connectionId: string;
}

type Account = { apiKey: string | null; connectionId: string | null; publicKey?: string | null } & AccountState;

/** The holder's provider_b account (RuntimeAgent's `providerB`), read by shape. */
export function providerBAccount(accounts: CarrierAccounts | null): Account | null {
  return (accounts as { providerB?: Account | null } | null)?.providerB ?? null;
}

export const providerBCredentials: CredentialsSchema = {
  dialFields: 'api_key and connection_id',
  inboundFields: 'api_key, connection_id, phone_number and public_key',
  account: (accounts) => accountState(providerBAccount(accounts)),
  credentials(accounts): ProviderBCredentials | null {
    const b = providerBAccount(accounts);
    return b?.apiKey && b.connectionId ? { provider: 'provider_b', apiKey: b.apiKey, connectionId: b.connectionId } : null;
  },
};
