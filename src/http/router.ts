/**
 * The contract router: the operation matched by route-match.ts, then the security handlers and
 * request validation (openapi-backend's validators), then the handler registered under the
 * operationId. Operations without a handler answer 501 until their issue lands.
 *
 * This is openapi-backend 5.21.2's `handleRequest` flow, step for step (404/405, our post-routing,
 * post-security, unauthorized and validation-failure hooks in its order), run here instead of by the
 * library so that a request is matched once, not twice, and without its per-request promise chains and
 * lodash copies: profiling put that at a third of a request's CPU (issue 25).
 */
import type { Context } from 'koa';
import type { Logger } from 'pino';
import type { OpenAPIBackend, Context as ApiContext, Operation, Request } from 'openapi-backend';
import { refuseNul } from './nul.js';
import { ApiError, forbidden, notImplemented, routeNotFound, unauthorized } from './errors.js';
import { validationError } from './validation.js';
import type { Contract, OperationInfo } from './contract.js';
import type { AnyHandler, HandlerRequest, Handlers, OperationId } from '../contract/handlers.js';
import { hasRole, type Principal } from '../contract/principal.js';
import type { Idempotency } from './idempotency.js';
import { isWrongKind } from './security.js';
import { validateParsedRequest } from './fast-validation.js';

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
  const security = (c.security ?? {}) as Record<string, unknown>;
  for (const name in security) {
    const result = security[name];
    if (name !== 'authorized' && result && typeof result === 'object' && !('error' in result)) return result as Principal;
  }
  return { kind: 'anonymous' };
}

