/**
 * A `fetch` for libraries that take one (the MCP SDK transports and its OAuth helpers) that goes
 * through the outbound guard: a thin adapter over `guardedRequest`, which checks the URL right before
 * each request and the address at connect time. Node's own fetch takes a `lookup` only through an
 * undici `dispatcher`, and undici is not a dependency of ours. Redirects are never followed here
 * (callers that follow them call again, and pass the guard again); the body streams.
 */
import { Readable } from 'node:stream';
import type { OutboundPolicy } from './outbound-guard.js';
import { guardedRequest, OutboundRequestError } from './guarded-request.js';

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

export function guardedFetch(policy: OutboundPolicy, observer: FetchObserver = {}): FetchLike {
  return async (input, init = {}) => {
    const headers = new Headers(init.headers);
    const payload = bodyOf(init.body, headers);
    if (payload) headers.set('content-length', String(payload.length));
    const outgoing: Record<string, string> = {};
    headers.forEach((value, name) => (outgoing[name] = value));
    const method = init.method ?? 'GET';
    const res = await guardedRequest(policy, input instanceof URL ? input.href : String(input), {
      method,
      headers: outgoing,
      body: payload,
      signal: init.signal ?? undefined,
      maxResponseBytes: observer.maxResponseBytes,
      onError: (err) => observer.onNetworkError?.(err),
    }).catch((err: unknown) => {
      throw err instanceof OutboundRequestError ? new TypeError('fetch failed', { cause: err }) : err;
    });
    const responseHeaders = new Headers();
    for (const [name, value] of Object.entries(res.headers)) {
      if (Array.isArray(value)) for (const v of value) responseHeaders.append(name, v);
      else if (value !== undefined) responseHeaders.set(name, value);
    }
    observer.onResponse?.(res.status, responseHeaders.get('content-type'));
    const nullBody = res.status === 204 || res.status === 304 || method === 'HEAD';
    if (nullBody) res.body.resume();
    const response = new Response(nullBody ? null : (Readable.toWeb(res.body) as ReadableStream<Uint8Array>), {
      status: res.status < 200 || res.status > 599 ? 502 : res.status,
      statusText: res.statusMessage,
      headers: responseHeaders,
    });
    Object.defineProperty(response, 'url', { value: res.url.href });
    return response;
  };
}
