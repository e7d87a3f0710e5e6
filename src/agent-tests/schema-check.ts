/** A test's schemas checked at write time, and arguments matched at run time, in the schema pool (off the event loop). */
import { unprocessable } from '../errors/api-error.js';
import { runSchemaTaskOr, workerFile } from '../contract/schema-pool.js';
import { testSchemaBudgetProblem, type PlacedSchema, type TestSchemaProblem } from './test-schema.js';
import type { TestSchemaTask } from './schema-worker.js';

const WORKER = workerFile(import.meta.url, 'schema-worker');

/** Throws 422 `invalid_test_schema` (`param` naming the schema, or the place inside it) at the first schema that is not usable. */
export async function checkTestSchemas(workspaceId: string, schemas: PlacedSchema[]): Promise<void> {
  if (!schemas.length) return;
  for (const placed of schemas) {
    const over = testSchemaBudgetProblem(placed);
    if (over) throw unprocessable('invalid_test_schema', over.message, over.param);
  }
  const { problem } = await runSchemaTaskOr<TestSchemaTask, { problem: TestSchemaProblem | null }>(workspaceId, WORKER, { kind: 'check_all', schemas }, (s) =>
    unprocessable('invalid_test_schema', `The test's schemas took longer than ${s} s to compile; simplify them.`, null),
  );
  if (problem) throw unprocessable('invalid_test_schema', problem.message, problem.param);
}

/**
 * Why `args` do not match `schema`, or null when they do. A schema that could not be matched in time
 * counts as not matching (the reason says so): a test's verdict never waits on it past the pool's limit.
 */
export async function argumentsMismatch(workspaceId: string, schema: Record<string, unknown>, args: unknown): Promise<string | null> {
  try {
    const { mismatch } = await runSchemaTaskOr<TestSchemaTask, { mismatch: string | null }>(workspaceId, WORKER, { kind: 'match', schema, args }, (s) =>
      Object.assign(new Error(`the arguments could not be matched within ${s} s`), { timedOut: true }),
    );
    return mismatch;
  } catch (err) {
    return (err as Error).message;
  }
}
