/** provider_a's account of an agent: account SID and auth token (the token signs its callbacks too). */
import type { CarrierCredentials } from '../carrier.js';
import { accountState, heldAccount, type AccountState, type CarrierAccounts, type CredentialsSchema } from '../credentials.js';

export interface ProviderACredentials extends CarrierCredentials {
  provider: 'provider_a';
  accountSid: string;
  authToken: string;
}

/** The holder's provider_a account (its `provider_a_config`), read by shape. */
export function providerAAccount(accounts: CarrierAccounts | null): ({ accountSid: string | null; authToken: string | null } & AccountState) | null {
  const a = heldAccount(accounts, 'provider_a');
  return a && { accountSid: a.config.account_sid ?? null, authToken: a.config.auth_token ?? null, ...a };
}

export const providerACredentials: CredentialsSchema = {
  dialFields: 'account_sid and auth_token',
  inboundFields: 'account_sid, auth_token and phone_number',
  agentConfig: { secretFields: ['auth_token'], requiredFields: ['account_sid', 'auth_token'] },
  account: (accounts) => accountState(providerAAccount(accounts)),
  credentials(accounts): ProviderACredentials | null {
    const a = providerAAccount(accounts);
    return a?.accountSid && a.authToken ? { provider: 'provider_a', accountSid: a.accountSid, authToken: a.authToken } : null;
  },
};
