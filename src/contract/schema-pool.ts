/**
 * The schema pool: worker threads (piscina) that check tenants' JSON Schemas on write (an agent's
 * `analysis.schema`, a tool's `parameters`) and validate values against them (analysis answers, tool
 * test arguments), each task within a time limit counted from when a warm thread takes it. The event loop
 * that serves every tenant's requests, audio and heartbeats never compiles a tenant's schema.
 *
 * Fair between workspaces: each workspace has its own queue, served round-robin, and at most
 * `threads - 1` tasks of one workspace run at once (one with a single thread), so a workspace waits
 * behind its own work, and at most one task of each other workspace, never behind another's queue.
 * The threads start together on first use and then stay (an idle thread does not keep the process alive), so
 * their compiled validators stay cached (src/contract/compiled-cache.ts) and no conversation's end
 * waits for a thread to start again after a quiet minute (BENCHMARKS.md has the cost of that start).
 */
import { Piscina } from 'piscina';
import { unprocessable, type CodeFor } from '../errors/api-error.js';

/**
 * The worker file named `name` next to the module at `moduleUrl` (its `import.meta.url`): tsx runs the
 * sources (.ts), a build runs .js. Each domain keeps its own worker (agents: analysis schemas; tools:
 * parameters), all run by the pool's threads.
 */
export function workerFile(moduleUrl: string, name: string): string {
  const file = new URL(`./${name}${moduleUrl.endsWith('.ts') ? '.ts' : '.js'}`, moduleUrl).href;
  WORKERS.add(file);
  return file;
}

/** Every worker file named so far; each takes `{ kind: 'check', schema }`, which warms a thread up (below). */
const WORKERS = new Set<string>();
const WARM_UP = { kind: 'check', schema: { type: 'object' } };

export interface SchemaPoolOptions {
  threads: number;
  /** How long one task may run on its thread; past it the thread is ended and the task rejects with a TimeoutError. */
  taskTimeoutMs: number;
}

/** Ample for the largest schema allowed on a busy machine. */
const DEFAULTS: SchemaPoolOptions = { threads: 2, taskTimeoutMs: 10_000 };

interface Job {
  filename: string;
  task: unknown;
  resolve: (r: unknown) => void;
  reject: (err: unknown) => void;
}

class FairPool {
  private piscina: Piscina | undefined;
  /** Waiting jobs by workspace; the Map's order is the round-robin order (a served workspace goes last). */
  private readonly waiting = new Map<string, Job[]>();
  private readonly running = new Map<string, number>();
  private active = 0;
  /** Settles once every thread has loaded every worker file; until then no task's time runs. */
  private ready: Promise<void> | undefined;

  constructor(public opts: SchemaPoolOptions) {}

  private get perWorkspace(): number {
    return Math.max(1, this.opts.threads - 1);
  }

