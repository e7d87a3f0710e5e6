/**
 * The budget of a tenant's JSON Schema (a tool's `parameters`, an agent's `analysis.schema`): its size,
 * its nesting, how many subschemas it has, and how many it has once every `$ref` is followed (its
 * expansion). The expansion bounds the work of one validation, because a validator visits a subschema
 * at most once per value it is applied to: two `$ref`s per level for 20 levels is a 1.4 KB schema whose
 * expansion is 2^20, and a reference back into itself (`{"$ref": "#"}`) has no end at all, for Ajv's
 * error list and for every consumer that walks the schema (the analysis model's stand-in included), so
 * both are refused when the schema is written. Every check here is linear in the schema's size.
 */
import { pointerToParam, SUBSCHEMA_KEYWORDS, SUBSCHEMA_LIST_KEYWORDS, SUBSCHEMA_MAP_KEYWORDS, subschemas, tooDeepAt } from './tenant-schema.js';

export interface SchemaBudget {
  /** UTF-8 bytes of the compact JSON. */
  maxBytes: number;
  /** Levels of nested JSON objects and arrays, the root being level 1. */
  maxDepth: number;
  /** Object subschemas, the root included. */
  maxSubschemas: number;
  /** Subschemas visited with every `$ref` followed (each reference counted as often as it is reached). */
  maxExpanded: number;
}

/** The same figures for both kinds of tenant schema (docs/security.md says why a person never reaches them). */
export const TENANT_SCHEMA_BUDGET: SchemaBudget = { maxBytes: 16_384, maxDepth: 16, maxSubschemas: 512, maxExpanded: 4_096 };

export interface BudgetProblem {
  /** `too_large` (bytes), `too_deep` (nesting), `too_complex` (subschemas, expansion, recursion). */
  kind: 'too_large' | 'too_deep' | 'too_complex';
  param: string;
  message: string;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const unescape = (s: string) => s.replace(/~1/g, '/').replace(/~0/g, '~');
const escape = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

class Refused extends Error {
  constructor(
    readonly at: string,
    readonly why: string,
  ) {
    super(why);
  }
}

/** What a local reference (`#`, `#/json/pointer`, `#anchor`) points at inside `root`; undefined when nothing. */
function target(root: Json, anchors: Map<string, { node: Json; pointer: string }>, ref: string): { node: unknown; pointer: string } | undefined {
  if (!ref.startsWith('#')) return undefined;
  let fragment: string;
  try {
    fragment = decodeURIComponent(ref.slice(1));
  } catch {
    return undefined;
  }
  if (fragment !== '' && !fragment.startsWith('/')) return anchors.get(fragment);
  let at: unknown = root;
  for (const part of fragment.split('/').slice(1).map(unescape)) {
    at = isObject(at) ? at[part] : Array.isArray(at) ? at[Number(part)] : undefined;
  }
  return { node: at, pointer: fragment };
}

/** The direct subschemas of `node` with their pointers (the keyword sets of tenant-schema.ts). */
function children(node: Json, pointer: string): Array<[unknown, string]> {
  const out: Array<[unknown, string]> = [];
  for (const [key, value] of Object.entries(node)) {
    const at = `${pointer}/${escape(key)}`;
    if (SUBSCHEMA_KEYWORDS.has(key)) out.push([value, at]);
    else if (SUBSCHEMA_LIST_KEYWORDS.has(key) && Array.isArray(value)) value.forEach((v, i) => out.push([v, `${at}/${i}`]));
    else if (SUBSCHEMA_MAP_KEYWORDS.has(key) && isObject(value)) for (const [name, v] of Object.entries(value)) out.push([v, `${at}/${escape(name)}`]);
  }
  return out;
}

/**
 * The expansion of `root` (subschemas with every `$ref` followed); throws Refused at the first reference
 * that leads back into a schema it is inside of, or once the count passes `max`. Each subschema's count
 * is remembered, so a shared `$defs` entry is walked once however often it is referenced.
 */
function expansion(root: Json, max: number): number {
  const anchors = new Map<string, { node: Json; pointer: string }>();
  for (const { node, pointer } of subschemas(root)) if (typeof node.$anchor === 'string') anchors.set(node.$anchor, { node, pointer });
  const counted = new Map<Json, number>();
  const inside = new Set<Json>();
  const visit = (node: unknown, pointer: string): number => {
    if (!isObject(node)) return 1;
    const known = counted.get(node);
    if (known !== undefined) return known;
    if (inside.has(node)) throw new Refused(pointer, 'refers back into itself (a recursive schema)');
    inside.add(node);
    let n = 1;
    for (const key of ['$dynamicRef', '$recursiveRef'])
      if (key in node) throw new Refused(`${pointer}/${key}`, `uses '${key}', which can make a schema recursive`);
    for (const [child, at] of children(node, pointer)) n += visit(child, at);
    if (typeof node.$ref === 'string') {
      const to = target(root, anchors, node.$ref);
      if (to) {
        try {
          n += visit(to.node, to.pointer);
        } catch (err) {
          // Name the reference that closes the loop, not where the walk found it again.
          if (err instanceof Refused && err.at === to.pointer) throw new Refused(`${pointer}/$ref`, err.why);
          throw err;
        }
      }
    }
    inside.delete(node);
    counted.set(node, n);
    if (n > max) throw new Refused(pointer, `expands to more than ${max} subschemas once its '$ref's are followed`);
    return n;
  };
  return visit(root, '');
}

/** The first way `schema` is over `budget`, `param` under `prefix` (`parameters`, `analysis.schema`); null when within. */
export function schemaBudgetProblem(schema: Json, budget: SchemaBudget, prefix: string): BudgetProblem | null {
  const bytes = Buffer.byteLength(JSON.stringify(schema));
  if (bytes > budget.maxBytes) {
    return { kind: 'too_large', param: prefix, message: `'${prefix}' is ${bytes} bytes as compact JSON; at most ${budget.maxBytes} are allowed.` };
  }
  const deep = tooDeepAt(schema, budget.maxDepth);
  if (deep !== null) {
    const param = pointerToParam(prefix, deep);
    return { kind: 'too_deep', param, message: `'${prefix}' nests deeper than ${budget.maxDepth} levels of objects and arrays at '${param}'.` };
  }
  const count = subschemas(schema).length;
  if (count > budget.maxSubschemas) {
    return { kind: 'too_complex', param: prefix, message: `'${prefix}' has ${count} subschemas; at most ${budget.maxSubschemas} are allowed.` };
  }
  try {
    expansion(schema, budget.maxExpanded);
  } catch (err) {
    if (!(err instanceof Refused)) throw err;
    const param = pointerToParam(prefix, err.at);
    return { kind: 'too_complex', param, message: `'${prefix}' ${err.why} at '${param}'.` };
  }
  return null;
}

/** The first way `schema` is over the tenant schema budget, as the contract's `<family>_schema_too_*` code; null when within. */
export function tenantBudgetProblem<F extends 'analysis' | 'parameters'>(
  schema: Json,
  family: F,
  prefix: string,
): { code: `${F}_schema_${BudgetProblem['kind']}`; param: string; message: string } | null {
  const p = schemaBudgetProblem(schema, TENANT_SCHEMA_BUDGET, prefix);
  return p && { code: `${family}_schema_${p.kind}`, param: p.param, message: p.message };
}
