/**
 * Operations marked `x-validate-in-handler` check their body at a step of their own (the spec fixes
 * realtime session creation's order: authentication and billing come before the body). For them the
 * body parser's failures (malformed JSON 400, too large 413, bad encoding 415) are kept on
 * `ctx.state.bodyError` instead of answered at once (the parser knows the operation: route first), and
 * the handler raises them at that step.
 */
import type { Context } from 'koa';
import { fromHttpError } from './envelope.js';
import { ApiError, badRequest } from './errors.js';

/** The body parser's failure kept for this request, as the API error it would have been. */
export function deferredBodyError(ctx: Context, bodyLimitBytes: number): ApiError<400 | 413 | 415 | 422> | null {
  const err = ctx.state.bodyError as Error | undefined;
  if (!err) return null;
  return fromHttpError(err, bodyLimitBytes) ?? badRequest('invalid_request', 'The request body could not be read.');
}
