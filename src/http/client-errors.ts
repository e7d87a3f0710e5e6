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
import type { CodeFor } from '../errors/api-error.js';

interface Answer<S extends number> {
  status: S;
  code: CodeFor<S>;
  message: string;
}

function answerFor(code: string | undefined): Answer<400> | Answer<408> | Answer<431> {
  switch (code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, code: 'request_timeout', message: 'The request did not arrive in time; the connection is closed.' };
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, code: 'headers_too_large', message: 'The request headers are larger than the server reads (16 KiB).' };
    case 'HPE_INVALID_EOF_STATE':
      return { status: 400, code: 'request_aborted', message: 'The request ended before its body arrived.' };
    default:
      return { status: 400, code: 'invalid_request', message: 'The request is not HTTP/1.1 the server can read (its request line or a header is malformed).' };
  }
}

/** The raw HTTP/1.1 response carrying `answer` in the error envelope. */
export function clientErrorResponse(answer: Answer<number>, requestId: string): string {
  const body = JSON.stringify({
    error: { type: 'invalid_request_error', code: answer.code, message: answer.message, param: null, request_id: requestId },
  });
  return [
    `HTTP/1.1 ${answer.status} ${http.STATUS_CODES[answer.status]}`,
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
      const answer = answerFor(err.code);
      const requestId = newId('request');
      log.info({ requestId, status: answer.status, code: err.code }, 'request refused by the HTTP parser');
      socket.write(clientErrorResponse(answer, requestId));
    }
    socket.destroy();
  });
}
