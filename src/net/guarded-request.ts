/**
 * One guarded HTTP request to a user-supplied URL: the single place that makes the outbound calls of
 * the HTTP tools, the webhook deliveries and the MCP transports and OAuth token requests.
 *
 * - the URL is checked by the outbound guard (`checkUrl`) right before the request, and the address
 *   actually resolved is checked again at connect time (`guardedLookup`);
 * - redirects are never followed (node:http does not; a 3xx is an answer like any other);
 * - `timeoutMs` is a deadline over the whole exchange, from the request to the last byte of the body;
 * - `maxResponseBytes` caps the body: past it the body stream errors with a `too_large` failure,
 *   after the bytes up to and including the chunk that crossed the cap;
 * - a failure is an OutboundRequestError with its `kind` (invalid_url, blocked_address, dns_failure,
 *   connection_refused, tls_error, timeout, too_large, network_error), its `stage` (the guard refused
 *   the URL, or the exchange failed) and the underlying error `code`. Each caller words it its own way.
 *
 * Why this level and not `guardedFetch` itself: the tools and the dispatcher want node's shapes (the
 * header names as written, a pooled keep-alive agent for deliveries, the status as soon as the headers
 * arrive, a Buffer body) and classified failures, where fetch gives a Response and an opaque
 * TypeError('fetch failed'). Built on fetch they would unwrap both again; `guardedFetch` is instead a
 * thin adapter over this for the SDKs that want the fetch signature.
 */
import http from 'node:http';
import https from 'node:https';
import { BlockedUrlError, checkUrl, guardedLookup, type OutboundPolicy } from './outbound-guard.js';

export type OutboundFailureKind =
  'invalid_url' | 'blocked_address' | 'dns_failure' | 'connection_refused' | 'tls_error' | 'timeout' | 'too_large' | 'network_error';

export class OutboundRequestError extends Error {
  constructor(
    readonly kind: OutboundFailureKind,
    /** `check`: the guard refused the URL before any connection; `exchange`: connecting or the exchange failed. */
    readonly stage: 'check' | 'exchange',
    message: string,
    /** The error code behind it (ECONNREFUSED, CERT_HAS_EXPIRED...; EINVALIDURL, EBLOCKED or ENOTFOUND from the guard). */
    readonly code: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

export interface GuardedRequestOptions {
  method?: string;
  headers?: Record<string, string>;
  /** Sent whole, with a Content-Length set from it unless the headers carry one. */
  body?: string | Buffer | null;
  /** A deadline over the whole exchange; the failure (or the body's error) is then `timeout`. */
  timeoutMs?: number;
  maxResponseBytes?: number;
  /** fetch's semantics: aborting destroys the request with the signal's reason, which the call then rejects with as is. */
  signal?: AbortSignal;
  /** Keep-alive agents to reuse connections; by default every request has a connection of its own. */
  agents?: { http: http.Agent; https: https.Agent };
  /** Told of every failure on the wire, also one after the response has begun (its body then fails too); not of aborts. */
  onError?(err: OutboundRequestError): void;
}

export interface GuardedResponse {
  /** The URL requested, as the guard parsed it. */
  url: URL;
  status: number;
  statusMessage: string;
  headers: http.IncomingHttpHeaders;
  /**
   * Paused until the caller reads it (or `resume()`s it to discard it). When the deadline or the cap
   * ends it, it errors with that OutboundRequestError; a broken connection errors it as node does.
   */
  body: http.IncomingMessage;
}

const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_|ERR_OSSL_|EPROTO$|HOSTNAME_MISMATCH)/;
const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_NODATA', 'EAI_FAIL']);

function refused(err: BlockedUrlError): OutboundRequestError {
  if (err.reason === 'unresolvable') return new OutboundRequestError('dns_failure', 'check', err.message, 'ENOTFOUND', { cause: err });
  if (err.reason === 'blocked_address') return new OutboundRequestError('blocked_address', 'check', err.message, 'EBLOCKED', { cause: err });
  return new OutboundRequestError('invalid_url', 'check', err.message, 'EINVALIDURL', { cause: err });
}

function classify(err: NodeJS.ErrnoException): OutboundRequestError {
  if (err instanceof OutboundRequestError) return err;
  const code = err.code ?? '';
  let kind: OutboundFailureKind = 'network_error';
  if (err instanceof BlockedUrlError || code === 'EBLOCKED') kind = 'blocked_address';
  else if (code === 'ECONNREFUSED') kind = 'connection_refused';
  else if (DNS_CODES.has(code)) kind = 'dns_failure';
  else if (TLS_CODES.test(code)) kind = 'tls_error';
  return new OutboundRequestError(kind, 'exchange', err.message, code, { cause: err });
}

function abortReason(signal: AbortSignal): Error {
  const reason = signal.reason as unknown;
  return reason instanceof Error ? reason : new DOMException('The operation was aborted.', 'AbortError');
}

/**
 * Makes the request and resolves once the response headers have arrived. Rejects with an
 * OutboundRequestError (or the abort reason); anything else it rejects with is a programming error
 * (an invalid header value, say), passed on as it was thrown.
 */
export async function guardedRequest(policy: OutboundPolicy, target: string | URL, options: GuardedRequestOptions = {}): Promise<GuardedResponse> {
  const { signal, timeoutMs, maxResponseBytes: limit } = options;
  if (signal?.aborted) throw abortReason(signal);
  let url: URL;
  try {
    url = await checkUrl(policy, String(target));
  } catch (err) {
    if (!(err instanceof BlockedUrlError)) throw err;
    const failure = refused(err);
    options.onError?.(failure);
    throw failure;
  }
  const body = typeof options.body === 'string' ? Buffer.from(options.body) : (options.body ?? null);
  const headers = { ...options.headers };
  if (body && !Object.keys(headers).some((name) => name.toLowerCase() === 'content-length')) headers['Content-Length'] = String(body.length);
  const isHttps = url.protocol === 'https:';
  const agent = options.agents ? (isHttps ? options.agents.https : options.agents.http) : false;

  return new Promise<GuardedResponse>((resolve, reject) => {
    const request = (isHttps ? https : http).request(url, { method: options.method ?? 'GET', headers, lookup: guardedLookup(policy), agent });
    let response: http.IncomingMessage | undefined;
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            const late = new OutboundRequestError('timeout', 'exchange', `No response within ${timeoutMs} ms.`, 'ETIMEDOUT');
            // Destroying the response (not the request) makes its body fail with this error.
            if (response) response.destroy(late);
            else request.destroy(late);
          }, timeoutMs);
    const onAbort = () => request.destroy(abortReason(signal!));
    signal?.addEventListener('abort', onAbort, { once: true });
    const finished = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    request.on('error', (err: NodeJS.ErrnoException) => {
      finished();
      if (signal?.aborted) return reject(abortReason(signal));
      const failure = classify(err);
      options.onError?.(failure);
      reject(failure);
    });
    request.on('response', (res) => {
      response = res;
      res.on('end', finished).on('close', finished);
      if (limit !== undefined) {
        let received = 0;
        // Paused first, so that the listener does not start the flow (nor end an empty body) before
        // the caller, a promise resolution later, reads.
        res.pause();
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          if (received > limit)
            res.destroy(new OutboundRequestError('too_large', 'exchange', `The response is larger than ${limit} bytes.`, 'ERR_RESPONSE_TOO_LARGE'));
        });
      }
      resolve({ url, status: res.statusCode ?? 0, statusMessage: res.statusMessage ?? '', headers: res.headers, body: res });
    });
    request.end(body ?? undefined);
  });
}
