/**
 * provider_b webhook signatures: Ed25519 over the UTF-8 string `{telnyx-timestamp}|{raw body}`,
 * base64 in `telnyx-signature-ed25519`, verified with the account's public key (base64 of the raw
 * 32-byte key) and refused when the timestamp is more than 300 seconds from now. Node's crypto does
 * Ed25519; the raw key is wrapped in its SubjectPublicKeyInfo DER prefix to import it.
 */
import { createPublicKey, verify, type KeyObject } from 'node:crypto';

export const SIGNATURE_HEADER = 'telnyx-signature-ed25519';
export const TIMESTAMP_HEADER = 'telnyx-timestamp';
export const SIGNATURE_WINDOW_S = 300;

// SubjectPublicKeyInfo of an Ed25519 key, up to the 32 key bytes (RFC 8410).
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const B64 = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=?$/;

/** True when `value` is the base64 of exactly 32 bytes (the shape of a provider_b public key). */
export function isPublicKeyShape(value: string): boolean {
  return B64.test(value) && Buffer.from(value, 'base64').length === 32;
}

// Imported keys by their base64 (every event of a call is verified with the same key); bounded.
const KEY_CACHE_LIMIT = 1000;
const keyCache = new Map<string, KeyObject>();

export function publicKeyFromBase64(value: string): KeyObject | null {
  if (!isPublicKeyShape(value)) return null;
  const cached = keyCache.get(value);
  if (cached) return cached;
  try {
    const key = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, Buffer.from(value, 'base64')]), format: 'der', type: 'spki' });
    if (keyCache.size >= KEY_CACHE_LIMIT) keyCache.delete(keyCache.keys().next().value!);
    keyCache.set(value, key);
    return key;
  } catch {
    return null;
  }
}

export type SignatureCheck = 'ok' | 'invalid_signature' | 'signature_expired';

/**
 * Checks one webhook. `nowS` is the service clock in Unix seconds. The timestamp is checked first
 * only when the signature itself verifies, so an expired answer never confirms a forged one.
 */
export function verifyProviderBSignature(
  publicKeys: KeyObject[],
  rawBody: Buffer | string,
  signature: string | undefined,
  timestamp: string | undefined,
  nowS: number,
): SignatureCheck {
  if (!signature || !timestamp || !/^[0-9]{1,12}$/.test(timestamp)) return 'invalid_signature';
  const sig = Buffer.from(signature, 'base64');
  if (sig.length !== 64) return 'invalid_signature';
  const message = Buffer.concat([Buffer.from(`${timestamp}|`, 'utf8'), Buffer.isBuffer(rawBody) ? rawBody : Buffer.from(rawBody, 'utf8')]);
  const good = publicKeys.some((key) => {
    try {
      return verify(null, message, key, sig);
    } catch {
      return false;
    }
  });
  if (!good) return 'invalid_signature';
  return Math.abs(nowS - Number(timestamp)) > SIGNATURE_WINDOW_S ? 'signature_expired' : 'ok';
}
