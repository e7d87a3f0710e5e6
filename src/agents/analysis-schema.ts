/**
 * The rules of an agent's `analysis.schema` (AgentAnalysisInput in the contract): the JSON Schema of the
 * data post-call analysis extracts. The budget (size, depth, subschemas, expansion: src/contract/
 * schema-budget.ts) is checked where the request is handled; the rest (meta-schema, RE2 patterns,
 * compiling) and every validation of an answer run in the schema pool's worker threads
 * (src/contract/schema-pool.ts), because compiling a 16 KiB schema takes Ajv hundreds of milliseconds.
 */
import { compileStandalone, linearPatternProblem, pointerToParam, subschemas, tenantAjv } from '../contract/tenant-schema.js';
import { tenantBudgetProblem, type BudgetProblem } from '../contract/schema-budget.js';
import { compiledFor, firstError } from '../contract/compiled-cache.js';
import { makeAjv } from '../contract/documents.js';
import { forStructuredOutput } from '../voice/structured-output.js';

/** An extracted `data` larger than this (compact JSON) is refused as `invalid_output`. */
export const ANALYSIS_DATA_MAX_BYTES = 65_536;

const PARAM = 'analysis.schema';

export interface SchemaProblem {
  code: 'invalid_analysis_schema' | `analysis_schema_${BudgetProblem['kind']}`;
  param: string;
  message: string;
}

/** Size, depth, subschemas and expansion (a recursive schema is refused): linear, checked before anything else looks at the schema. */
export const schemaBoundsProblem = (schema: Record<string, unknown>): SchemaProblem | null => tenantBudgetProblem(schema, 'analysis', PARAM);

/**
 * The validator of analysis schemas: strict about keywords and formats (a misspelt `requried` would
 * otherwise be ignored and let anything through), patterns on RE2; the model's non-standard
 * `propertyOrdering` is an annotation.
 */
let strictAjv: ReturnType<typeof tenantAjv> | undefined;
function ajv() {
  if (!strictAjv) {
    strictAjv = tenantAjv({ strictSchema: true });
    strictAjv.addKeyword({ keyword: 'propertyOrdering', schemaType: 'array' });
  }
  return strictAjv;
}
/** Compiles what the model is given, only to see its references still resolve. */
let looseAjv: ReturnType<typeof makeAjv> | undefined;

function invalid(param: string, message: string): SchemaProblem {
  return { code: 'invalid_analysis_schema', param, message };
}

/** Where a compile error points, when it names a keyword or a reference we can find. */
function locate(schema: Record<string, unknown>, message: string): string {
  const keyword = /unknown keyword: "([^"]+)"/.exec(message)?.[1];
  const ref = /can't resolve reference (\S+)/.exec(message)?.[1];
  const format = /unknown format "[^"]+" ignored in schema at path "#([^"]*)"/.exec(message)?.[1];
  if (format !== undefined) return pointerToParam(PARAM, `${format}/format`);
  for (const { pointer, node } of subschemas(schema)) {
    if (keyword !== undefined && keyword in node) return pointerToParam(PARAM, `${pointer}/${keyword}`);
    if (ref !== undefined && node.$ref === ref) return pointerToParam(PARAM, `${pointer}/$ref`);
  }
  return PARAM;
}

/** Everything but size and depth; run in the schema pool's worker. */
export function schemaProblem(schema: Record<string, unknown>): SchemaProblem | null {
  const bounds = schemaBoundsProblem(schema);
  if (bounds) return bounds;
  const a = ajv();
  if (!a.validateSchema(schema)) {
    const e = a.errors?.[0];
    const param = pointerToParam(PARAM, e?.instancePath ?? '');
    return invalid(param, `'analysis.schema' is not a valid JSON Schema: '${param}' ${e?.message ?? 'is invalid'}.`);
  }
  for (const { pointer, node } of subschemas(schema)) {
    if (pointer !== '' && '$id' in node) {
      return invalid(pointerToParam(PARAM, `${pointer}/$id`), `'analysis.schema' may carry '$id' only at its root: it must be one document.`);
    }
    const patterns: Array<[string, string]> = [];
    if (typeof node.pattern === 'string') patterns.push([`${pointer}/pattern`, node.pattern]);
    if (node.patternProperties && typeof node.patternProperties === 'object') {
      for (const key of Object.keys(node.patternProperties))
        patterns.push([`${pointer}/patternProperties/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`, key]);
    }
    for (const [at, pattern] of patterns) {
      const problem = linearPatternProblem(pattern);
      if (problem) {
        const param = pointerToParam(PARAM, at);
        return invalid(param, `'${param}' is not a pattern RE2 can run in linear time (no look-around or back-references): ${problem}.`);
      }
    }
  }
  try {
    compiledFor('analysis', schema, (s) => compileStandalone(a, s));
  } catch (err) {
    const message = (err as Error).message;
    return invalid(locate(schema, message), `'analysis.schema' does not compile: ${message}.`);
  }
  try {
    looseAjv ??= makeAjv({ strict: false, allErrors: false, validateFormats: false });
    compileStandalone(looseAjv, forStructuredOutput(schema) as Record<string, unknown>);
  } catch (err) {
    return invalid(
      PARAM,
      `'analysis.schema' refers into a keyword the analysis model does not take (a '$ref' must point at '$defs', 'properties', 'items' or the root): ${(err as Error).message}.`,
    );
  }
  return null;
}

/** Why `value` is not valid `data` for `schema` (the first problem, `/path message`), or null when it is. */
export function dataProblem(schema: Record<string, unknown>, value: unknown): string | null {
  const bytes = Buffer.byteLength(JSON.stringify(value) ?? '');
  if (bytes > ANALYSIS_DATA_MAX_BYTES) return `the data is ${bytes} bytes as compact JSON; at most ${ANALYSIS_DATA_MAX_BYTES} are kept`;
  const e = firstError(
    compiledFor('analysis', schema, (s) => compileStandalone(ajv(), s)),
    value,
  );
  return e && `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`;
}
