/** Realtime session tokens: `rts_` + 43 base64url characters (256 bits); only the SHA-256 is stored. */
import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../lib/tokens.js';

export const TOKEN_PATTERN = /^rts_[A-Za-z0-9_-]{43}$/;

export function newSessionToken(): string {
  return `rts_${randomBytes(32).toString('base64url')}`;
}

export const hashSessionToken = sha256Hex;

/** `{PUBLIC_BASE_URL with http(s) replaced by ws(s)}/ws/{user_id}?token={token}`. */
export function sessionWsUrl(publicBaseUrl: string, userId: string, token: string): string {
  const base = publicBaseUrl.replace(/^http/, 'ws').replace(/\/+$/, '');
  return `${base}/ws/${encodeURIComponent(userId)}?token=${token}`;
}
