/**
 * openapi-backend 5.21.2's `validateRequest` (given the matched operation), with what does not depend
 * on the request worked out once per operation and without lodash: the library builds the parameters
 * object through `omitBy`/`pickBy`, scans the operation's parameters per query value, and filters them
 * for JSON-content query parameters on every call; profiling put that at a fifth of the router's CPU
 * (issue 25). The result is the same object (`valid`, `errors` or null, `coerced`), from the same
 * compiled validators. An operation with JSON-content query parameters (our contract has none) takes
 * the library's own. Like fast-routing.ts it reaches into internals: package.json pins the version.
 */
import type { OpenAPIBackend, Operation, Request, ValidationResult } from 'openapi-backend';
import type { ErrorObject } from 'ajv';
import { MAX_ERRORS_READ } from './validation.js';

interface OperationFacts {
  /** Query parameters whose schema is an array: a single value is validated as a one-item array. */
  arrayQuery: Set<string>;
  /** The request body's only media type is JSON: a body that is not an object must at least parse. */
  jsonOnlyBody: boolean;
}

export function precompileValidation(api: OpenAPIBackend): void {
  const validator = api.validator;
  const router = api.router;
  const original = validator.validateRequest.bind(validator);
  const facts = new Map<Operation, OperationFacts | null>();
  const factsOf = (operation: Operation): OperationFacts | null => {
    let f = facts.get(operation);
    if (f !== undefined) return f;
    const parameters = (operation.parameters ?? []) as Array<{ name?: string; in?: string; schema?: { type?: unknown }; content?: Record<string, unknown> }>;
    if (parameters.some((p) => !('$ref' in p) && p.in === 'query' && p.content?.['application/json'])) f = null;
    else {
      const arrayQuery = new Set<string>();
      for (const p of parameters) {
        if (p.in !== 'query' || !p.name) continue;
        // The library's `_.find(parameters, {name, in: 'query'})`: the first parameter of that name decides.
        const first = parameters.find((q) => q.name === p.name && q.in === 'query');
        if (first === p && p.schema?.type === 'array') arrayQuery.add(p.name);
      }
      const formats = Object.keys((operation.requestBody as { content?: Record<string, unknown> } | undefined)?.content ?? {});
      f = { arrayQuery, jsonOnlyBody: formats.length === 1 && formats[0] === 'application/json' };
    }
    facts.set(operation, f);
    return f;
  };

  validator.validateRequest = ((req: Request, operation?: Operation | string): ValidationResult => {
    const f = operation && typeof operation === 'object' && operation.operationId ? factsOf(operation) : null;
    if (!f) return original(req, operation);
    const op = operation as Operation;
    const errors: ErrorObject[] = [];
    const result = { valid: true, coerced: { ...req }, errors } as ValidationResult & { coerced: Request };
    const validators = validator.getRequestValidatorsForOperation(op.operationId!) ?? [];
    const { params, query, headers, cookies, requestBody } = router.parseRequest(req, op);
    if (query && f.arrayQuery.size) {
      for (const name of Object.keys(query)) {
        if (typeof query[name] === 'string' && f.arrayQuery.has(name)) query[name] = [query[name] as string];
      }
    }
    const parameters: Record<string, unknown> = {};
    if (params != null) parameters.path = params;
    if (query != null) parameters.query = query;
    if (headers != null) parameters.header = headers;
    if (cookies != null) parameters.cookie = cookies;
    if (typeof req.body !== 'object' && req.body !== undefined && f.jsonOnlyBody) {
      try {
        JSON.parse(`${req.body}`);
      } catch (err) {
        if (err instanceof Error) errors.push({ keyword: 'parse', instancePath: '', schemaPath: '#/requestBody', params: [], message: err.message } as never);
      }
    }
    const rawContentType = (headers as Record<string, unknown>)['content-type'];
    const contentType = String((Array.isArray(rawContentType) ? rawContentType[0] : rawContentType) || '')
      .split(';')[0]
      .trim()
      .toLowerCase();
    if (typeof requestBody === 'object' || contentType === 'application/json') parameters.requestBody = requestBody;
    for (const validate of validators) {
      validate(parameters);
      // Not push(...errors): an 80,000-item array's errors as arguments overflow the stack (issue 32).
      if (validate.errors) for (const e of validate.errors.slice(0, MAX_ERRORS_READ - errors.length)) errors.push(e);
      else if (validator.coerceTypes) {
        result.coerced.query = parameters.query as Request['query'];
        result.coerced.params = parameters.path as Request['params'];
      }
    }
    if (errors.length === 0) result.errors = null;
    else result.valid = false;
    return result;
  }) as typeof validator.validateRequest;
}
