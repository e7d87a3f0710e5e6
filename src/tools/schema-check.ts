/** A tool's `parameters` checked, and a test's arguments validated, in the schema pool (off the event loop). */
import { unprocessable } from '../errors/api-error.js';
import { refuseSchemaProblem, runSchemaTaskOr, workerFile } from '../contract/schema-pool.js';
import { parametersBudgetProblem } from './schema.js';
import type { ParametersTask } from './parameters-worker.js';

const WORKER = workerFile(import.meta.url, 'parameters-worker');

/** Throws 422 (`invalid_parameters_schema`, `parameters_schema_too_large|too_deep|too_complex`) with `param` naming the location. */
export function checkParametersSchema(workspaceId: string, schema: Record<string, unknown>): Promise<void> {
  return refuseSchemaProblem(workspaceId, WORKER, schema, parametersBudgetProblem(schema), (s) =>
    unprocessable('parameters_schema_too_complex', `'parameters' took longer than ${s} s to compile; simplify it.`, 'parameters'),
  );
}

/** Throws 422 `invalid_arguments` (`param` is `arguments.<path>`) when `args` do not match. */
export async function checkArguments(workspaceId: string, schema: Record<string, unknown>, args: Record<string, unknown>): Promise<void> {
  const { problem } = await runSchemaTaskOr<ParametersTask, { problem: { param: string; message: string } | null }>(
    workspaceId,
    WORKER,
    { kind: 'validate', schema, args },
    (s) => unprocessable('invalid_arguments', `The arguments could not be checked against the tool's parameters within ${s} s.`, 'arguments'),
  );
  if (problem) throw unprocessable('invalid_arguments', problem.message, problem.param);
}
