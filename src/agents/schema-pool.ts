/**
 * The schema pool: one worker thread (piscina) that checks agents' `analysis.schema` on write and
 * validates analysis answers against them after conversations, each task with a time limit. Tasks
 * queue in order; the event loop that serves every tenant's requests, audio and heartbeats never
 * compiles a tenant's schema. The thread starts on first use and then stays (an idle thread does not
 * keep the process alive), so its compiled validators stay cached and no conversation's end waits for
 * a thread to start again after a quiet minute (BENCHMARKS.md has the cost of that first start).
 */
import { Piscina } from 'piscina';
import { unprocessable } from '../errors/api-error.js';
import { schemaBoundsProblem, type SchemaProblem } from './analysis-schema.js';
import type { SchemaResult, SchemaTask } from './schema-worker.js';

// tsx runs the sources (.ts); a build runs .js: the worker is the file next to this one either way.
const WORKER = new URL(`./schema-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url).href;
/** Ample for the largest schema allowed on a busy machine; a task past it ends its thread. */
const TASK_TIMEOUT_MS = 10_000;

let pool: Piscina<SchemaTask, SchemaResult> | undefined;

function run(task: SchemaTask): Promise<SchemaResult> {
  pool ??= new Piscina({
    filename: WORKER,
    minThreads: 1,
    maxThreads: 1,
    concurrentTasksPerWorker: 1,
    resourceLimits: { maxOldGenerationSizeMb: 256 },
  });
  return pool.run(task, { signal: AbortSignal.timeout(TASK_TIMEOUT_MS) });
}

function refusal(p: SchemaProblem) {
  return unprocessable(p.code, p.message, p.param);
}

/** Throws the 422 of the contract when the schema cannot be an agent's `analysis.schema`. */
export async function checkAnalysisSchema(schema: Record<string, unknown>): Promise<void> {
  const bounds = schemaBoundsProblem(schema);
  if (bounds) throw refusal(bounds);
  let result: SchemaResult;
  try {
    result = await run({ kind: 'check', schema });
  } catch (err) {
    if ((err as Error).name === 'AbortError' || (err as Error).name === 'TimeoutError') {
      throw unprocessable(
        'invalid_analysis_schema',
        `'analysis.schema' took longer than ${TASK_TIMEOUT_MS / 1000} s to compile; simplify it.`,
        'analysis.schema',
      );
    }
    throw err;
  }
  if (result.kind === 'check' && result.problem) throw refusal(result.problem);
}

/** Why `value` is not valid data for `schema` (`/path message`), or null when it is. Rejects when the check could not run. */
export async function dataProblem(schema: Record<string, unknown>, value: unknown): Promise<string | null> {
  const result = await run({ kind: 'validate', schema, value });
  return result.kind === 'validate' ? result.problem : null;
}
