/**
 * Compiled validators of tenant schemas, by a hash of their content (one tool's or agent's schema
 * serves all its checks): a bounded LRU per thread of the schema pool. A Map keeps insertion order,
 * so moving a used entry to the end makes it an LRU in a few lines; no package is needed for that.
 */
import { createHash } from 'node:crypto';
import type { ErrorObject, ValidateFunction } from 'ajv';

const MAX_ENTRIES = 200;
const compiled = new Map<string, ValidateFunction>();

/** The validator of `schema` for `kind` (which validator compiled it), compiling it on first use. */
export function compiledFor(kind: string, schema: Record<string, unknown>, compile: (s: Record<string, unknown>) => ValidateFunction): ValidateFunction {
  const key = `${kind}:${createHash('sha256').update(JSON.stringify(schema)).digest('base64url')}`;
  let v = compiled.get(key);
  if (v) compiled.delete(key);
  else {
    v = compile(schema);
    if (compiled.size >= MAX_ENTRIES) compiled.delete(compiled.keys().next().value!);
  }
  compiled.set(key, v);
  return v;
}

/** Validates and returns the first error, or null; the validator keeps no errors afterwards. */
export function firstError(validate: ValidateFunction, value: unknown): ErrorObject | null {
  if (validate(value)) return null;
  const e = validate.errors?.[0] ?? ({ instancePath: '', keyword: 'false', params: {}, schemaPath: '#', message: 'is invalid' } as ErrorObject);
  validate.errors = null;
  return { instancePath: e.instancePath, keyword: e.keyword, params: { ...e.params }, schemaPath: e.schemaPath, message: e.message };
}
