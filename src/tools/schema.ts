/**
 * A tool's `parameters`: a JSON Schema (2020-12) checked on write against the meta-schema and compiled,
 * and used to validate arguments before a test run.
 *
 * The schema is a tenant's: its `pattern`, `patternProperties` and `propertyNames` regexes run on RE2
 * (re2js, linear time) instead of JavaScript's backtracking engine, so `^(a+)+$` cannot hold the event
 * loop. A pattern RE2 does not support (look-around, back-references) is refused when the tool is written.
 */
import type { ErrorObject, ValidateFunction } from 'ajv';
import { RE2JS } from 're2js';
import { makeAjv } from '../contract/documents.js';
import { unprocessable } from '../errors/api-error.js';

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

const ajv = makeAjv({ allErrors: false, code: { regExp: linearRegExp } });

function pointerToParam(prefix: string, pointer: string): string {
  const parts = pointer
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  return [prefix, ...parts].join('.');
}

/** Compiles a schema without keeping it in Ajv's cache (every tool write brings a new object). */
function compile(schema: Record<string, unknown>): ValidateFunction {
  const copy = structuredClone(schema);
  // A user's $id would register the schema globally inside Ajv; the tool's schema stands alone.
  delete copy.$id;
  try {
    return ajv.compile(copy);
  } finally {
    ajv.removeSchema(copy);
  }
}

/** Throws 422 `invalid_parameters_schema` with `param` naming the offending location. */
export function checkParametersSchema(schema: Record<string, unknown>): void {
  if (!ajv.validateSchema(schema)) {
    const e = (ajv.errors ?? [])[0] as ErrorObject | undefined;
    const where = e ? pointerToParam('parameters', e.instancePath) : 'parameters';
    throw unprocessable('invalid_parameters_schema', `'parameters' is not a valid JSON Schema: ${where} ${e?.message ?? 'is invalid'}.`, where);
  }
  try {
    compile(schema);
  } catch (err) {
    throw unprocessable('invalid_parameters_schema', `'parameters' does not compile as a JSON Schema: ${(err as Error).message}.`, 'parameters');
  }
}

/** Throws 422 `invalid_arguments` (`param` is `arguments.<path>`) when args do not match. */
export function checkArguments(schema: Record<string, unknown>, args: Record<string, unknown>): void {
  const validate = compile(schema);
  if (validate(args)) return;
  const e = (validate.errors ?? [])[0] as ErrorObject;
  let param = pointerToParam('arguments', e.instancePath);
  if (e.keyword === 'required') param = `${param}.${String((e.params as { missingProperty: string }).missingProperty)}`;
  if (e.keyword === 'additionalProperties') param = `${param}.${String((e.params as { additionalProperty: string }).additionalProperty)}`;
  throw unprocessable('invalid_arguments', `The arguments do not match the tool's parameters: '${param}' ${e.message ?? 'is invalid'}.`, param);
}
