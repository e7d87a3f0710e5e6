/**
 * A tool's `parameters`: a JSON Schema (2020-12) checked on write against the meta-schema and compiled,
 * and used to validate arguments before a test run.
 *
 * The schema is a tenant's: it compiles on the tenant-schema Ajv (src/contract/tenant-schema.ts), whose
 * regexes run on RE2 (linear time), so `^(a+)+$` cannot hold the event loop. A pattern RE2 does not
 * support (look-around, back-references) is refused when the tool is written.
 */
import type { ErrorObject, ValidateFunction } from 'ajv';
import { compileStandalone, firstProblem, pointerToParam, tenantAjv } from '../contract/tenant-schema.js';
import { unprocessable } from '../errors/api-error.js';

const ajv = tenantAjv();

const compile = (schema: Record<string, unknown>): ValidateFunction => compileStandalone(ajv, schema);

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
  const { param, message } = firstProblem('arguments', validate.errors);
  throw unprocessable('invalid_arguments', `The arguments do not match the tool's parameters: '${param}' ${message}.`, param);
}
