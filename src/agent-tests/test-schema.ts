/**
 * The JSON Schemas a test holds (`arguments` of a `tool_called` expectation, `when` of a tool mock):
 * held to the tenant schema budget (src/contract/schema-budget.ts) where the request is handled (linear
 * in the schema), then checked against the meta-schema and compiled in the schema pool's worker
 * threads (schema-worker.ts), all of one test's schemas in one task. At run time the tool calls'
 * arguments are matched against them in the pool too: compiling a tenant's schema never runs on the
 * service's event loop. Patterns run on RE2 (src/contract/tenant-schema.ts).
 */
import type { ErrorObject } from 'ajv';
import { compileStandalone, firstProblem, pointerToParam, tenantAjv } from '../contract/tenant-schema.js';
import { schemaBudgetProblem, TENANT_SCHEMA_BUDGET } from '../contract/schema-budget.js';
import { compiledFor, firstError } from '../contract/compiled-cache.js';

/** One schema of a test and where it is (`turns[0].expect[1].arguments`). */
export interface PlacedSchema {
  param: string;
  schema: Record<string, unknown>;
}

export interface TestSchemaProblem {
  param: string;
  message: string;
}

/** Size, depth, subschemas and expansion; linear, so checked on the loop before anything compiles it. */
export function testSchemaBudgetProblem(placed: PlacedSchema): TestSchemaProblem | null {
  const p = schemaBudgetProblem(placed.schema, TENANT_SCHEMA_BUDGET, placed.param);
  return p && { param: p.param, message: p.message };
}

let ajv: ReturnType<typeof tenantAjv> | undefined;
const tenant = () => (ajv ??= tenantAjv());
const compiled = (schema: Record<string, unknown>) => compiledFor('test', schema, (s) => compileStandalone(tenant(), s));

/** Everything one schema of a test must be (run in the schema pool's worker). */
export function testSchemaProblem(placed: PlacedSchema): TestSchemaProblem | null {
  const budget = testSchemaBudgetProblem(placed);
  if (budget) return budget;
  const a = tenant();
  if (!a.validateSchema(placed.schema)) {
    const e = (a.errors ?? [])[0] as ErrorObject | undefined;
    const where = pointerToParam(placed.param, e?.instancePath ?? '');
    return { param: where, message: `'${placed.param}' is not a valid JSON Schema: ${where} ${e?.message ?? 'is invalid'}.` };
  }
  try {
    compiled(placed.schema);
  } catch (err) {
    return { param: placed.param, message: `'${placed.param}' does not compile as a JSON Schema: ${(err as Error).message}.` };
  }
  return null;
}

/** Why `args` do not match `schema` (`arguments.<path> <message>`), or null (run in the schema pool's worker). */
export function argumentsMismatch(schema: Record<string, unknown>, args: unknown): string | null {
  const e = firstError(compiled(schema), args);
  if (!e) return null;
  const { param, message } = firstProblem('arguments', [e]);
  return `'${param}' ${message}`;
}
