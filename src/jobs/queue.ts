/**
 * Background and scheduled work on PostgreSQL through graphile-worker: jobs are rows, so a job added in
 * the same transaction as the data it acts on exists exactly when that data does, survives a restart,
 * and is run once by whichever instance takes it (row locks; LISTEN/NOTIFY wakes a runner at once).
 * Each kind of job is declared once, beside the handler its domain registers for it (`JobKind`: its
 * name, how its payload is read back, how its jobs are keyed), so what is enqueued, how it is keyed
 * and what runs it cannot drift apart; `add` enqueues, optionally inside a knex transaction.
 *
 * Job keys: a job whose kind has a key replaces a pending job of the same key (graphile-worker's
 * `replace` mode), which is how a deadline moves later without leaving stale jobs behind.
 */
import pg from 'pg';
import type { Knex } from 'knex';
import type { Logger as PinoLogger } from 'pino';
import { Logger as GraphileLogger, run, runMigrations, type Runner, type Task, type TaskList } from 'graphile-worker';

/** One kind of job: its task name, its payload read back from the queue, and its key (every job is keyed, so adding one again never doubles it). */
export interface JobKind<P extends object> {
  readonly name: string;
  /** The payload as the handler takes it; null: not a payload of this kind (the job is dropped and logged). */
  readonly parse: (raw: Record<string, unknown>) => P | null;
  /** The key of a job of this kind: a pending job with the same key is replaced. */
  readonly key: (payload: NoInfer<P>) => string;
  /** Attempts before a job is given up (default 5; handlers are idempotent). */
  readonly maxAttempts?: number;
  /**
   * graphile-worker's priority: due jobs are taken lowest first (default 0), so a kind that must not
   * wait behind bookkeeping (dialing a call) gets a lower number than the bookkeeping (batch rounds).
   */
  readonly priority?: number;
}

/** Priorities (lower runs first among due jobs): a call's own work before everything, batch bookkeeping after everything. */
export const PRIORITY = { call: -10, normal: 0, batch: 10 } as const;

export function jobKind<P extends object>(kind: JobKind<P>): JobKind<P> {
  return kind;
}

/** A payload of one string id field, e.g. `{call_id}` (the usual kind). */
export function idPayload<F extends string>(field: F): (raw: Record<string, unknown>) => Record<F, string> | null {
  return (raw) => (typeof raw[field] === 'string' ? ({ [field]: raw[field] } as Record<F, string>) : null);
}

export interface JobOptions {
  /** When to run (default: now). */
  runAt?: Date;
  /**
   * With a keyed kind: `replace` (default) moves a pending job of the key to this job's time;
   * `preserve_run_at` keeps the pending job's time (a wake-up that is already due stays due, so a
   * stream of adds cannot keep pushing it later).
   */
  keyMode?: 'replace' | 'preserve_run_at';
}

/** graphile-worker's log lines through pino (its debug chatter stays at debug). */
function graphileLogger(log: PinoLogger): GraphileLogger {
  return new GraphileLogger(() => (level, message, meta) => {
    const fields = { component: 'jobs', ...(meta as Record<string, unknown>) };
    if (level === 'error') log.error(fields, message);
    else if (level === 'warning') log.warn(fields, message);
    else if (level === 'info') log.info(fields, message);
    else log.debug(fields, message);
  });
}

/** A pool whose idle and connecting clients' errors are handled (graphile-worker warns otherwise). */
function quietPool(connectionString: string, max: number, onError: (err: Error) => void = () => undefined): pg.Pool {
  const pool = new pg.Pool({ connectionString, max });
  pool.on('error', onError);
  pool.on('connect', (client) => client.on('error', onError));
  return pool;
}

/** Creates or updates graphile-worker's own schema (run with the service's migrations). */
export async function migrateJobQueue(connectionString: string): Promise<void> {
  const pool = quietPool(connectionString, 1);
  try {
    await runMigrations({ pgPool: pool, logger: new GraphileLogger(() => () => undefined) });
  } finally {
    await pool.end();
  }
}

/** One job of some kind, for addMany. */
export interface Job {
  kind: JobKind<any>;
  payload: object;
  runAt?: Date;
}

/** A job to enqueue as `add` takes it, for `change`. */
export interface JobAdd {
  kind: JobKind<any>;
  payload: object;
  options?: JobOptions;
}

/** A job of `kind` for `change` (keeps the payload checked against its kind). */
export const jobAdd = <P extends object>(kind: JobKind<P>, payload: P, options?: JobOptions): JobAdd => ({ kind, payload, options });

/** A job of `kind` for addMany (keeps the payload checked against its kind). */
export const job = <P extends object>(kind: JobKind<P>, payload: P, runAt?: Date): Job => ({ kind, payload, runAt });

