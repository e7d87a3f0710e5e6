/** provider_b's account of an agent: API key and Call Control connection (its public key checks its webhooks). */
import { accountState, type CredentialsSchema } from '../credentials.js';

export const providerBCredentials: CredentialsSchema = {
  dialFields: 'api_key and connection_id',
  inboundFields: 'api_key, connection_id, phone_number and public_key',
  account: (accounts) => accountState(accounts.providerB),
  credentials(accounts) {
    const b = accounts.providerB;
    return b?.apiKey && b.connectionId ? { provider: 'provider_b', apiKey: b.apiKey, connectionId: b.connectionId } : null;
  },
};
