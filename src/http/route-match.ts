/**
 * Route first: the operation a request is for is found once, before anything reads the body, with
 * the same matching the contract router uses (openapi-backend's, see fast-routing.ts). Everything after
 * it (error envelope, body parsing, router, metrics) reads `ctx.state.operation`.
 */
import type { Context } from 'koa';
import type { OpenAPIBackend, Operation } from 'openapi-backend';
import type { Contract, OperationInfo } from './contract.js';

declare module 'koa' {
  interface DefaultState {
    /** The operation the request matched (method and path); absent when none does (404/405). */
    operation?: OperationInfo;
    operationId?: string;
    /** The same operation as openapi-backend describes it (dereferenced parameters, effective security), for the router. */
    apiOperation?: Operation;
  }
}

export function operationMatcher(api: OpenAPIBackend, contract: Contract): (ctx: Context) => void {
  return (ctx) => {
    const op = api.router.matchOperation({ method: ctx.method, path: ctx.path, headers: {} });
    const info = op?.operationId ? contract.operations.get(op.operationId) : undefined;
    if (info) {
      ctx.state.operation = info;
      ctx.state.operationId = info.operationId;
      ctx.state.apiOperation = op;
    }
  };
}
