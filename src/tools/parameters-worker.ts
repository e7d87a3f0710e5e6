/**
 * Runs in a worker thread of the schema pool (src/contract/schema-pool.ts): checking and compiling a
 * tool's `parameters`, and validating a test's arguments against it, are CPU work on a tenant's schema,
 * so they never run on the service's event loop.
 */
import { argumentsProblem, parametersProblem, type ParametersProblem } from './schema.js';

export type ParametersTask = { kind: 'check'; schema: Record<string, unknown> } | { kind: 'validate'; schema: Record<string, unknown>; args: unknown };
export type ParametersResult = { problem: ParametersProblem | null } | { problem: { param: string; message: string } | null };

export default function run(task: ParametersTask): ParametersResult {
  if (task.kind === 'check') return { problem: parametersProblem(task.schema) };
  return { problem: argumentsProblem(task.schema, task.args) };
}
