/**
 * Runs in a worker thread of the schema pool (src/contract/schema-pool.ts): checking and compiling a
 * test's JSON Schemas, and matching tool calls' arguments against them, are CPU work on a tenant's
 * schemas, so they never run on the service's event loop.
 */
import { argumentsMismatch, testSchemaProblem, type PlacedSchema, type TestSchemaProblem } from './test-schema.js';

export type TestSchemaTask =
  | { kind: 'check'; schema: Record<string, unknown> }
  | { kind: 'check_all'; schemas: PlacedSchema[] }
  | { kind: 'match'; schema: Record<string, unknown>; args: unknown };
export type TestSchemaResult = { problem: TestSchemaProblem | null } | { mismatch: string | null };

export default function run(task: TestSchemaTask): TestSchemaResult {
  if (task.kind === 'check') return { problem: testSchemaProblem({ param: 'schema', schema: task.schema }) };
  if (task.kind === 'check_all') {
    for (const placed of task.schemas) {
      const problem = testSchemaProblem(placed);
      if (problem) return { problem };
    }
    return { problem: null };
  }
  return { mismatch: argumentsMismatch(task.schema, task.args) };
}
