/** provider_a's account of an agent: account SID and auth token (the token signs its callbacks too). */
import { accountState, type CredentialsSchema } from '../credentials.js';

export const providerACredentials: CredentialsSchema = {
  dialFields: 'account_sid and auth_token',
  inboundFields: 'account_sid, auth_token and phone_number',
  account: (accounts) => accountState(accounts.providerA),
  credentials(accounts) {
    const a = accounts.providerA;
    return a?.accountSid && a.authToken ? { provider: 'provider_a', accountSid: a.accountSid, authToken: a.authToken } : null;
  },
};
