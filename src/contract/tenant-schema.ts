/**
 * JSON Schemas that tenants write (a tool's `parameters`, an agent's `analysis.schema`): compiled by an
 * Ajv (2020-12) whose `pattern`, `patternProperties` and `propertyNames` regexes run on RE2 (re2js,
 * linear time) instead of JavaScript's backtracking engine, so `^(a+)+$` cannot hold the event loop.
 * A pattern RE2 does not support (look-around, back-references) fails to compile.
 */
import type { ErrorObject, ValidateFunction, Options as AjvOptions } from 'ajv';
import type { Ajv2020 } from 'ajv/dist/2020.js';
import { RE2JS } from 're2js';
import { makeAjv } from './documents.js';

/**
 * Ajv's `code.regExp`: an RE2 matcher with RegExp's `test` (Ajv passes the `u` flag only). Ajv keys
 * compiled patterns by `toString()`, so it must name the pattern as a RegExp would.
 */
const linearRegExp = Object.assign(
  (pattern: string, flags: string) => {
    const re = RE2JS.compile(pattern);
    return { test: (s: string) => re.matcher(s).find(), toString: () => `/${pattern}/${flags}` };
  },
  { code: 're2js' },
);

/** An Ajv for tenant schemas: first error only (bounded work per check), patterns on RE2. */
export function tenantAjv(opts: AjvOptions = {}): Ajv2020 {
  return makeAjv({ allErrors: false, ...opts, code: { ...opts.code, regExp: linearRegExp } });
}

/** Why RE2 refuses a pattern (look-around, back-references, a syntax error), or null when it compiles. */
export function linearPatternProblem(pattern: string): string | null {
  try {
    RE2JS.compile(pattern);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

/** Compiles a schema without keeping it in Ajv's cache (every write brings a new object). */
export function compileStandalone(ajv: Ajv2020, schema: Record<string, unknown>): ValidateFunction {
  const copy = structuredClone(schema);
  // A user's $id would register the schema globally inside Ajv; the schema stands alone.
  delete copy.$id;
  try {
    return ajv.compile(copy);
  } finally {
    ajv.removeSchema(copy);
  }
}

/** A JSON pointer (`/a/b~1c`) as a dotted `param` under `prefix` (`prefix.a.b/c`). */
export function pointerToParam(prefix: string, pointer: string): string {
  const parts = pointer
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  return [prefix, ...parts].join('.');
}

/** The first error of a validation as `param` and words: `<param> <message>`. */
export function firstProblem(prefix: string, errors: ErrorObject[] | null | undefined): { param: string; message: string } {
  const e = errors?.[0];
  if (!e) return { param: prefix, message: 'is invalid' };
  let param = pointerToParam(prefix, e.instancePath);
  if (e.keyword === 'required') param = `${param}.${String((e.params as { missingProperty: string }).missingProperty)}`;
  if (e.keyword === 'additionalProperties') param = `${param}.${String((e.params as { additionalProperty: string }).additionalProperty)}`;
  return { param, message: e.message ?? 'is invalid' };
}

/** Keywords whose value is one subschema, a list of them, or a map of them (JSON Schema 2020-12, and draft-07's `definitions`/`additionalItems`). */
export const SUBSCHEMA_KEYWORDS = new Set([
  'items',
  'additionalItems',
  'additionalProperties',
  'unevaluatedProperties',
  'unevaluatedItems',
  'not',
  'if',
  'then',
  'else',
  'contains',
  'propertyNames',
  'contentSchema',
]);
export const SUBSCHEMA_LIST_KEYWORDS = new Set(['allOf', 'anyOf', 'oneOf', 'prefixItems']);
export const SUBSCHEMA_MAP_KEYWORDS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas']);

const escapePointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Every object subschema of `schema` with its JSON pointer, in document order, the root first
 * (boolean subschemas have no keywords and are skipped). Values of data keywords (`enum`, `const`,
 * `default`, `examples`...) are never taken for schemas, so a property named `pattern` is a property.
 */
export function subschemas(schema: Record<string, unknown>): Array<{ pointer: string; node: Record<string, unknown> }> {
  const out: Array<{ pointer: string; node: Record<string, unknown> }> = [];
  const visit = (node: unknown, pointer: string) => {
    if (!isObject(node)) return;
    out.push({ pointer, node });
    for (const [key, value] of Object.entries(node)) {
      const at = `${pointer}/${escapePointer(key)}`;
      if (SUBSCHEMA_KEYWORDS.has(key)) visit(value, at);
      else if (SUBSCHEMA_LIST_KEYWORDS.has(key) && Array.isArray(value)) value.forEach((v, i) => visit(v, `${at}/${i}`));
      else if (SUBSCHEMA_MAP_KEYWORDS.has(key) && isObject(value)) for (const [name, v] of Object.entries(value)) visit(v, `${at}/${escapePointer(name)}`);
    }
  };
  visit(schema, '');
  return out;
}

/**
 * The first place where `value` nests deeper than `maxDepth` JSON objects and arrays (the top-level
 * value is level 1), as a JSON pointer; null when it does not. Stops at the limit, so a hostile
 * document costs no more than its first `maxDepth` levels on the stack.
 */
export function tooDeepAt(value: unknown, maxDepth: number): string | null {
  const visit = (node: unknown, depth: number, pointer: string): string | null => {
    if (typeof node !== 'object' || node === null) return null;
    if (depth > maxDepth) return pointer;
    const entries: Array<[string, unknown]> = Array.isArray(node) ? node.map((v, i) => [String(i), v]) : Object.entries(node);
    for (const [key, child] of entries) {
      const found = visit(child, depth + 1, `${pointer}/${escapePointer(key)}`);
      if (found !== null) return found;
    }
    return null;
  };
  return visit(value, 1, '');
}
