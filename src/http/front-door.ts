/**
 * Every HTTP request's way through the service, as one Koa middleware. In order: HEAD as GET
 * (head.ts) -> request id (request-id.ts) -> operation match (route-match.ts) -> [ CORS (cors.ts) ->
 * body, parsed by what the operation declares (body-parsing.ts) -> contract router (router.ts) ] ->
 * error envelope for whatever the bracket threw (envelope.ts) -> response contract check
 * (response-check.ts, when on) -> log line and metrics (observability.ts) -> `nosniff` on every answer.
 *
 * One layer, not one per step: each Koa layer is an async function of its own, with its promise, its
 * frame and a `next` to await, and eight of them cost a request more than the steps themselves did
 * (issue 37). The steps are plain functions here, in the order the layers had.
 */
import type { Context, Middleware } from 'koa';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { OpenAPIBackend } from 'openapi-backend';
import type { Contract } from './contract.js';
import { headAsGet, backToHead } from './head.js';
import { requestIdFor } from './request-id.js';
import { operationMatcher } from './route-match.js';
import { requestObserver } from './observability.js';
import { responseChecker } from './response-check.js';
import { apiErrorOf, renderError } from './envelope.js';
import { corsPolicy } from './cors.js';
import { routeNotFound } from './errors.js';

export interface FrontDoorParts {
  contract: Contract;
  api: OpenAPIBackend;
  log: Logger;
  metrics: Registry;
  contractCheck: 'off' | 'log' | 'enforce';
  coverageDir?: string;
  bodyLimitBytes: number;
  corsOrigins: string[];
  /** Reads the request's body as its operation declares (a Koa middleware: it calls `next` to go on). */
  parseBody: Middleware;
  /** Answers a request whose body, if any, has been read. */
  route: (ctx: Context) => Promise<void>;
}

export function frontDoor(parts: FrontDoorParts): Middleware {
  const { contract, log, parseBody, route, bodyLimitBytes } = parts;
  const match = operationMatcher(parts.api, contract);
  const observe = requestObserver(log, parts.metrics);
  // Off (as in production) nothing is checked.
  const check = parts.contractCheck === 'off' ? undefined : responseChecker(contract, parts.contractCheck, log, parts.coverageDir);
  const cors = corsPolicy(parts.corsOrigins);
  // An operation that takes no body (or no operation) goes to the router without the parser's step.
  const answer = (ctx: Context): Promise<void> =>
    ctx.state.operation?.requestContentTypes.length ? (parseBody(ctx, () => route(ctx)) as Promise<void>) : route(ctx);

  return async (ctx) => {
    const head = headAsGet(ctx);
    try {
      const id = requestIdFor(ctx.get('X-Request-Id'));
      ctx.state.requestId = id;
      ctx.set('X-Request-Id', id);
      match(ctx);
      const start = performance.now();
      try {
        try {
          await cors(ctx, answer);
          if (ctx.status === 404 && ctx.body == null) throw routeNotFound(ctx.method, ctx.path);
        } catch (thrown) {
          renderError(ctx, apiErrorOf(thrown, ctx, log, bodyLimitBytes), contract);
        }
        check?.(ctx);
      } finally {
        observe(ctx, start);
      }
    } finally {
      if (head) backToHead(ctx);
      // Every answer, errors included: browsers never guess a content type other than the one sent.
      ctx.set('X-Content-Type-Options', 'nosniff');
    }
  };
}
