/**
 * The workspace webhook secret and the two signatures of a delivery.
 *
 * - `X-Webhook-Signature` (the spec): lowercase hex HMAC-SHA256 of the raw body, keyed with the UTF-8
 *   bytes of the whole `whsec_...` string, so `createHmac('sha256', webhook_secret)` verifies it.
 * - Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`): `v1,` + base64
 *   HMAC-SHA256 of `{id}.{timestamp}.{body}`, keyed with the base64-decoded part after `whsec_`,
 *   exactly what the `standardwebhooks` library computes. Hand-written with node:crypto because the
 *   library is a dev dependency and the construction is three lines.
 */
import { createHmac, randomBytes } from 'node:crypto';

export const SECRET_PREFIX = 'whsec_';

export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

export function specSignature(secret: string, body: string): string {
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(body, 'utf8').digest('hex');
}

function standardKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

export function standardSignature(secret: string, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', standardKey(secret)).update(`${id}.${timestamp}.${body}`, 'utf8').digest('base64')}`;
}

/**
 * The headers of one delivery. `secrets` is the current secret then, during a rotation's overlap, the
 * previous one; null when the secret could not be loaded (the request then goes out unsigned).
 */
export function deliveryHeaders(opts: {
  eventId: string;
  timestamp: number;
  body: string;
  secrets: string[] | null;
  userAgent: string;
}): Record<string, string> {
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    'User-Agent': opts.userAgent,
    'webhook-id': opts.eventId,
    'webhook-timestamp': String(opts.timestamp),
  };
  if (opts.secrets && opts.secrets.length > 0) {
    headers['X-Webhook-Signature'] = specSignature(opts.secrets[0], opts.body);
    headers['webhook-signature'] = opts.secrets.map((s) => standardSignature(s, opts.eventId, opts.timestamp, opts.body)).join(' ');
  }
  return headers;
}
