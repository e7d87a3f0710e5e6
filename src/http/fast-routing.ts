/**
 * openapi-backend's router rebuilds its operation list (lodash chains over the whole document) and
 * compiles a RegExp per path template on every request; profiling put that at about a fifth of a
 * request's CPU. It also parses each request twice, once before routing (only for hooks we do not use)
 * and once with the matched operation; the first parse is reduced to what the routing reads. This keeps its matching rules (exact path first, then templates by specificity;
 * 404 when no path matches, 405 when a path matches but no method) with the list and the patterns
 * built once. It reaches into the router's internals, so package.json pins openapi-backend exactly:
 * an upgrade is a deliberate change that re-runs the routing tests.
 */
import type { OpenAPIBackend, Operation } from 'openapi-backend';

function pattern(path: string): RegExp {
  const escaped = path
    .replace(/\{[^}]+\}/g, '\0')
    .split('\0')
    .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('[^/]+');
  return new RegExp(`^${escaped}$`);
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
  router.parseRequest = ((req: Parameters<typeof router.parseRequest>[0], operation?: Operation) =>
    operation
      ? parse(req, operation)
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
    const normalized = router.normalizeRequest(req);
    const path = router.normalizePath(normalized.path);
    const method = normalized.method;
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
