/**
 * openapi-backend 5.21.2's `validateRequest` (given the matched operation), with what does not depend
 * on the request worked out once per operation and without lodash: the library builds the parameters
 * object through `omitBy`/`pickBy`, scans the operation's parameters per query value, and filters them
 * for JSON-content query parameters on every call; profiling put that at a fifth of the router's CPU
 * (issue 25). The result is the same object (`valid`, `errors` or null, `coerced`), from the same
 * compiled validators. An operation with JSON-content query parameters (our contract has none) takes
 * the library's own. Like fast-routing.ts it reaches into internals: package.json pins the version.
 */
import type { OpenAPIBackend, Operation, ParsedRequest, Request, ValidationResult } from 'openapi-backend';
import type { ErrorObject } from 'ajv';
import { MAX_ERRORS_READ } from './validation.js';
import { clampArrays, largestMaxItems } from './clamp-arrays.js';

interface OperationFacts {
  /** Query parameters whose schema is an array: a single value is validated as a one-item array. */
  arrayQuery: Set<string>;
  /** The request body's only media type is JSON: a body that is not an object must at least parse. */
  jsonOnlyBody: boolean;
  hasPathParameters: boolean;
  hasHeaderParameters: boolean;
}

/** The largest `maxItems` of each contract (clamp-arrays.ts). */
const arrayLimitByApi = new WeakMap<OpenAPIBackend, number>();

/** The per-operation facts, worked out on an operation's first validation; null: the library's own validation. */
const factsByApi = new WeakMap<OpenAPIBackend, Map<Operation, OperationFacts | null>>();
function factsOf(api: OpenAPIBackend, operation: Operation): OperationFacts | null {
  let byOperation = factsByApi.get(api);
  if (!byOperation) factsByApi.set(api, (byOperation = new Map()));
  let f = byOperation.get(operation);
  if (f !== undefined) return f;
  const parameters = (operation.parameters ?? []) as Array<{ name?: string; in?: string; schema?: { type?: unknown }; content?: Record<string, unknown> }>;
  if (!operation.operationId || parameters.some((p) => !('$ref' in p) && p.in === 'query' && p.content?.['application/json'])) f = null;
  else {
    const arrayQuery = new Set<string>();
    for (const p of parameters) {
      if (p.in !== 'query' || !p.name) continue;
      // The library's `_.find(parameters, {name, in: 'query'})`: the first parameter of that name decides.
      const first = parameters.find((q) => q.name === p.name && q.in === 'query');
      if (first === p && p.schema?.type === 'array') arrayQuery.add(p.name);
    }
    const formats = Object.keys((operation.requestBody as { content?: Record<string, unknown> } | undefined)?.content ?? {});
    f = {
      arrayQuery,
      jsonOnlyBody: formats.length === 1 && formats[0] === 'application/json',
      hasPathParameters: parameters.some((p) => p.in === 'path'),
      hasHeaderParameters: parameters.some((p) => p.in === 'header'),
    };
  }
  byOperation.set(operation, f);
  return f;
}

/**
 * The library's `validateRequest(req, operation)` on a request already parsed for that operation
 * (`router.parseRequest(req, operation)`), without parsing it again: the parts the parameter
 * validator may write to (it coerces declared parameters' types in place) are copied first, so
 * `parsed` stays as the handler will read it. Null when the operation needs the library's own.
 */
export function validateParsedRequest(api: OpenAPIBackend, operation: Operation, parsed: ParsedRequest, rawBody: unknown): ValidationResult | null {
  const f = factsOf(api, operation);
  if (!f) return null;
  const validator = api.validator;
  const errors: ErrorObject[] = [];
  const validators = validator.getRequestValidatorsForOperation(operation.operationId!) ?? [];
  const query: Record<string, unknown> = {};
  const parsedQuery = (parsed.query ?? {}) as Record<string, unknown>;
  for (const name of Object.keys(parsedQuery)) {
    const value = parsedQuery[name];
    query[name] = Array.isArray(value) ? value.slice() : typeof value === 'string' && f.arrayQuery.has(name) ? [value] : value;
  }
  const headers = parsed.headers as Record<string, unknown>;
  const parameters: Record<string, unknown> = {
    path: f.hasPathParameters ? { ...parsed.params } : parsed.params,
    query,
    header: f.hasHeaderParameters ? { ...headers } : headers,
    cookie: parsed.cookies,
  };
  if (typeof rawBody !== 'object' && rawBody !== undefined && f.jsonOnlyBody) {
    try {
      JSON.parse(`${rawBody}`);
    } catch (err) {
      if (err instanceof Error) errors.push({ keyword: 'parse', instancePath: '', schemaPath: '#/requestBody', params: [], message: err.message } as never);
    }
  }
  const rawContentType = headers['content-type'];
  const contentType = String((Array.isArray(rawContentType) ? rawContentType[0] : rawContentType) || '')
    .split(';')[0]
    .trim()
    .toLowerCase();
  const requestBody = parsed.requestBody;
  if (typeof requestBody === 'object' || contentType === 'application/json') {
    const limit = arrayLimitByApi.get(api);
    parameters.requestBody = limit === undefined ? requestBody : clampArrays(requestBody, limit);
  }
  for (const validate of validators) {
    validate(parameters);
    // Not push(...errors): an 80,000-item array's errors as arguments overflow the stack (issue 32).
    if (validate.errors) for (const e of validate.errors.slice(0, MAX_ERRORS_READ - errors.length)) errors.push(e);
  }
  // `coerced` is read only where the validator coerces (openapi-backend's coerceTypes option).
  const coerced = validator.coerceTypes ? { ...parsed, query: parameters.query, params: parameters.path } : parsed;
  return { valid: errors.length === 0, errors: errors.length ? errors : null, coerced } as ValidationResult;
}

export function precompileValidation(api: OpenAPIBackend): void {
  arrayLimitByApi.set(api, largestMaxItems(api.definition));
  const validator = api.validator;
  const original = validator.validateRequest.bind(validator);
  validator.validateRequest = ((req: Request, operation?: Operation | string): ValidationResult =>
    (operation && typeof operation === 'object' ? validateParsedRequest(api, operation, api.router.parseRequest(req, operation), req.body) : null) ??
    original(req, operation)) as typeof validator.validateRequest;
}
