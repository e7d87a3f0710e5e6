/**
 * Requests Node's HTTP parser cannot take never reach the app: a malformed request line or header,
 * headers larger than it reads, a body that ends before its Content-Length, and the deadlines of
 * connection-limits.ts. Node would answer them with a bare status line; here they get the error
 * envelope like every other refusal (with a request id to quote), and the connection is closed.
 *
 * This mirrors Node 20's own handler (lib/_http_server.js, socketOnError): it answers only when the
 * socket can still be written and no response of the app has started on it (otherwise the peer would
 * read a corrupted stream), and it always destroys the socket.
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { newId } from '../lib/ids.js';
import { ApiError } from './errors.js';
import { errorBody } from './envelope.js';

function refusalFor(parserCode: string | undefined): ApiError {
  switch (parserCode) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ApiError(408, 'invalid_request_error', 'request_timeout', 'The request did not arrive in time; the connection is closed.');
    case 'HPE_HEADER_OVERFLOW':
      return new ApiError(431, 'invalid_request_error', 'headers_too_large', 'The request headers are larger than the server reads (16 KiB).');
    case 'HPE_INVALID_EOF_STATE':
      return new ApiError(400, 'invalid_request_error', 'request_aborted', 'The request ended before its body arrived.');
    default:
      return new ApiError(
        400,
        'invalid_request_error',
        'invalid_request',
        'The request is not HTTP/1.1 the server can read (its request line or a header is malformed).',
      );
  }
}

/** The raw HTTP/1.1 response carrying `err` in the error envelope (there is no Koa context to render it). */
function rawResponse(err: ApiError, requestId: string): string {
  const body = JSON.stringify({ error: errorBody(err, requestId) });
  return [
    `HTTP/1.1 ${err.status} ${http.STATUS_CODES[err.status]}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    `X-Request-Id: ${requestId}`,
    'X-Content-Type-Options: nosniff',
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}

export function answerClientErrors(server: http.Server, log: Logger): void {
  server.on('clientError', (err: Error & { code?: string }, socket: Duplex) => {
    // Node's own field: the app's response on this connection, if one exists.
    const inFlight = (socket as Duplex & { _httpMessage?: http.ServerResponse })._httpMessage;
    if (socket.writable && !inFlight?.headersSent && err.code !== 'ECONNRESET') {
      const refusal = refusalFor(err.code);
      const requestId = newId('request');
      log.info({ requestId, status: refusal.status, code: err.code }, 'request refused by the HTTP parser');
      socket.write(rawResponse(refusal, requestId));
    }
    socket.destroy();
  });
}