function allowedMethods(contract: Contract, api: OpenAPIBackend, path: string): string[] {
  const methods = new Set<string>();
  for (const info of contract.operations.values()) {
    if (api.router.matchOperation({ method: info.method, path, headers: {} })) methods.add(info.method);
  }
  if (methods.has('GET')) methods.add('HEAD'); // head.ts
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

/** `ctx.state.apiOperation` (route-match.ts), else 404 or 405 as openapi-backend's strict match decides. */
function matchedOperation(ctx: Context, api: OpenAPIBackend, contract: Contract, req: Request): Operation {
  if (ctx.state.apiOperation) return ctx.state.apiOperation;
  try {
    return api.router.matchOperation(req, true);
  } catch (err) {
    if (err instanceof Error && err.message.startsWith('405')) {
      const allow = allowedMethods(contract, api, ctx.path);
      throw new ApiError(
        405,
        'invalid_request_error',
        'method_not_allowed',
        `${ctx.state.head ? 'HEAD' : ctx.method} is not allowed on ${ctx.path}; allowed: ${allow.join(', ')}.`,
        {
          headers: { Allow: allow.join(', ') },
        },
      );
    }
    throw routeNotFound(ctx.method, ctx.path);
  }
}

const rejected = (error: unknown) => ({ error: error || new Error('security handler rejected') });

/** A scheme's result, or `{error}` when its handler rejects or throws. */
function runScheme(c: ApiContext, handler: RouterOptions['security'][string] | undefined): Promise<unknown> | undefined {
  if (!handler) return undefined;
  try {
    return handler(c).then(undefined, rejected);
  } catch (error) {
    return Promise.resolve(rejected(error));
  }
}

const succeeded = (r: unknown) => Boolean(r) && !(typeof r === 'object' && (r as { error?: unknown }).error);

/** What the router needs of an operation, worked out once at start-up instead of on each request. */
interface Plan {
  operationId: OperationId;
  info: OperationInfo;
  handler: AnyHandler | undefined;
  disabled: boolean;
  /** The operation's security requirements, and the schemes of each. */
  requirements: Array<Record<string, string[]>>;
  requirementSchemes: string[][];
  /** The schemes the requirements name, each once. */
  schemes: string[];
  /** The security handler of the one scheme, when the requirements name exactly one that has a handler. */
  scheme: RouterOptions['security'][string] | undefined;
  /** openapi-backend's `validate` option for this operation (contract.ts: all but x-validate-in-handler ones). */
  validates: boolean;
  /** A developer operation (it takes an API key): a dashboard session on it acts with its member's role. */
  takesApiKey: boolean;
  headerParameters: string[];
}

/**
 * Runs the security handler of every scheme the operation's requirements name (concurrently; a
 * rejection is kept as `{error}`): their results in the order of `plan.schemes`. (An operation of
 * one scheme, most of them, has its handler awaited by the router itself.)
 */
function runSchemes(c: ApiContext, plan: Plan, handlers: RouterOptions['security']): Promise<unknown[]> {
  return Promise.all(plan.schemes.map((name) => runScheme(c, handlers[name])));
}

/**
 * Sets `c.security`: each scheme's result and `authorized`, true when every scheme of at least one
 * requirement succeeded. Built key by key: an object spread here costs more than the rest of this
 * function (V8's slow path on Node 20).
 */
function settleSecurity(c: ApiContext, plan: Plan, results: unknown): void {
  const { schemes } = plan;
  const security: Record<string, unknown> = {};
  if (schemes.length === 1) security[schemes[0]] = results;
  else for (let i = 0; i < schemes.length; i++) security[schemes[i]] = (results as unknown[])[i];
  let authorized = false;
  for (let r = 0; r < plan.requirementSchemes.length && !authorized; r++) {
    const names = plan.requirementSchemes[r];
    authorized = true;
    for (let i = 0; i < names.length && authorized; i++) authorized = succeeded(security[names[i]]);
  }
  security.authorized = authorized;
  c.security = security as ApiContext['security'];
}

/** The request a handler receives (HandlerRequest): a class, so its `log` (made only when a handler uses it) is not a getter closure made per request. */
class HandlerRequestOf {
  private logger: Logger | undefined;
  readonly operationId: OperationId;
  readonly params: never;
  readonly query: never;
  readonly body: never;
  readonly headers: Record<string, string | undefined>;
  readonly requestId: string;
  constructor(
    c: ApiContext,
    readonly ctx: Context,
    readonly auth: Principal,
    operationId: OperationId,
    private readonly baseLog: Logger,
  ) {
    this.operationId = operationId;
    this.params = c.request.params as never;
    this.query = c.request.query as never;
    this.body = c.request.requestBody as never;
    this.headers = ctx.headers as Record<string, string | undefined>;
    this.requestId = ctx.state.requestId as string;
  }
  get log(): Logger {
    return (this.logger ??= this.baseLog.child({ requestId: this.requestId, operationId: this.operationId }));
  }
}

/** The contract router as a step of front-door.ts: answers the request whose operation route-match.ts found (404/405 when none). */
export function contractRouter(opts: RouterOptions): (ctx: Context) => Promise<void> {
  const { contract, api, handlers } = opts;

  const plans = new Map<Operation, Plan>();
  for (const operation of api.router.getOperations()) {
    const info = operation.operationId ? contract.operations.get(operation.operationId) : undefined;
    if (!info) continue;
    const requirements = (operation.security ?? []) as Array<Record<string, string[]>>;
    const requirementSchemes = requirements.map((r) => Object.keys(r));
    const schemes = [...new Set(requirementSchemes.flat())];
    const validate = api.validate;
    plans.set(operation, {
      operationId: info.operationId as OperationId,
      info,
      handler: handlers[info.operationId as OperationId] as AnyHandler | undefined,
      disabled: opts.disabled.has(info.operationId),
      requirements,
      requirementSchemes,
      schemes,
      scheme: schemes.length === 1 ? opts.security[schemes[0]] : undefined,
      validates: typeof validate === 'function' ? Boolean(validate({ api, operation } as ApiContext)) : Boolean(validate),
      takesApiKey: info.security.some((s) => 'ApiKey' in s),
      headerParameters: (operation.parameters ?? []).flatMap((p) => ('in' in p && p.in === 'header' ? [p.name] : [])),
    });
  }

  /** The checks after authentication and before validation: an unimplemented operation answers 501 whatever the body. */
  const postSecurity = (c: ApiContext, plan: Plan, principal: Principal) => {
    const { info } = plan;
    // A dashboard session on a developer operation acts with its member's role (keys and members check their own).
    if (principal.kind === 'dashboard' && plan.takesApiKey && !hasRole(principal.role, info.minimumRole)) {
      throw forbidden(
        'insufficient_role',
        `This operation needs the '${info.minimumRole}' role or higher; your role in this workspace is '${principal.role}'.`,
      );
    }
    if (!plan.handler && (c.security?.authorized || plan.requirements.length === 0)) {
      throw notImplemented(plan.operationId);
    }
  };
  const unauthorizedFailure = (c: ApiContext) => {
    const failures = Object.values(c.security ?? {})
      .filter((r) => r && typeof r === 'object' && 'error' in r)
      .map((r) => (r as { error: unknown }).error);
    const failure = failures.find((e) => !isWrongKind(e)) ?? failures[0];
    return failure instanceof ApiError ? failure : unauthorized();
  };

  /** The handler's request, after the checks the router makes before any handler runs. */
  const handlerRequest = (c: ApiContext, ctx: Context, plan: Plan, auth: Principal): HandlerRequest<OperationId> => {
    if (!plan.handler) throw notImplemented(plan.operationId);
    // x-validate-in-handler operations check the media type with the rest of the body, at their own step.
    if (!plan.info.validateInHandler) {
      checkContentType(ctx);
      refuseNul({ body: c.request.requestBody, query: c.request.query, path: c.request.params });
    }
    return new HandlerRequestOf(c, ctx, auth, plan.operationId, opts.log) as unknown as HandlerRequest<OperationId>;
  };

  return async (ctx) => {
    const req: Request = {
      method: ctx.method,
      path: ctx.path,
      headers: ctx.headers as Record<string, string | string[]>,
      query: ctx.query as Record<string, string | string[]>,
      body: (ctx.request as { body?: unknown }).body,
    };
    const operation = matchedOperation(ctx, api, contract, req);
    const plan = plans.get(operation);
    if (!plan) throw notImplemented(operation.operationId as OperationId);
    const c = { api, operation, request: api.router.parseRequest(req, operation) } as ApiContext;
    if (plan.disabled) throw routeNotFound(ctx.method, ctx.path);
    // One async frame for the whole of a request's routing: the steps between its two waits (the
    // security handlers, the handler) are plain calls.
    let results: unknown;
    if (plan.scheme) {
      try {
        results = await plan.scheme(c);
      } catch (error) {
        results = rejected(error);
      }
    } else if (plan.schemes.length > 1) results = await runSchemes(c, plan, opts.security);
    settleSecurity(c, plan, results);
    const principal = principalOf(c);
    postSecurity(c, plan, principal);
    if (!c.security.authorized && plan.requirements.length > 0) throw unauthorizedFailure(c);
    if (plan.validates) {
      c.validation = validateParsedRequest(api, operation, c.request, req.body) ?? api.validator.validateRequest(req, operation);
      if (c.validation.errors) {
        checkContentType(ctx);
        throw validationError(
          c.validation.errors,
          { requestBody: c.request.requestBody, query: c.request.query, path: c.request.params },
          plan.headerParameters,
        );
      }
      if (api.validator.coerceTypes) c.request = api.router.parseRequest(c.validation.coerced, operation);
    }
    const request = handlerRequest(c, ctx, plan, principal);
    const handler = plan.handler!;
    const { info, operationId } = plan;
    const key = info.idempotent ? ctx.get('Idempotency-Key') : '';
    const scope = principal.kind === 'api_key' || principal.kind === 'dashboard' ? principal.workspaceId : null;
    const reply =
      key && scope && opts.idempotency ? await opts.idempotency.run({ ctx, scope, operationId, key }, () => handler(request)) : await handler(request);
    ctx.status = reply.status as number;
    if (reply.headers) for (const name in reply.headers) ctx.set(name, reply.headers[name]);
    if (reply.body !== undefined) ctx.body = reply.body;
    if (reply.type) ctx.type = reply.type;
  };
}
