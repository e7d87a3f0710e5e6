/**
 * Handler types derived from the generated contract types: a handler for operation O receives O's
 * params, query and body, and may only reply with a success status O declares, with its body type.
 * Errors are thrown as ApiError (see errors.ts); the response check verifies their status too.
 */
import type { Context } from 'koa';
import type { Logger } from 'pino';
import type { operations } from '../../generated/openapi.js';
import type { Principal } from './principal.js';

export type OperationId = keyof operations;
type Op<O extends OperationId> = operations[O];

type ContentOf<T> = T extends { content: infer C } ? C : never;
/** The JSON body when the operation has one, else the body of its one other media type. */
type FirstContent<C> = C extends { 'application/json': infer B } ? B : C extends Record<string, infer B> ? B : undefined;

export type RequestBody<O extends OperationId> =
  Op<O> extends { requestBody: infer R }
    ? FirstContent<ContentOf<R>>
    : Op<O> extends { requestBody?: infer R }
      ? FirstContent<ContentOf<R>> | undefined
      : undefined;
export type PathParams<O extends OperationId> =
  Op<O> extends { parameters: { path: infer P } } ? (P extends Record<string, unknown> ? P : Record<string, never>) : Record<string, never>;
export type QueryParams<O extends OperationId> =
  Op<O> extends { parameters: { query?: infer Q } } ? (Q extends Record<string, unknown> ? Q : Record<string, never>) : Record<string, never>;

type Responses<O extends OperationId> = Op<O>['responses'];
/** Any status the operation declares; errors are normally thrown as ApiError instead. */
type SuccessStatus<O extends OperationId> = Extract<keyof Responses<O>, number>;
type ResponseBody<R> = R extends { content: infer C } ? FirstContent<C> : undefined;

export type Reply<O extends OperationId> = {
  [S in SuccessStatus<O>]: {
    status: S;
    body: ResponseBody<Responses<O>[S]>;
    headers?: Record<string, string>;
    /** Content type when the operation answers something other than JSON. */
    type?: string;
  };
}[SuccessStatus<O>];

export interface HandlerRequest<O extends OperationId> {
  operationId: O;
  params: PathParams<O>;
  query: QueryParams<O>;
  body: RequestBody<O>;
  headers: Record<string, string | undefined>;
  auth: Principal;
  requestId: string;
  log: Logger;
  /** The Koa context, for the few handlers that need the raw request (signatures, uploads). */
  ctx: Context;
}

export type Handler<O extends OperationId> = (req: HandlerRequest<O>) => Promise<Reply<O>>;
export type Handlers = { [O in OperationId]?: Handler<O> };

/** The shape every Reply has, for the one place that writes replies to Koa. */
export interface AnyReply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  type?: string;
}
export type AnyHandler = (req: HandlerRequest<OperationId>) => Promise<AnyReply>;
