/**
 * How the simulated carriers sign what they send, written from the carriers' own documentation
 * (PROTOCOLS.md) and not from the service's verifiers, so that a mistake in either side shows up in
 * the tests as a refused callback instead of being shared by both:
 * - provider_a (`X-Twilio-Signature`): the full URL called, then every POST parameter sorted by name
 *   (case-sensitive, code-unit order) as name followed by value, HMAC-SHA1 keyed with the auth token,
 *   base64.
 * - provider_b (`telnyx-signature-ed25519`, `telnyx-timestamp`): Ed25519 over the UTF-8 text
 *   `timestamp|rawBody`, base64; the account's public key is shown as the base64 of its 32 raw bytes.
 */
import { createHmac, createPrivateKey, createPublicKey, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';

/** Form parameters as posted; a repeated name keeps every value, in order. */
export type FormParams = Record<string, string | string[]>;

const byCodeUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** `X-Twilio-Signature` of a request to `url` (query included) carrying `params` (none for a GET). */
export function twilioSignature(authToken: string, url: string, params: FormParams): string {
  const pieces = [url];
  for (const name of Object.keys(params).sort(byCodeUnits)) {
    const values = params[name];
    for (const value of typeof values === 'string' ? [values] : values) pieces.push(name, value);
  }
  return createHmac('sha1', authToken).update(pieces.join(''), 'utf8').digest('base64');
}

/** A provider_b account's signing key, and its public half as the carrier's portal shows it. */
export interface WebhookKey {
  privateKey: KeyObject;
  publicKeyBase64: string;
}

/** The raw 32 public bytes, base64 (a JWK's `x` is the same bytes in base64url). */
function shownPublicKey(privateKey: KeyObject): string {
  const jwk = createPublicKey(privateKey).export({ format: 'jwk' });
  return Buffer.from(jwk.x!, 'base64url').toString('base64');
}

export function newWebhookKey(): WebhookKey {
  const { privateKey } = generateKeyPairSync('ed25519');
  return { privateKey, publicKeyBase64: shownPublicKey(privateKey) };
}

/**
 * The key whose private seed is `seed`'s first 32 bytes (a simulator or test with a stable key), as
 * RFC 8410's OneAsymmetricKey: SEQUENCE { INTEGER 0, SEQUENCE { OID 1.3.101.112 }, OCTET STRING {
 * OCTET STRING seed } }.
 */
export function webhookKeyFromSeed(seed: Buffer): WebhookKey {
  const ED25519_OID = [0x06, 0x03, 0x2b, 0x65, 0x70];
  const inner = [0x04, 0x20, ...seed.subarray(0, 32)];
  const body = [0x02, 0x01, 0x00, 0x30, ED25519_OID.length, ...ED25519_OID, 0x04, inner.length, ...inner];
  const privateKey = createPrivateKey({ key: Buffer.from([0x30, body.length, ...body]), format: 'der', type: 'pkcs8' });
  return { privateKey, publicKeyBase64: shownPublicKey(privateKey) };
}

/** The two headers a provider_b webhook carries, for `rawBody` sent at `timestampS` (Unix seconds). */
export function telnyxSignatureHeaders(privateKey: KeyObject, rawBody: string, timestampS: number): Record<string, string> {
  const signed = sign(null, Buffer.from(`${timestampS}|${rawBody}`, 'utf8'), privateKey);
  return { 'telnyx-signature-ed25519': signed.toString('base64'), 'telnyx-timestamp': String(timestampS) };
}