  run(workspaceId: string, filename: string, task: unknown): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const queue = this.waiting.get(workspaceId) ?? [];
      queue.push({ filename, task, resolve, reject });
      this.waiting.set(workspaceId, queue);
      this.pump();
    });
  }

  /** Hands waiting jobs to free threads, one workspace after another. */
  private pump(): void {
    while (this.active < this.opts.threads) {
      const next = [...this.waiting.keys()].find((ws) => (this.running.get(ws) ?? 0) < this.perWorkspace);
      if (next === undefined) return;
      const queue = this.waiting.get(next)!;
      const job = queue.shift()!;
      this.waiting.delete(next);
      if (queue.length) this.waiting.set(next, queue);
      this.start(next, job);
    }
  }

  private start(workspaceId: string, job: Job): void {
    // Every thread starts with the first task, so a workspace's first turn on a second thread does not wait for it to start.
    this.piscina ??= new Piscina({
      minThreads: this.opts.threads,
      maxThreads: this.opts.threads,
      concurrentTasksPerWorker: 1,
      resourceLimits: { maxOldGenerationSizeMb: 256 },
    });
    const piscina = this.piscina;
    this.active++;
    this.running.set(workspaceId, (this.running.get(workspaceId) ?? 0) + 1);
    // The job's time starts now that a warm thread is free for it: not while it waited its turn, and
    // not while a thread started and loaded the worker's modules (seconds on a busy machine).
    this.warmUp(piscina)
      .then(() => piscina.run(job.task, { filename: job.filename, signal: AbortSignal.timeout(this.opts.taskTimeoutMs) }))
      .then(job.resolve, (err: unknown) => {
        // A task past its time ends its thread: the thread started in its place is cold.
        const ended = (err as Error)?.name === 'AbortError' || (err as Error)?.name === 'TimeoutError';
        if (ended && piscina === this.piscina) this.ready = undefined;
        job.reject(err);
      })
      .finally(() => {
        this.active--;
        const left = (this.running.get(workspaceId) ?? 1) - 1;
        if (left) this.running.set(workspaceId, left);
        else this.running.delete(workspaceId);
        this.pump();
      });
  }

  /** Runs a trivial check of every worker file on every thread (`threads` at once, one each), once. */
  private warmUp(piscina: Piscina): Promise<void> {
    if (piscina !== this.piscina) return Promise.resolve();
    this.ready ??= (async () => {
      for (const filename of WORKERS) await Promise.all(Array.from({ length: this.opts.threads }, () => piscina.run(WARM_UP, { filename })));
    })().catch((err: unknown) => {
      this.ready = undefined;
      throw err;
    });
    return this.ready;
  }

  /** The V8 heap in use on the pool's threads together, in bytes (0 before they start). */
  async heapUsed(): Promise<number> {
    const stats = await Promise.all((this.piscina?.threads ?? []).map((w) => w.getHeapStatistics()));
    return stats.reduce((sum, s) => sum + s.used_heap_size, 0);
  }

  /** New options; threads already started go once their work is done. */
  reconfigure(opts: SchemaPoolOptions): void {
    if (opts.threads !== this.opts.threads && this.piscina) {
      const old = this.piscina;
      this.piscina = undefined;
      this.ready = undefined;
      void old.close().catch(() => undefined);
    }
    this.opts = opts;
  }
}

const pool = new FairPool(DEFAULTS);

/** Sets the pool's threads and task time limit (from configuration, at start-up). */
export function configureSchemaPool(opts: SchemaPoolOptions): void {
  pool.reconfigure(opts);
}

/** The heap the pool's threads hold, in bytes: what tenants' schemas and their validations leave behind there (test/integration/tools-memory.test.ts). */
export function schemaPoolHeapUsed(): Promise<number> {
  return pool.heapUsed();
}

/** Runs `task` on `worker` (a workerFile) for `workspaceId` in its turn. Rejects with a TimeoutError when it ran past the limit. */
export function runSchemaTask<T, R>(workspaceId: string, worker: string, task: T): Promise<R> {
  return pool.run(workspaceId, worker, task) as Promise<R>;
}

/** Runs `task` for `workspaceId` in its turn; a task past the time limit throws `onTimeout(the limit in seconds)` instead. */
export async function runSchemaTaskOr<T, R>(workspaceId: string, worker: string, task: T, onTimeout: (seconds: number) => Error): Promise<R> {
  try {
    return (await pool.run(workspaceId, worker, task)) as R;
  } catch (err) {
    if ((err as Error)?.name === 'AbortError' || (err as Error)?.name === 'TimeoutError') throw onTimeout(pool.opts.taskTimeoutMs / 1000);
    throw err;
  }
}

/** A tenant schema's problem as the contract's 422 names it. */
export interface SchemaRefusal {
  code: CodeFor<422>;
  param: string;
  message: string;
}

/**
 * Throws the 422 of `schema`'s first problem: its budget's (`budgetProblem`, checked on the loop because
 * it is linear) or else what `worker`'s `check` task finds (meta-schema, compiling); a check past the
 * time limit throws `onTimeout(seconds)`.
 */
export async function refuseSchemaProblem(
  workspaceId: string,
  worker: string,
  schema: Record<string, unknown>,
  budgetProblem: SchemaRefusal | null,
  onTimeout: (seconds: number) => Error,
): Promise<void> {
  const problem =
    budgetProblem ??
    (await runSchemaTaskOr<{ kind: 'check'; schema: unknown }, { problem: SchemaRefusal | null }>(workspaceId, worker, { kind: 'check', schema }, onTimeout))
      .problem;
  if (problem) throw unprocessable(problem.code, problem.message, problem.param);
}
