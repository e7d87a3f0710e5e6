/** An agent's `analysis.schema` checked, and analysis answers validated, in the schema pool (off the event loop). */
import { unprocessable } from '../errors/api-error.js';
import { refuseSchemaProblem, runSchemaTask, workerFile } from '../contract/schema-pool.js';
import { schemaBoundsProblem } from './analysis-schema.js';
import type { AnalysisTask } from './schema-worker.js';

const WORKER = workerFile(import.meta.url, 'schema-worker');

/** Throws the 422 of the contract when the schema cannot be an agent's `analysis.schema`. */
export function checkAnalysisSchema(workspaceId: string, schema: Record<string, unknown>): Promise<void> {
  return refuseSchemaProblem(workspaceId, WORKER, schema, schemaBoundsProblem(schema), (s) =>
    unprocessable('invalid_analysis_schema', `'analysis.schema' took longer than ${s} s to compile; simplify it.`, 'analysis.schema'),
  );
}

/** Why `value` is not valid data for `schema` (`/path message`), or null when it is. Rejects when the check could not run. */
export async function analysisDataProblem(workspaceId: string, schema: Record<string, unknown>, value: unknown): Promise<string | null> {
  return (await runSchemaTask<AnalysisTask, { problem: string | null }>(workspaceId, WORKER, { kind: 'validate', schema, value })).problem;
}
