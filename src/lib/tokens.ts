/** Opaque bearer secrets: random, prefixed by kind, stored only as SHA-256 hashes. */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const ALPHANUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Uniform random alphanumerics (rejection sampling keeps every character equally likely). */
export function randomAlphanumeric(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += ALPHANUM[byte % 62];
    }
  }
  return out;
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

export function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && timingSafeEqual(ab, bb);
}

/** `ek_` + 40 alphanumerics (~238 bits). */
export function newApiKey(): string {
  return `ek_${randomAlphanumeric(40)}`;
}

/** `ds_` + 43 base64url characters (256 bits). */
export function newDashboardSessionToken(): string {
  return `ds_${randomBytes(32).toString('base64url')}`;
}
