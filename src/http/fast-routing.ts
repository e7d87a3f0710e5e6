/**
 * openapi-backend's router rebuilds its operation list (lodash chains over the whole document) and
 * compiles a RegExp per path template on every request; profiling put that at about a fifth of a
 * request's CPU. It also parses each request twice, once before routing (only for hooks we do not use)
 * and once with the matched operation; the first parse is reduced to what the routing reads. This keeps its matching rules (exact path first, then templates by specificity;
 * 404 when no path matches, 405 when a path matches but no method) with the list and the patterns
 * built once. It reaches into the router's internals, so package.json pins openapi-backend exactly:
 * an upgrade is a deliberate change that re-runs the routing tests.
 *
 * The parse with the matched operation (run for the handler and again by request validation) is
 * openapi-backend 5.21.2's `parseRequest` with what does not depend on the request done once per
 * operation: its path-parameter pattern (bath-es5's, compiled on every call there) and the header,
 * query and body copies without lodash. A request with cookies, or an operation whose query parameters
 * have a style or a JSON content (our contract has neither), takes the library's own parse.
 */
import type { OpenAPIBackend, Operation, ParsedRequest, Request } from 'openapi-backend';

function pattern(path: string): RegExp {
  const escaped = path
    .replace(/\{[^}]+\}/g, '\0')
    .split('\0')
    .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('[^/]+');
  return new RegExp(`^${escaped}$`);
}

/** A malformed percent-escape stays as sent, so the parameter's own schema refuses it (422 naming it) instead of a 500. */
function decoded(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** bath-es5's path parameters: `{name}` -> `([^/]*)`, each value URI-decoded, one name with two values no match. */
function pathParameters(template: string): (path: string) => Record<string, string> | null {
  const names = [...template.matchAll(/\{([A-Za-z0-9_-]+)\}/g)].map((m) => m[1]);
  const re = new RegExp(
    `^${template
      .split(/\{[A-Za-z0-9_-]+\}/)
      .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('([^/]*)')}$`,
  );
  const repeated = new Set(names).size !== names.length;
  return (path) => {
    const m = re.exec(path);
    if (!m) return null;
    const params: Record<string, string> = {};
    for (let i = 0; i < names.length; i++) {
      const value = decoded(m[i + 1]);
      if (repeated && names[i] in params && params[names[i]] !== value) return null;
      params[names[i]] = value;
    }
    return params;
  };
}

/** lodash's cloneDeep of a parsed query string (string or string[] values; a plain object, as lodash makes of Koa's null-prototype one). */
function copyQuery(query: Record<string, unknown>): Record<string, unknown> {
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(query)) {
    const value = query[key];
    copy[key] = Array.isArray(value) ? value.slice() : value;
  }
  return copy;
}

export function precompileRouting(api: OpenAPIBackend): void {
  const router = api.router;
  const operations = router.getOperations();
  router.getOperations = () => operations;
  const exact = new Map<string, Operation[]>();
  for (const op of operations) exact.set(op.path, [...(exact.get(op.path) ?? []), op]);
  const templates = operations
    .map((op) => ({ op, re: pattern(op.path), specificity: op.path.replace(/\{.*?\}/g, '').length }))
    .sort((a, b) => b.specificity - a.specificity);

  const parse = router.parseRequest.bind(router);
  const paramsOf = new Map<string, (path: string) => Record<string, string> | null>();
  const styledQuery = new Set<Operation>();
  for (const op of operations) {
    paramsOf.set(op.path, pathParameters(op.path));
    const styled = (op.parameters ?? []).some((p) => 'in' in p && p.in === 'query' && (p.content?.['application/json'] || p.explode === false));
    if (styled) styledQuery.add(op);
  }
  const parseWith = (req: Request, operation: Operation): ParsedRequest => {
    if (req.headers.cookie !== undefined || !req.query || typeof req.query !== 'object' || styledQuery.has(operation)) return parse(req, operation);
    let requestBody = req.body;
    if (req.body && typeof req.body !== 'object') {
      try {
        requestBody = JSON.parse(String(req.body));
      } catch {
        // left as it came: validation reports it
      }
    }
    // normalizeRequest's path and method, without its copy of the request.
    let path = req.path?.trim() || '';
    if (!path.startsWith('/')) path = `/${path}`;
    path = path.split('?')[0];
    // The library's `{...normalized, params, headers, ...}`, built with one fixed shape (a spread of a
    // spread takes V8's slow path). Its headers are a copy with lower-cased names: Node's request
    // headers already have lower-case names, and nothing writes to them (request validation copies
    // them when it coerces declared header parameters), so they are passed as they are.
    return {
      method: req.method.trim().toLowerCase(),
      path,
      headers: req.headers,
      query: copyQuery(req.query),
      body: req.body,
      params: paramsOf.get(operation.path)!(router.normalizePath(path)) ?? {},
      // No Cookie header: the library's cookie.parse('') is an empty object too (of its own prototype).
      cookies: {},
      requestBody,
    } as ParsedRequest;
  };
  router.parseRequest = ((req: Request, operation?: Operation) =>
    operation
      ? parseWith(req, operation)
      : {
          method: req.method.toLowerCase(),
          path: req.path,
          headers: req.headers,
          query: {},
          params: {},
          cookies: {},
          requestBody: req.body,
          body: req.body,
        }) as typeof router.parseRequest;

  router.matchOperation = ((req: Parameters<typeof router.matchOperation>[0], strict?: boolean) => {
    // normalizeRequest's path and method, without its copy of the request.
    let path = req.path?.trim() || '';
    if (!path.startsWith('/')) path = `/${path}`;
    path = router.normalizePath(path.split('?')[0]);
    const method = req.method.trim().toLowerCase();
    const hit = exact.get(path)?.find((op) => op.method === method);
    if (hit) return hit;
    let pathMatched = false;
    for (const { op, re } of templates) {
      if (!re.test(path)) continue;
      pathMatched = true;
      if (op.method === method) return op;
    }
    if (!strict) return undefined;
    throw new Error(pathMatched ? '405-methodNotAllowed: this method is not registered for the route' : '404-notFound: no route matches request');
  }) as typeof router.matchOperation;
}
