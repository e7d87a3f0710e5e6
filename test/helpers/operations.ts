/**
 * A request to any operation of the contract, as its declared security takes it: the path with
 * made-up ids in its templates, and the tenant's API key, dashboard session or the operator token.
 */
import type { Contract } from '../../src/http/contract.js';
import type { operations } from '../../generated/operations.js';
import { ADMIN_TOKEN, type TestService } from './service.js';
import type { Tenant } from './fixtures.js';

export function operationRequest(
  t: TestService,
  tn: Tenant,
  contract: Contract,
  o: Pick<(typeof operations)[number], 'operationId' | 'method'> & { path: string },
) {
  const info = contract.operations.get(o.operationId)!;
  const path = o.path.replace(/\{(\w+)\}/g, (_m, name: string) => (name === 'provider' ? 'provider_a' : `${name.split('_')[0]}_01JD5Z7Q8Y1C2B3A4N5M6K7P8R`));
  const schemes = info.security.flatMap((s) => Object.keys(s));
  const token = schemes.includes('ApiKey')
    ? tn.apiKey
    : schemes.includes('DashboardSession')
      ? tn.sessionToken
      : schemes.includes('OperatorToken')
        ? ADMIN_TOKEN
        : null;
  const req = t.http[o.method.toLowerCase() as 'post'](path);
  return token ? req.set('Authorization', `Bearer ${token}`) : req;
}
