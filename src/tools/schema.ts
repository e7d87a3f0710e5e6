/**
 * A tool's `parameters`: a JSON Schema (2020-12) held to the tenant schema budget (size, depth,
 * subschemas, expansion: src/contract/schema-budget.ts), checked against the meta-schema and compiled
 * when the tool is written, and used to validate arguments before a test run. The budget is checked
 * where the request is handled (it is linear in the schema); the meta-schema, compiling and every
 * validation run in the schema pool's worker threads (src/contract/schema-pool.ts), because compiling
 * a tenant's schema is Ajv generating and compiling code.
 *
 * The schema compiles on the tenant-schema Ajv (src/contract/tenant-schema.ts), whose regexes run on
 * RE2 (linear time), so `^(a+)+$` cannot hold a thread. A pattern RE2 does not support (look-around,
 * back-references) is refused when the tool is written.
 */
import type { ErrorObject } from 'ajv';
import { compileStandalone, firstProblem, pointerToParam, tenantAjv } from '../contract/tenant-schema.js';
import { tenantBudgetProblem, type BudgetProblem } from '../contract/schema-budget.js';
import { compiledFor, firstError } from '../contract/compiled-cache.js';

const PARAM = 'parameters';

export interface ParametersProblem {
  code: 'invalid_parameters_schema' | `parameters_schema_${BudgetProblem['kind']}`;
  param: string;
  message: string;
}

/** Size, depth, subschemas and expansion: linear in the schema, checked before anything compiles it. */
export const parametersBudgetProblem = (schema: Record<string, unknown>): ParametersProblem | null => tenantBudgetProblem(schema, 'parameters', PARAM);

let ajv: ReturnType<typeof tenantAjv> | undefined;
const tenant = () => (ajv ??= tenantAjv());

/** Everything a tool's `parameters` must be; run in the schema pool's worker. */
export function parametersProblem(schema: Record<string, unknown>): ParametersProblem | null {
  const budget = parametersBudgetProblem(schema);
  if (budget) return budget;
  const a = tenant();
  if (!a.validateSchema(schema)) {
    const e = (a.errors ?? [])[0] as ErrorObject | undefined;
    const where = pointerToParam(PARAM, e?.instancePath ?? '');
    return { code: 'invalid_parameters_schema', param: where, message: `'parameters' is not a valid JSON Schema: ${where} ${e?.message ?? 'is invalid'}.` };
  }
  try {
    compiledFor('parameters', schema, (s) => compileStandalone(a, s));
  } catch (err) {
    return { code: 'invalid_parameters_schema', param: PARAM, message: `'parameters' does not compile as a JSON Schema: ${(err as Error).message}.` };
  }
  return null;
}

/** Why `args` do not match the tool's `parameters` (`param` is `arguments.<path>`), or null; run in the schema pool's worker. */
export function argumentsProblem(schema: Record<string, unknown>, args: unknown): { param: string; message: string } | null {
  const e = firstError(
    compiledFor('parameters', schema, (s) => compileStandalone(tenant(), s)),
    args,
  );
  if (!e) return null;
  const { param, message } = firstProblem('arguments', [e]);
  return { param, message: `The arguments do not match the tool's parameters: '${param}' ${message}.` };
}
