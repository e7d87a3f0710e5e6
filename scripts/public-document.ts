/**
 * The public OpenAPI document (served at /openapi.json, what client teams generate SDKs from) derived
 * from the whole one (generated/openapi-internal.json, what the service routes and validates with):
 * without the operations no API client may call (operator administration, carrier callbacks, system
 * routes, the served browser files and dashboard), without the components only those use, and without
 * the extensions only the service reads.
 */

type Json = Record<string, any>;

/** Operations with one of these tags live in the internal document only. */
export const INTERNAL_TAGS = new Set(['Operator', 'Carrier Callbacks', 'System', 'Browser SDK', 'Dashboard']);
/** Extensions the service's own code reads (body checks in handlers, error wording); documented ones stay. */
export const INTERNAL_EXTENSIONS = new Set(['x-validate-in-handler', 'x-validate-as', 'x-unsupported-values']);
/** Components kept even when no public operation refers to them (catalogues client teams read on their own). */
const ALWAYS_KEPT = new Set(['#/components/schemas/ErrorCode']);

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

export const isInternalOperation = (op: Json): boolean => ((op.tags ?? []) as string[]).some((t) => INTERNAL_TAGS.has(t));

function withoutInternalExtensions(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutInternalExtensions);
  if (!node || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.entries(node)
      .filter(([k]) => !INTERNAL_EXTENSIONS.has(k))
      .map(([k, v]) => [k, withoutInternalExtensions(v)]),
  );
}

function refsIn(node: unknown, out: string[]): void {
  if (Array.isArray(node)) node.forEach((n) => refsIn(n, out));
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else refsIn(v, out);
    }
  }
}

const resolve = (doc: Json, ref: string): unknown =>
  ref
    .replace(/^#\//, '')
    .split('/')
    .reduce<unknown>((n, part) => (n as Json | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], doc);

/** Keeps the components reachable from what remains (paths, webhooks, the security schemes they use) and ALWAYS_KEPT. */
function pruneComponents(doc: Json): void {
  const reached = new Set<string>();
  const queue: string[] = [...ALWAYS_KEPT].filter((r) => resolve(doc, r) !== undefined);
  refsIn([doc.paths, doc.webhooks], queue);
  // Security schemes are named, not referenced: keep those the global or an operation's security uses.
  const requirements = [
    ...(doc.security ?? []),
    ...Object.values(doc.paths as Record<string, Json>).flatMap((item) => METHODS.flatMap((m) => item[m]?.security ?? [])),
  ];
  for (const requirement of requirements as Json[]) for (const scheme of Object.keys(requirement)) reached.add(`#/components/securitySchemes/${scheme}`);
  while (queue.length) {
    const ref = queue.pop()!;
    if (reached.has(ref) || !ref.startsWith('#/components/')) continue;
    reached.add(ref);
    refsIn(resolve(doc, ref), queue);
  }
  for (const [kind, entries] of Object.entries((doc.components ?? {}) as Record<string, Json>)) {
    for (const name of Object.keys(entries)) if (!reached.has(`#/components/${kind}/${name}`)) delete entries[name];
    if (Object.keys(entries).length === 0) delete doc.components[kind];
  }
}

export function publicDocument(full: Json): Json {
  const doc = withoutInternalExtensions(structuredClone(full)) as Json;
  for (const [p, item] of Object.entries(doc.paths as Record<string, Json>)) {
    for (const m of METHODS) if (item[m] && isInternalOperation(item[m])) delete item[m];
    if (!METHODS.some((m) => item[m])) delete doc.paths[p];
  }
  const used = new Set<string>();
  for (const item of Object.values(doc.paths as Record<string, Json>)) for (const m of METHODS) for (const t of item[m]?.tags ?? []) used.add(t);
  for (const op of Object.values((doc.webhooks ?? {}) as Record<string, Json>)) for (const m of METHODS) for (const t of op[m]?.tags ?? []) used.add(t);
  doc.tags = ((doc.tags ?? []) as Json[]).filter((t) => used.has(t.name));
  pruneComponents(doc);
  return doc;
}