export class JobQueue {
  private readonly tasks: TaskList = {};
  private runner: Runner | undefined;
  private pool: pg.Pool | undefined;
  private stopped = true;
  private restartTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly knex: Knex,
    private readonly opts: { connectionString: string; concurrency: number; pollIntervalMs: number; restartDelayMs?: number },
    private readonly log: PinoLogger,
  ) {}

  /** Registers the handler of a kind of job (before start()). A handler that throws is retried with backoff. */
  register<P extends object>(kind: JobKind<P>, handler: (payload: P) => Promise<void>): void {
    const task: Task = async (raw) => {
      const payload = kind.parse((raw && typeof raw === 'object' ? raw : {}) as Record<string, unknown>);
      if (payload === null) {
        this.log.warn({ job: kind.name }, 'job with an unreadable payload dropped');
        return;
      }
      await handler(payload);
    };
    this.tasks[kind.name] = task;
  }

  async start(): Promise<void> {
    if (!this.stopped) return;
    this.stopped = false;
    await this.startRunner();
  }

  private async startRunner(): Promise<void> {
    const pool = quietPool(this.opts.connectionString, this.opts.concurrency + 2, (err) => this.log.warn({ err: err.message }, 'job queue connection error'));
    let runner: Runner;
    try {
      runner = await run({
        pgPool: pool,
        taskList: this.tasks,
        concurrency: this.opts.concurrency,
        pollInterval: this.opts.pollIntervalMs,
        noHandleSignals: true,
        logger: graphileLogger(this.log),
        // Completions and failures written in batches: a failed write then stops the pool (see below);
        // written one by one, it is an unhandled rejection, which ends the process.
        preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
      });
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw err;
    }
    // When a job's completion cannot be written, graphile-worker shuts the whole pool down, leaving
    // that job locked to the pool for hours. Rather than let the rejection
    // take the process (and its live calls) down, or leave this instance taking no jobs, start a fresh
    // runner and give the stopped pool's jobs back: handlers are idempotent, as graphile-worker's
    // at-least-once delivery already requires.
    const dead: string[] = [];
    runner.events.on('pool:fatalError', ({ workerPool }) => dead.push(workerPool.id));
    runner.events.on('worker:fatalError', ({ worker }) => dead.push(worker.workerId));
    // graphile-worker 0.17 resolves the runner's promise when its pool stops on such an error (and logs
    // the error), so any end that stop() did not ask for counts as a failure.
    runner.promise.then(
      () => this.recover(runner, pool, dead, new Error('the job runner stopped by itself')),
      (err: unknown) => this.recover(runner, pool, dead, err),
    );
    this.runner = runner;
    this.pool = pool;
  }

  private recover(runner: Runner, pool: pg.Pool, deadWorkers: string[], err: unknown): void {
    if (this.runner !== runner) return;
    this.runner = undefined;
    this.pool = undefined;
    void pool.end().catch(() => undefined);
    if (this.stopped) return;
    this.log.error({ err, deadWorkers }, 'job runner stopped on an error; starting a new one');
    const retry = async (): Promise<void> => {
      this.restartTimer = undefined;
      if (this.stopped) return;
      try {
        if (deadWorkers.length) await this.knex.raw('select graphile_worker.force_unlock_workers(?::text[])', [deadWorkers]);
        await this.startRunner();
        this.log.info({ deadWorkers }, 'job runner started again');
      } catch (again) {
        this.log.error({ err: again }, 'job runner could not start again; retrying');
        this.restartTimer = setTimeout(() => void retry(), this.opts.restartDelayMs ?? 1000);
      }
    };
    this.restartTimer = setTimeout(() => void retry(), this.opts.restartDelayMs ?? 1000);
  }

  /** Enqueues a job, in `trx` when given (it then exists only if the transaction commits). */
  async add<P extends object>(kind: JobKind<P>, payload: P, options: JobOptions = {}, trx?: Knex.Transaction): Promise<void> {
    await this.change({ add: [{ kind, payload, options }] }, trx);
  }

  /**
   * Enqueues and removes several jobs in one statement (each as `add` and `remove` would), in `trx`
   * when given.
   */
  async change(changes: { add?: JobAdd[]; remove?: Array<Omit<JobAdd, 'options'>> }, trx?: Knex.Transaction): Promise<void> {
    const calls: string[] = [];
    const bindings: Knex.RawBinding[] = [];
    for (const { kind, payload, options = {} } of changes.add ?? []) {
      calls.push(
        'graphile_worker.add_job(identifier => ?, payload => ?::json, run_at => ?::timestamptz, max_attempts => ?, job_key => ?, job_key_mode => ?, priority => ?)',
      );
      bindings.push(
        kind.name,
        JSON.stringify(payload),
        (options.runAt ?? new Date()).toISOString(),
        kind.maxAttempts ?? 5,
        kind.key(payload),
        options.keyMode ?? 'replace',
        kind.priority ?? PRIORITY.normal,
      );
    }
    for (const { kind, payload } of changes.remove ?? []) {
      calls.push('graphile_worker.remove_job(?)');
      bindings.push(kind.key(payload));
    }
    if (calls.length) await (trx ?? this.knex).raw(`select ${calls.join(', ')}`, bindings);
  }

  /** Enqueues several jobs in one statement (graphile-worker's add_jobs; keyed ones replace pending ones). */
  async addMany(jobs: Array<Job>, trx?: Knex.Transaction): Promise<void> {
    if (!jobs.length) return;
    const specs = jobs.map(({ kind, payload, runAt }) => ({
      identifier: kind.name,
      payload,
      run_at: (runAt ?? new Date()).toISOString(),
      max_attempts: kind.maxAttempts ?? 5,
      job_key: kind.key(payload),
      priority: kind.priority ?? PRIORITY.normal,
    }));
    await (trx ?? this.knex).raw(
      `select count(*) from graphile_worker.add_jobs(array(
         select (s.identifier, s.payload, null, s.run_at, s.max_attempts, s.job_key, s.priority, null)::graphile_worker.job_spec
         from json_to_recordset(?::json) as s(identifier text, payload json, run_at timestamptz, max_attempts smallint, job_key text, priority smallint)
       ))`,
      [JSON.stringify(specs)],
    );
  }

  /** Removes the pending job of this kind and payload (by its key), if any. */
  async remove<P extends object>(kind: JobKind<P>, payload: P, trx?: Knex.Transaction): Promise<void> {
    await this.change({ remove: [{ kind, payload }] }, trx);
  }

  /** Stops taking jobs and waits for the running ones to finish. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.restartTimer);
    const { runner, pool } = this;
    this.runner = undefined;
    this.pool = undefined;
    await runner?.stop();
    await pool?.end();
  }
}
