/**
 * The contract router: openapi-backend matches the operation, runs the security handler and request
 * validation, then the handler registered under the operationId. Operations without a handler answer
 * 501 until their issue lands.
 */
import type { Context, Middleware } from 'koa';
import type { Logger } from 'pino';
import type { OpenAPIBackend, Context as ApiContext } from 'openapi-backend';
import { refuseNul } from './nul.js';
import { ApiError, forbidden, notImplemented, routeNotFound, unauthorized } from './errors.js';
import { validationError } from './validation.js';
import type { Contract } from './contract.js';
import type { AnyHandler, Handlers, OperationId } from '../contract/handlers.js';
import { hasRole, type Principal } from '../contract/principal.js';
import type { Idempotency } from './idempotency.js';
import { isWrongKind } from './security.js';

export interface RouterOptions {
  contract: Contract;
  api: OpenAPIBackend;
  handlers: Handlers;
  security: Record<string, (c: ApiContext) => Promise<Principal>>;
  log: Logger;
  /** Operations this deployment does not offer (operator routes without ADMIN_TOKEN, ...): they answer 404. */
  disabled: ReadonlySet<string>;
  /** Applied to operations that declare the `Idempotency-Key` header. */
  idempotency?: Idempotency;
}

function principalOf(c: ApiContext): Principal {
  for (const [name, result] of Object.entries(c.security ?? {})) {
    if (name !== 'authorized' && result && typeof result === 'object' && !('error' in result)) return result as Principal;
  }
  return { kind: 'anonymous' };
}

function allowedMethods(contract: Contract, api: OpenAPIBackend, path: string): string[] {
  const methods = new Set<string>();
  for (const info of contract.operations.values()) {
    if (api.router.matchOperation({ method: info.method, path, headers: {} })) methods.add(info.method);
  }
  return [...methods];
}

/** 415 when a body arrives in a media type the matched operation does not take. */
export function checkContentType(ctx: Context): void {
  const info = ctx.state.operation;
  if (!info || info.requestContentTypes.length === 0) return;
  const hasBody = Number(ctx.get('Content-Length') || 0) > 0 || ctx.get('Transfer-Encoding') !== '';
  if (hasBody && !ctx.is(...info.requestContentTypes)) {
    throw new ApiError(415, 'invalid_request_error', 'unsupported_media_type', `Content-Type must be ${info.requestContentTypes.join(' or ')}.`);
  }
}

export function contractRouter(opts: RouterOptions): Middleware {
  const { contract, api, handlers } = opts;
  api.register({
    notFound: (_c: ApiContext, ctx: Context) => {
      throw routeNotFound(ctx.method, ctx.path);
    },
    methodNotAllowed: (_c: ApiContext, ctx: Context) => {
      const allow = allowedMethods(contract, api, ctx.path);
      throw new ApiError(405, 'invalid_request_error', 'method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}; allowed: ${allow.join(', ')}.`, {
        headers: { Allow: allow.join(', ') },
      });
    },
    postRoutingHandler: (c: ApiContext, ctx: Context) => {
      if (c.operation && opts.disabled.has(c.operation.operationId as string)) {
        throw routeNotFound(ctx.method, ctx.path);
      }
    },
    // Runs after authentication and before validation: an unimplemented operation answers 501 whatever the body.
    postSecurityHandler: (c: ApiContext, ctx: Context) => {
      const operationId = c.operation?.operationId as OperationId | undefined;
      const principal = principalOf(c);
      const info = ctx.state.operation;
      // A dashboard session on a developer operation acts with its member's role (keys and members check their own).
      if (info && principal.kind === 'dashboard' && info.security.some((s) => 'ApiKey' in s) && !hasRole(principal.role, info.minimumRole)) {
        throw forbidden(
          'insufficient_role',
          `This operation needs the '${info.minimumRole}' role or higher; your role in this workspace is '${principal.role}'.`,
        );
      }
      if (operationId && !handlers[operationId] && (c.security?.authorized || (c.operation.security ?? []).length === 0)) {
        throw notImplemented(operationId);
      }
    },
    unauthorizedHandler: (c: ApiContext) => {
      const failures = Object.values(c.security ?? {})
        .filter((r) => r && typeof r === 'object' && 'error' in r)
        .map((r) => (r as { error: unknown }).error);
      const failure = failures.find((e) => !isWrongKind(e)) ?? failures[0];
      throw failure instanceof ApiError ? failure : unauthorized();
    },
    validationFail: (c: ApiContext, ctx: Context) => {
      checkContentType(ctx);
      throw validationError(c.validation.errors ?? [], { requestBody: c.request.requestBody, query: c.request.query, path: c.request.params });
    },
  });
  for (const [scheme, handler] of Object.entries(opts.security)) api.registerSecurityHandler(scheme, handler);

  for (const [operationId, info] of contract.operations) {
    const handler = handlers[operationId as OperationId] as AnyHandler | undefined;
    api.register(operationId, async (c: ApiContext, ctx: Context) => {
      if (!handler) throw notImplemented(operationId);
      // x-validate-in-handler operations check the media type with the rest of the body, at their own step.
      if (!info.validateInHandler) {
        checkContentType(ctx);
        refuseNul({ body: c.request.requestBody, query: c.request.query, path: c.request.params });
      }
      let log: Logger | undefined;
      const auth = principalOf(c);
      const invoke = () =>
        handler({
          operationId: operationId as OperationId,
          params: c.request.params as never,
          query: c.request.query as never,
          body: c.request.requestBody as never,
          headers: ctx.headers as Record<string, string | undefined>,
          auth,
          requestId: ctx.state.requestId as string,
          get log() {
            return (log ??= opts.log.child({ requestId: ctx.state.requestId, operationId }));
          },
          ctx,
        });
      const key = info.idempotent ? ctx.get('Idempotency-Key') : '';
      const scope = auth.kind === 'api_key' || auth.kind === 'dashboard' ? auth.workspaceId : null;
      const reply = key && scope && opts.idempotency ? await opts.idempotency.run({ ctx, scope, operationId, key }, invoke) : await invoke();
      ctx.status = reply.status as number;
      for (const [name, value] of Object.entries(reply.headers ?? {})) ctx.set(name, value);
      if (reply.body !== undefined) ctx.body = reply.body;
      if (reply.type) ctx.type = reply.type;
    });
  }

  return async (ctx) => {
    await api.handleRequest(
      {
        method: ctx.method,
        path: ctx.path,
        headers: ctx.headers as Record<string, string | string[]>,
        query: ctx.query as Record<string, string | string[]>,
        body: (ctx.request as { body?: unknown }).body,
      },
      ctx,
    );
  };
}
