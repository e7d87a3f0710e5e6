/**
 * Every failure as the error envelope. front-door.ts renders what the body parser, CORS, the router and
 * handlers throw, because koa-body reports its own errors (malformed JSON, oversized body) as plain text.
 */
import type { Logger } from 'pino';
import { ApiError, internalError, payloadTooLarge, type ValidationIssue } from './errors.js';
import type { Contract } from './contract.js';

interface HttpishError extends Error {
  status?: number;
  statusCode?: number;
  type?: string;
  expose?: boolean;
}

/** Maps errors thrown by Koa and koa-body (raw-body, co-body) onto the catalogue. */
export function fromHttpError(err: HttpishError, limitBytes: number): ApiError<400 | 413 | 415 | 422> | null {
  const status = err.status ?? err.statusCode;
  if (err.type === 'entity.too.large' || status === 413) {
    return payloadTooLarge(`The request body exceeds the limit of ${limitBytes} bytes.`);
  }
  if (err.type === 'entity.parse.failed' || (status === 400 && /json/i.test(err.message))) {
    return new ApiError(422, 'invalid_request_error', 'invalid_json', 'The request body is not valid JSON (it must be a JSON object).');
  }
  // The JSON parser refuses prototype keys (`__proto__`, `constructor.prototype`) with a SyntaxError.
  if (status === 400 && err.name === 'SyntaxError') {
    return new ApiError(
      422,
      'invalid_request_error',
      'invalid_json',
      `The request body cannot be accepted: ${/prototype/i.test(err.message) ? 'a "__proto__" or "constructor.prototype" key is not allowed' : 'it is not valid JSON'}.`,
    );
  }
  if (err.type === 'encoding.unsupported' || err.type === 'charset.unsupported' || status === 415) {
    return new ApiError(415, 'invalid_request_error', 'unsupported_media_type', 'The request body encoding or charset is not supported.');
  }
  if (err.type === 'request.aborted') {
    return new ApiError(400, 'invalid_request_error', 'request_aborted', 'The request was aborted before its body arrived.');
  }
  if (status && status >= 400 && status < 500 && err.expose) {
    return new ApiError(400, 'invalid_request_error', 'invalid_request', err.message);
  }
  return null;
}

/** The envelope's `error` object of `err`. */
export function errorBody(err: ApiError, requestId: string | null) {
  return {
    type: err.type,
    code: err.code,
    ...(err.reason ? { reason: err.reason } : {}),
    message: err.message,
    param: err.param,
    request_id: requestId,
  };
}

export function renderError(ctx: import('koa').Context, err: ApiError, contract: Contract): void {
  ctx.status = err.status;
  for (const [name, value] of Object.entries(err.headers)) ctx.set(name, value);
  const error = errorBody(err, (ctx.state.requestId as string | undefined) ?? null);
  // Matched before the body was read (route-match.ts), so an unreadable body is answered in the operation's shape.
  const operationId = ctx.state.operationId;
  if (err.status === 422 && operationId && contract.usesListShaped422(operationId)) {
    const detail: ValidationIssue[] = err.issues.length
      ? err.issues
      : [{ loc: err.param ? ['body', ...err.param.split('.')] : ['body'], msg: err.message, type: err.code }];
    ctx.body = { detail, error };
  } else {
    ctx.body = { error };
  }
}

/**
 * The API error a failure is answered with (front-door.ts renders it): an ApiError as thrown, Koa's and
 * koa-body's errors by fromHttpError, anything else a logged 500.
 */
export function apiErrorOf(thrown: unknown, ctx: import('koa').Context, log: Logger, bodyLimitBytes: number): ApiError {
  if (thrown instanceof ApiError) return thrown;
  const err = fromHttpError(thrown as HttpishError, bodyLimitBytes) ?? internalError();
  if (err.status === 500) {
    log.error({ err: thrown, requestId: ctx.state.requestId, operationId: ctx.state.operationId }, 'unhandled error');
  }
  return err;
}
