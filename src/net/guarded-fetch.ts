/**
 * A `fetch` for libraries that take one (the MCP SDK transports and its OAuth helpers) that goes
 * through the outbound guard: `checkUrl` right before each request and `guardedLookup` at connect
 * time. Node's own fetch takes a `lookup` only through an undici `dispatcher`, and undici is not a
 * dependency of ours, so this is node:http/https behind the fetch signature. Redirects are never
 * followed here (callers that follow them call again, and pass the guard again); the body streams.
 */
import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { BlockedUrlError, checkUrl, guardedLookup, type OutboundPolicy } from './outbound-guard.js';

export type FetchLike = (input: string | URL, init?: RequestInit) => Promise<Response>;

/** What happened on the wire, for callers that explain failures (the SDKs wrap errors in their own). */
export interface FetchObserver {
  onNetworkError?(err: NodeJS.ErrnoException): void;
  onResponse?(status: number, contentType: string | null): void;
  /** A response body larger than this errors its stream (a peer cannot exhaust our memory). */
  maxResponseBytes?: number;
}

function bodyOf(body: RequestInit['body'], headers: Headers): Buffer | null {
  if (body == null) return null;
  if (typeof body === 'string') return Buffer.from(body);
  if (body instanceof URLSearchParams) {
    if (!headers.has('content-type')) headers.set('content-type', 'application/x-www-form-urlencoded;charset=UTF-8');
    return Buffer.from(body.toString());
  }
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  throw new TypeError('guardedFetch supports string, URLSearchParams and byte bodies only');
}

function abortError(signal: AbortSignal): Error {
  const reason = signal.reason as unknown;
  return reason instanceof Error ? reason : new DOMException('The operation was aborted.', 'AbortError');
}

export function guardedFetch(policy: OutboundPolicy, observer: FetchObserver = {}): FetchLike {
  const lookup = guardedLookup(policy);
  return async (input, init = {}) => {
    const signal = init.signal ?? undefined;
    if (signal?.aborted) throw abortError(signal);
    const raw = input instanceof URL ? input.href : String(input);
    let url: URL;
    try {
      url = await checkUrl(policy, raw);
    } catch (err) {
      if (err instanceof BlockedUrlError) {
        const code = err.reason === 'unresolvable' ? 'ENOTFOUND' : err.reason === 'blocked_address' ? 'EBLOCKED' : 'EINVALIDURL';
        const wrapped = Object.assign(err, { code });
        observer.onNetworkError?.(wrapped);
        throw new TypeError('fetch failed', { cause: wrapped });
      }
      throw err;
    }
    const headers = new Headers(init.headers);
    const payload = bodyOf(init.body, headers);
    if (payload) headers.set('content-length', String(payload.length));
    const outgoing: Record<string, string> = {};
    headers.forEach((value, name) => (outgoing[name] = value));
    const client = url.protocol === 'https:' ? https : http;

    return new Promise<Response>((resolve, reject) => {
      const request = client.request(url, { method: init.method ?? 'GET', headers: outgoing, lookup, agent: false });
      const onAbort = () => request.destroy(abortError(signal!));
      signal?.addEventListener('abort', onAbort, { once: true });
      request.on('error', (err: NodeJS.ErrnoException) => {
        signal?.removeEventListener('abort', onAbort);
        if (signal?.aborted) return reject(abortError(signal));
        observer.onNetworkError?.(err);
        reject(new TypeError('fetch failed', { cause: err }));
      });
      request.on('response', (res) => {
        const status = res.statusCode ?? 0;
        const responseHeaders = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          if (Array.isArray(value)) for (const v of value) responseHeaders.append(name, v);
          else if (value !== undefined) responseHeaders.set(name, value);
        }
        observer.onResponse?.(status, responseHeaders.get('content-type'));
        res.on('close', () => signal?.removeEventListener('abort', onAbort));
        const nullBody = status === 204 || status === 304 || init.method === 'HEAD';
        if (nullBody) res.resume();
        const limit = observer.maxResponseBytes;
        if (limit !== undefined && !nullBody) {
          let received = 0;
          res.on('data', (chunk: Buffer) => {
            received += chunk.length;
            if (received > limit) res.destroy(Object.assign(new Error(`The response is larger than ${limit} bytes.`), { code: 'ERR_RESPONSE_TOO_LARGE' }));
          });
        }
        const response = new Response(nullBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
          status: status < 200 || status > 599 ? 502 : status,
          statusText: res.statusMessage,
          headers: responseHeaders,
        });
        Object.defineProperty(response, 'url', { value: url.href });
        resolve(response);
      });
      if (payload) request.end(payload);
      else request.end();
    });
  };
}
