/**
 * The security handlers of the contract's three bearer schemes. Each token kind has its own prefix,
 * so a token of the wrong kind is refused with a message that says which kind the route takes.
 */
import type { Context as ApiContext } from 'openapi-backend';
import { safeEqual } from '../lib/tokens.js';
import { type ApiError, unauthorized } from './errors.js';
import type { Principal } from '../contract/principal.js';

export interface Authenticators {
  apiKey(token: string): Promise<Principal | null>;
  dashboardSession(token: string): Promise<Principal | null>;
  adminToken?: string;
  metricsToken?: string;
}

/**
 * A token of the other kind: developer operations take either kind, so when both schemes refuse, the
 * answer is the refusal of the scheme the token was meant for.
 */
function wrongKind(message: string): ApiError {
  return Object.assign(unauthorized(message), { wrongKind: true });
}

export function isWrongKind(err: unknown): boolean {
  return Boolean(err && typeof err === 'object' && (err as { wrongKind?: boolean }).wrongKind);
}

function bearer(c: ApiContext): string | null {
  const header = c.request.headers['authorization'];
  const m = /^Bearer\s+(\S+)\s*$/i.exec(Array.isArray(header) ? (header[0] ?? '') : (header ?? ''));
  return m ? m[1] : null;
}

export function securityHandlers(auth: Authenticators) {
  return {
    ApiKey: async (c: ApiContext): Promise<Principal> => {
      const token = bearer(c);
      if (!token) throw unauthorized();
      if (token.startsWith('ds_')) throw wrongKind('This route takes an API key (ek_...), not a dashboard session token.');
      const principal = token.startsWith('ek_') ? await auth.apiKey(token) : null;
      if (!principal) throw unauthorized('Invalid or revoked API key.');
      return principal;
    },
    DashboardSession: async (c: ApiContext): Promise<Principal> => {
      const token = bearer(c);
      if (!token) throw unauthorized("A dashboard session is required: send 'Authorization: Bearer ds_...' from POST /api/v1/auth/login.");
      if (token.startsWith('ek_')) throw wrongKind('This route takes a dashboard session token, not an API key; log in with POST /api/v1/auth/login.');
      const principal = token.startsWith('ds_') ? await auth.dashboardSession(token) : null;
      if (!principal) throw unauthorized('The dashboard session token is invalid, expired or logged out; log in again.');
      return principal;
    },
    OperatorToken: async (c: ApiContext): Promise<Principal> => {
      const token = bearer(c);
      if (!token || !auth.adminToken || !safeEqual(token, auth.adminToken)) throw unauthorized('A valid operator token is required.');
      return { kind: 'operator' };
    },
    MetricsToken: async (c: ApiContext): Promise<Principal> => {
      const token = bearer(c);
      const valid = [auth.metricsToken, auth.adminToken].some((expected) => token && expected && safeEqual(token, expected));
      if (!valid) throw unauthorized('Metrics take a bearer token: METRICS_TOKEN (or ADMIN_TOKEN).');
      return { kind: 'operator' };
    },
  };
}
