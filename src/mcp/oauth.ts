/**
 * The OAuth 2.0 authorization-code flow with PKCE (S256) against the authorization and token URLs the
 * developer configured. The SDK's standalone helpers do the protocol work (startAuthorization builds
 * the URL and the verifier, exchangeAuthorization and refreshAuthorization make the form-encoded
 * token requests of RFC 6749 with client authentication); we hand them our explicit endpoints as the
 * server metadata instead of letting `auth()` discover them, and our guarded fetch.
 */
import { exchangeAuthorization, refreshAuthorization, startAuthorization } from '@modelcontextprotocol/sdk/client/auth.js';
import { OAuthError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';
import { guardedFetch, type FetchLike } from '../net/guarded-fetch.js';

export interface OAuthClientSettings {
  clientId: string;
  clientSecret: string | null;
  authorizationUrl: string;
  tokenUrl: string;
  scopes: string[];
  /** The MCP server's URL, sent as the RFC 8707 `resource` the token is for. */
  resource: string;
}

export interface TokenSet {
  accessToken: string;
  refreshToken: string | null;
  /** Seconds of validity the provider announced, if any. */
  expiresIn: number | null;
}

/** The token endpoint could not be used: `refused` (it answered 4xx, e.g. invalid_grant) or `unavailable`. */
export class TokenRequestError extends Error {
  constructor(
    readonly kind: 'refused' | 'unavailable',
    message: string,
  ) {
    super(message);
  }
}

function metadata(s: OAuthClientSettings) {
  return {
    issuer: new URL(s.authorizationUrl).origin,
    authorization_endpoint: s.authorizationUrl,
    token_endpoint: s.tokenUrl,
    response_types_supported: ['code'],
    code_challenge_methods_supported: ['S256'],
  };
}

function clientInformation(s: OAuthClientSettings) {
  return s.clientSecret ? { client_id: s.clientId, client_secret: s.clientSecret } : { client_id: s.clientId };
}

export async function buildAuthorizationUrl(s: OAuthClientSettings, redirectUri: string, state: string): Promise<{ url: string; codeVerifier: string }> {
  const { authorizationUrl, codeVerifier } = await startAuthorization(s.authorizationUrl, {
    metadata: metadata(s),
    clientInformation: clientInformation(s),
    redirectUrl: redirectUri,
    scope: s.scopes.length ? s.scopes.join(' ') : undefined,
    state,
    resource: s.resource,
  });
  return { url: authorizationUrl.href, codeVerifier };
}

function tokenSet(t: OAuthTokens): TokenSet {
  return { accessToken: t.access_token, refreshToken: t.refresh_token ?? null, expiresIn: typeof t.expires_in === 'number' ? t.expires_in : null };
}

async function tokenRequest(
  policy: OutboundPolicy,
  s: OAuthClientSettings,
  timeoutMs: number,
  run: (fetchFn: FetchLike) => Promise<OAuthTokens>,
): Promise<TokenSet> {
  let status: number | undefined;
  let networkCode: string | undefined;
  const guarded = guardedFetch(policy, { onResponse: (st) => (status = st), onNetworkError: (e) => (networkCode = e.code ?? 'unknown') });
  const fetchFn: FetchLike = (input, init = {}) => guarded(input, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  const host = new URL(s.tokenUrl).host;
  try {
    return tokenSet(await run(fetchFn));
  } catch (err) {
    if ((err as Error)?.name === 'TimeoutError')
      throw new TokenRequestError('unavailable', `The token endpoint ${host} did not answer within ${timeoutMs} ms.`);
    if (networkCode) throw new TokenRequestError('unavailable', `Could not reach the token endpoint ${host} (${networkCode}).`);
    if (status !== undefined && status >= 400 && status < 500) {
      const code = err instanceof OAuthError ? err.errorCode : 'invalid_response';
      throw new TokenRequestError('refused', `The token endpoint answered ${status} ${code}.`);
    }
    if (status !== undefined && status >= 500) throw new TokenRequestError('unavailable', `The token endpoint answered ${status}.`);
    throw new TokenRequestError('unavailable', 'The token endpoint did not answer with a valid token response.');
  }
}

export function exchangeCode(
  policy: OutboundPolicy,
  s: OAuthClientSettings,
  code: string,
  codeVerifier: string,
  redirectUri: string,
  timeoutMs: number,
): Promise<TokenSet> {
  return tokenRequest(policy, s, timeoutMs, (fetchFn) =>
    exchangeAuthorization(s.tokenUrl, {
      metadata: metadata(s),
      clientInformation: clientInformation(s),
      authorizationCode: code,
      codeVerifier,
      redirectUri,
      resource: s.resource,
      fetchFn,
    }),
  );
}

export function refreshTokens(policy: OutboundPolicy, s: OAuthClientSettings, refreshToken: string, timeoutMs: number): Promise<TokenSet> {
  return tokenRequest(policy, s, timeoutMs, (fetchFn) =>
    refreshAuthorization(s.tokenUrl, { metadata: metadata(s), clientInformation: clientInformation(s), refreshToken, resource: s.resource, fetchFn }),
  );
}
