/** provider_a's account of an agent: account SID and auth token (the token signs its callbacks too). */
import type { CarrierCredentials } from '../carrier.js';
import { accountState, type AccountState, type CarrierAccounts, type CredentialsSchema } from '../credentials.js';

export interface ProviderACredentials extends CarrierCredentials {
  provider: 'provider_a';
  accountSid: string;
  authToken: string;
}

/** The holder's provider_a account (RuntimeAgent's `providerA`), read by shape. */
export function providerAAccount(accounts: CarrierAccounts | null): ({ accountSid: string | null; authToken: string | null } & AccountState) | null {
  return (accounts as { providerA?: ({ accountSid: string | null; authToken: string | null } & AccountState) | null } | null)?.providerA ?? null;
}

export const providerACredentials: CredentialsSchema = {
  dialFields: 'account_sid and auth_token',
  inboundFields: 'account_sid, auth_token and phone_number',
  account: (accounts) => accountState(providerAAccount(accounts)),
  credentials(accounts): ProviderACredentials | null {
    const a = providerAAccount(accounts);
    return a?.accountSid && a.authToken ? { provider: 'provider_a', accountSid: a.accountSid, authToken: a.authToken } : null;
  },
};
