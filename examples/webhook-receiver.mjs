#!/usr/bin/env node
/**
 * An example receiver of the service's webhooks (call.completed, batch.completed). Node 20, no
 * dependencies.
 *
 *   WEBHOOK_SECRET=whsec_... PORT=8080 node examples/webhook-receiver.mjs
 *   # during a rotation's 24-hour overlap, also the previous secret:
 *   WEBHOOK_SECRET=whsec_new... WEBHOOK_PREVIOUS_SECRET=whsec_old... node examples/webhook-receiver.mjs
 *
 * What it does, and what yours should do:
 *  1. Read the raw body as bytes. Verify before parsing; never re-serialise the JSON to verify.
 *  2. Verify a signature, comparing in constant time:
 *     - `X-Webhook-Signature`: hex HMAC-SHA256 of the raw body keyed with the whole `whsec_...` string;
 *     - `webhook-signature` (Standard Webhooks): `v1,<base64 HMAC-SHA256>` of `{webhook-id}.{webhook-timestamp}.{body}`
 *       keyed with the base64-decoded part after `whsec_`; the timestamp must be within 5 minutes.
 *     The service sends both on every delivery. This receiver requires the Standard Webhooks one: it
 *     covers the timestamp and the event id, so a captured request cannot be replayed later, and during a
 *     secret rotation it carries a signature for each live secret, so a receiver still on the previous
 *     secret keeps working for the 24-hour overlap. `X-Webhook-Signature` (the spec's) is checked too and
 *     reported in `verified.spec`, but it alone is not accepted: it covers only the body, so a request
 *     stripped down to it could be a replay. Missing, wrong or stale signatures get 401.
 *  3. Answer 2xx at once (the service waits at most 10 seconds, never retries, does not follow redirects),
 *     then process.
 *  4. De-duplicate by `webhook-id`: it is the event id, the same for every target of one event.
 *  5. Fill gaps with `GET /api/v1/calls/{conversation_id}` (phone calls), `GET /api/v1/realtime/conversations/{conversation_id}`
 *     (web sessions) or `GET /api/v1/batches/{batch_id}`.
 */
import http from 'node:http';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { pathToFileURL } from 'node:url';

const PREFIX = 'whsec_';
const TOLERANCE_SECONDS = 5 * 60;

function safeEqual(a, b) {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  // timingSafeEqual needs equal lengths; the length of a signature is not a secret.
  return x.length === y.length && timingSafeEqual(x, y);
}

/** `X-Webhook-Signature`: true when it matches one of `secrets`. */
export function verifySpecSignature(rawBody, header, secrets) {
  if (typeof header !== 'string' || header.length === 0) return false;
  return secrets.some((secret) => safeEqual(createHmac('sha256', secret).update(rawBody).digest('hex'), header.toLowerCase()));
}

/** Standard Webhooks `webhook-signature`: true when an entry matches one of `secrets` and the timestamp is recent. */
export function verifyStandardSignature(rawBody, headers, secrets, nowSeconds = Math.floor(Date.now() / 1000)) {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signature = headers['webhook-signature'];
  if (!id || !timestamp || !signature || !/^\d+$/.test(timestamp)) return false;
  if (Math.abs(nowSeconds - Number(timestamp)) > TOLERANCE_SECONDS) return false;
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`, 'utf8'), rawBody]);
  const expected = secrets.map((secret) => {
    const key = Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
    return createHmac('sha256', key).update(signed).digest('base64');
  });
  return signature
    .split(' ')
    .map((entry) => entry.split(','))
    .some(([version, value]) => version === 'v1' && typeof value === 'string' && expected.some((e) => safeEqual(e, value)));
}

/**
 * A receiver as an http.Server. `secrets`: the current secret, plus the previous one during a rotation.
 * `onEvent({ id, event, verified, headers })` runs for every new, verified event (not for duplicates).
 */
export function createWebhookReceiver({ secrets, onEvent = () => {}, onRejected = () => {}, maxRemembered = 10_000 }) {
  const seen = new Set();
  return http.createServer((req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks);
      const verified = {
        spec: verifySpecSignature(rawBody, req.headers['x-webhook-signature'], secrets),
        standard: verifyStandardSignature(rawBody, req.headers, secrets),
      };
      if (!verified.standard) {
        const missing = !req.headers['webhook-signature'];
        onRejected({ headers: req.headers, reason: missing ? 'missing_signature' : 'bad_signature' });
        res.writeHead(401, { 'Content-Type': 'application/json' }).end('{"error":"invalid or missing signature"}');
        return;
      }
      const id = req.headers['webhook-id'];
      const duplicate = typeof id === 'string' && seen.has(id);
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(duplicate ? '{"duplicate":true}' : '{"ok":true}');
      if (duplicate) return;
      if (typeof id === 'string') {
        seen.add(id);
        if (seen.size > maxRemembered) seen.delete(seen.values().next().value);
      }
      onEvent({ id, event: JSON.parse(rawBody.toString('utf8')), verified, headers: req.headers });
    });
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const secrets = [process.env.WEBHOOK_SECRET, process.env.WEBHOOK_PREVIOUS_SECRET].filter(Boolean);
  if (secrets.length === 0) {
    console.error('Set WEBHOOK_SECRET to the value of GET /api/v1/webhooks/secret.');
    process.exit(1);
  }
  const server = createWebhookReceiver({
    secrets,
    onEvent: ({ id, event }) => console.log(`${id} ${event.event}`, event.conversation_id ?? event.batch_id),
    onRejected: ({ reason }) => console.warn(`rejected: ${reason}`),
  });
  server.listen(Number(process.env.PORT ?? 8080), process.env.HOST ?? '127.0.0.1', () => {
    const { address, port } = server.address();
    console.log(`webhook receiver listening on http://${address}:${port}`);
  });
}
