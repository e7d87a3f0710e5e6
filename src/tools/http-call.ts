/**
 * One request to an HTTP tool's endpoint, exactly as a call makes it: the URL checked by the outbound
 * guard right before the request and the resolved address checked at connect time, the tool's
 * headers, its timeout over the whole exchange, redirects not followed. Never throws: a failure is
 * part of the outcome. node:http is used rather than fetch because fetch cannot take a `lookup`.
 */
import http from 'node:http';
import https from 'node:https';
import { BlockedUrlError, checkUrl, guardedLookup, type OutboundPolicy } from '../net/outbound-guard.js';

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

const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_|ERR_OSSL_|HOSTNAME_MISMATCH)/;

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

  let url: URL;
  try {
    await checkUrl(policy, req.url);
    url = buildUrl(req.url, req.method, req.args);
  } catch (err) {
    if (err instanceof BlockedUrlError) {
      return err.reason === 'unresolvable' ? fail('connection_failed', err.message) : fail('url_not_allowed', err.message);
    }
    return fail('connection_failed', 'The tool URL is invalid.');
  }

  const hasBody = req.method === 'POST' || req.method === 'PUT' || req.method === 'PATCH';
  const payload = hasBody ? Buffer.from(JSON.stringify(req.args)) : null;
  const headers: Record<string, string> = { Accept: 'application/json, text/plain;q=0.9, */*;q=0.8', 'User-Agent': 'voice-agent-service-tools/1', ...req.headers };
  if (payload) {
    headers['Content-Type'] = 'application/json';
    headers['Content-Length'] = String(payload.length);
  }

  return new Promise<HttpCallOutcome>((resolve) => {
    let settled = false;
    const settle = (o: HttpCallOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(o);
    };
    const client = url.protocol === 'https:' ? https : http;
    const request = client.request(url, { method: req.method, headers, lookup: guardedLookup(policy), agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let truncated = false;
      res.on('data', (chunk: Buffer) => {
        if (truncated) return;
        if (size + chunk.length > req.maxBodyBytes) {
          chunks.push(chunk.subarray(0, req.maxBodyBytes - size));
          size = req.maxBodyBytes;
          truncated = true;
          const status = res.statusCode ?? 0;
          settle(finish(status, Buffer.concat(chunks), res.headers['content-type'], true));
          res.destroy();
          return;
        }
        chunks.push(chunk);
        size += chunk.length;
      });
      res.on('end', () => settle(finish(res.statusCode ?? 0, Buffer.concat(chunks), res.headers['content-type'], false)));
      res.on('error', () => settle(fail('connection_failed', 'The connection broke while the response was arriving.')));
    });
    const finish = (status: number, buf: Buffer, contentType: string | undefined, truncated: boolean) => {
      const body = parseBody(buf, contentType, truncated);
      const ok = status >= 200 && status < 300;
      const redirect = status >= 300 && status < 400 ? ' (redirects are not followed)' : '';
      return done({ ok, statusCode: status, body, truncated, error: ok ? null : { code: 'http_error', message: `The endpoint answered ${status}${redirect}.` } });
    };
    const timer = setTimeout(() => {
      settle(fail('timeout', `No response within ${req.timeoutMs} ms.`));
      request.destroy();
    }, req.timeoutMs);
    request.on('error', (err: NodeJS.ErrnoException) => {
      if (err instanceof BlockedUrlError || err.code === 'EBLOCKED') return settle(fail('url_not_allowed', 'The tool URL resolves to an address this service does not call.'));
      if (err.code && TLS_CODES.test(err.code)) return settle(fail('tls_error', `TLS failed: ${err.code}.`));
      settle(fail('connection_failed', `Could not connect to the endpoint${err.code ? ` (${err.code})` : ''}.`));
    });
    if (payload) request.end(payload);
    else request.end();
  });
}
