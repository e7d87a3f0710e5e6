/**
 * The API's errors. Every non-2xx response is an ApiError rendered into the envelope
 * `{error: {type, code, message, param, request_id}}`. Codes come from the catalogue in the contract
 * (the ErrorCode schema, generated into generated/error-catalogue.ts): a code it does not list, or a
 * status it does not list for that code, does not compile. Messages never contain secrets.
 */
import { errorCatalogue, type ErrorCode } from '../../generated/error-catalogue.js';

export { errorCatalogue, type ErrorCode };

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'conflict_error'
  | 'idempotency_error'
  | 'billing_error'
  | 'rate_limit_error'
  | 'upstream_error'
  | 'api_error';

type StatusesOf<C extends ErrorCode> = (typeof errorCatalogue)[C]['statuses'][number];
/** The codes the catalogue lists with status S. */
export type CodeFor<S extends number> = { [C in ErrorCode]: S extends StatusesOf<C> ? C : never }[ErrorCode];

/** One problem of a list-shaped 422 (`{detail: [...]}`). */
export interface ValidationIssue {
  loc: string[];
  msg: string;
  type: string;
  input?: unknown;
  ctx?: Record<string, unknown>;
}

export class ApiError<S extends number = number> extends Error {
  readonly status: S;
  readonly type: ErrorType;
  readonly code: ErrorCode;
  readonly param: string | null;
  readonly headers: Record<string, string>;
  /** The problems behind a 422, for operations whose contract uses the list-shaped body. */
  readonly issues: ValidationIssue[];
  /** The precise reason behind some codes (`recording_not_found`), sent as `error.reason`. */
  readonly reason: string | null;

  constructor(
    status: S,
    type: ErrorType,
    code: CodeFor<S>,
    message: string,
    opts: { param?: string | null; headers?: Record<string, string>; issues?: ValidationIssue[]; reason?: string } = {},
  ) {
    super(message);
    this.status = status;
    this.type = type;
    this.code = code;
    this.param = opts.param ?? null;
    this.headers = opts.headers ?? {};
    this.issues = opts.issues ?? [];
    this.reason = opts.reason ?? null;
  }
}

const make =
  <S extends number>(status: S, type: ErrorType) =>
  (code: CodeFor<S>, message: string, param: string | null = null) =>
    new ApiError(status, type, code, message, { param });

export const badRequest = make(400, 'invalid_request_error');
export const unauthorized = (message = "A valid API key is required: send 'Authorization: Bearer ek_...'.") =>
  new ApiError(401, 'authentication_error', 'unauthorized', message);
export const paymentRequired = make(402, 'billing_error');
export const forbidden = make(403, 'permission_error');
export const notFound = make(404, 'not_found_error');
export const conflict = make(409, 'conflict_error');
export const unprocessable = make(422, 'invalid_request_error');
export const badGateway = make(502, 'upstream_error');
export const tooManyRequests = (retryAfterSeconds: number, message?: string, code: CodeFor<429> = 'rate_limited') =>
  new ApiError(429, 'rate_limit_error', code, message ?? `Too many requests; retry after ${retryAfterSeconds} seconds.`, {
    headers: { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))) },
  });
/** No route for this method and path (HTTP routes and WebSocket upgrades alike). */
export const routeNotFound = (method: string, path: string) => notFound('route_not_found', `No route ${method} ${path.slice(0, 200)}.`);
/** A body over a limit; `message` says which limit. */
export const payloadTooLarge = (message: string, param: string | null = null) =>
  new ApiError(413, 'invalid_request_error', 'payload_too_large', message, { param });
export const notImplemented = (operationId: string) =>
  new ApiError(501, 'api_error', 'not_implemented', `The operation '${operationId}' is not implemented yet.`);
export const internalError = () =>
  new ApiError(500, 'api_error', 'internal_error', 'An unexpected error occurred. Quote the request id when contacting support.');
/** Every 503 says when to try again (the contract requires Retry-After on it): nothing was done, so a retry is safe. */
export const serviceUnavailable = (
  message = 'The service is temporarily unavailable; retry shortly.',
  code: CodeFor<503> = 'service_unavailable',
  retryAfterSeconds = 1,
) => new ApiError(503, 'api_error', code, message, { headers: { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))) } });

/** The same error, blamed on one field of the request (an agent's 404 as the `agent_id` of a call, ...). */
export const withParam = <S extends number>(err: ApiError<S>, param: string): ApiError<S> =>
  new ApiError(err.status, err.type, err.code as CodeFor<S>, err.message, { param, headers: err.headers, issues: err.issues });

/** A 422 code named by a problem's kind when the catalogue lists it with 422, else the generic `invalid_value`. */
export function code422(kind: string): CodeFor<422> {
  const entry = (errorCatalogue as Record<string, { statuses: readonly number[] }>)[kind];
  return entry?.statuses.includes(422) ? (kind as CodeFor<422>) : 'invalid_value';
}

/** A resource of another workspace: 403, as the spec says for agents, applied everywhere. */
export const otherWorkspace = (resource: string) => forbidden('forbidden', `This ${resource} belongs to another workspace.`);
