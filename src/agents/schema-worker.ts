/**
 * Runs in a worker thread of the schema pool (src/contract/schema-pool.ts): checking and compiling an
 * agent's `analysis.schema`, and validating an analysis answer against it, are CPU work on a tenant's
 * schema (Ajv generates and compiles code per schema), so they never run on the service's event loop.
 */
import { dataProblem, schemaProblem, type SchemaProblem } from './analysis-schema.js';

export type AnalysisTask = { kind: 'check'; schema: Record<string, unknown> } | { kind: 'validate'; schema: Record<string, unknown>; value: unknown };
export type AnalysisResult = { problem: SchemaProblem | null } | { problem: string | null };

export default function run(task: AnalysisTask): AnalysisResult {
  if (task.kind === 'check') return { problem: schemaProblem(task.schema) };
  return { problem: dataProblem(task.schema, task.value) };
}
