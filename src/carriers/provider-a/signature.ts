/**
 * provider_a request signatures (`X-Twilio-Signature`): the full URL the carrier called (query
 * included), followed by every POST parameter sorted by name as name+value with no separators,
 * HMAC-SHA1 keyed with the account's auth token, base64. The sandbox carrier signs with code of its
 * own (src/sandbox/carriers/signing.ts), so the two are checked against each other.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Form parameters as the carrier posts them; a repeated name keeps every value, in order. */
export type FormParams = Record<string, string | string[]>;

export function providerASignature(authToken: string, url: string, params: FormParams): string {
  let data = url;
  for (const name of Object.keys(params).sort()) {
    const value = params[name];
    for (const v of Array.isArray(value) ? value : [value]) data += name + v;
  }
  return createHmac('sha1', authToken).update(data, 'utf8').digest('base64');
}

/** Constant-time check of a received signature; false for a missing or malformed one. */
export function verifyProviderASignature(authToken: string, url: string, params: FormParams, signature: string | undefined): boolean {
  if (!signature) return false;
  const expected = Buffer.from(providerASignature(authToken, url, params));
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
