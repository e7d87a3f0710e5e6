/**
 * One request to an HTTP tool's endpoint, exactly as a call makes it: the URL checked by the outbound
 * guard right before the request and the resolved address checked at connect time, the tool's
 * headers, its timeout over the whole exchange, redirects not followed, the body kept up to a cap.
 * The request itself is `guardedRequest`; this module words its outcome for tools. Never throws: a
 * failure is part of the outcome.
 */
import type { IncomingMessage } from 'node:http';
import { guardedRequest, OutboundRequestError, type GuardedResponse } from '../net/guarded-request.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type HttpCallErrorCode = 'timeout' | 'connection_failed' | 'tls_error' | 'url_not_allowed' | 'http_error';

export interface HttpCallRequest {
  url: string;
  method: HttpMethod;
  headers: Record<string, string>;
  args: Record<string, unknown>;
  timeoutMs: number;
  /** Most response bytes kept; beyond it the body is cut and returned as text. */
  maxBodyBytes: number;
}

export interface HttpCallOutcome {
  ok: boolean;
  statusCode: number | null;
  durationMs: number;
  body: unknown;
  truncated: boolean;
  error: { code: HttpCallErrorCode; message: string } | null;
}

/** GET and DELETE carry the arguments in the query string (objects and arrays JSON-encoded). */
export function buildUrl(raw: string, method: HttpMethod, args: Record<string, unknown>): URL {
  const url = new URL(raw);
  if (method === 'GET' || method === 'DELETE') {
    for (const [k, v] of Object.entries(args)) {
      if (v === undefined) continue;
      url.searchParams.append(k, v !== null && typeof v === 'object' ? JSON.stringify(v) : String(v));
    }
  }
  return url;
}

function parseBody(buf: Buffer, contentType: string | undefined, truncated: boolean): unknown {
  if (buf.length === 0) return null;
  // Cut at a UTF-8 boundary: decoding drops a partial trailing character as U+FFFD, so strip that.
  const text = buf.toString('utf8');
  if (truncated) return text.replace(/\uFFFD$/, '');
  if (contentType && /[/+]json\b/i.test(contentType)) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}

export async function callHttpTool(policy: OutboundPolicy, req: HttpCallRequest): Promise<HttpCallOutcome> {
  const started = performance.now();
  const done = (o: Omit<HttpCallOutcome, 'durationMs'>): HttpCallOutcome => ({ ...o, durationMs: Math.max(0, Math.round(performance.now() - started)) });
  const fail = (code: HttpCallErrorCode, message: string) => done({ ok: false, statusCode: null, body: null, truncated: false, error: { code, message } });

  let target: string | URL = req.url;
  try {
    target = buildUrl(req.url, req.method, req.args);
  } catch {
    // not a URL: the guard refuses it below, in its own words
  }
  const hasBody = req.method === 'POST' || req.method === 'PUT' || req.method === 'PATCH';
  const payload = hasBody ? Buffer.from(JSON.stringify(req.args)) : null;
  const headers: Record<string, string> = {
    Accept: 'application/json, text/plain;q=0.9, */*;q=0.8',
    'User-Agent': 'voice-agent-service-tools/1',
    ...req.headers,
  };
  if (payload) headers['Content-Type'] = 'application/json';

  let res: GuardedResponse;
  try {
    res = await guardedRequest(policy, target, { method: req.method, headers, body: payload, timeoutMs: req.timeoutMs, maxResponseBytes: req.maxBodyBytes });
  } catch (err) {
    if (!(err instanceof OutboundRequestError)) throw err;
    const { code, message } = requestFailure(err, req.timeoutMs);
    return fail(code, message);
  }
  let received: { bytes: Buffer; truncated: boolean };
  try {
    received = await readBody(res.body, req.maxBodyBytes);
  } catch (err) {
    if (err instanceof OutboundRequestError && err.kind === 'timeout') return fail('timeout', `No response within ${req.timeoutMs} ms.`);
    return fail('connection_failed', 'The connection broke while the response was arriving.');
  }
  const status = res.status;
  const ok = status >= 200 && status < 300;
  const redirect = status >= 300 && status < 400 ? ' (redirects are not followed)' : '';
  const body = parseBody(received.bytes, res.headers['content-type'], received.truncated);
  return done({
    ok,
    statusCode: status,
    body,
    truncated: received.truncated,
    error: ok ? null : { code: 'http_error', message: `The endpoint answered ${status}${redirect}.` },
  });
}

/** The failure of a call that got no response, in the tools' words. */
function requestFailure(err: OutboundRequestError, timeoutMs: number): { code: HttpCallErrorCode; message: string } {
  if (err.stage === 'check') return { code: err.kind === 'dns_failure' ? 'connection_failed' : 'url_not_allowed', message: err.message };
  if (err.kind === 'timeout') return { code: 'timeout', message: `No response within ${timeoutMs} ms.` };
  if (err.kind === 'blocked_address') return { code: 'url_not_allowed', message: 'The tool URL resolves to an address this service does not call.' };
  // EPROTO (https to a plain-HTTP port) has always been a connection failure for tools.
  if (err.kind === 'tls_error' && err.code !== 'EPROTO') return { code: 'tls_error', message: `TLS failed: ${err.code}.` };
  return { code: 'connection_failed', message: `Could not connect to the endpoint${err.code ? ` (${err.code})` : ''}.` };
}

/** The whole body, or its first `limit` bytes when the guard cut it for being larger. */
function readBody(body: IncomingMessage, limit: number): Promise<{ bytes: Buffer; truncated: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    body.on('data', (chunk: Buffer) => chunks.push(chunk));
    body.on('end', () => resolve({ bytes: Buffer.concat(chunks), truncated: false }));
    body.on('error', (err) => {
      if (err instanceof OutboundRequestError && err.kind === 'too_large') resolve({ bytes: Buffer.concat(chunks).subarray(0, limit), truncated: true });
      else reject(err);
    });
    body.resume();
  });
}
