/**
 * Background and scheduled work on PostgreSQL through graphile-worker: jobs are rows, so a job added in
 * the same transaction as the data it acts on exists exactly when that data does, survives a restart,
 * and is run once by whichever instance takes it (row locks; LISTEN/NOTIFY wakes a runner at once).
 * Domains register their tasks by name; `add` enqueues, optionally inside a knex transaction.
 *
 * Job keys: a job added with a `jobKey` replaces a pending job of the same key (graphile-worker's
 * `replace` mode), which is how a deadline moves later without leaving stale jobs behind.
 */
import pg from 'pg';
import type { Knex } from 'knex';
import type { Logger as PinoLogger } from 'pino';
import { Logger as GraphileLogger, run, runMigrations, type Runner, type Task, type TaskList } from 'graphile-worker';

export interface JobOptions {
  /** When to run (default: now). */
  runAt?: Date;
  /** Replaces a pending job with the same key. */
  jobKey?: string;
  /** Attempts before the job is given up (default 5; handlers are idempotent). */
  maxAttempts?: number;
  /**
   * With `jobKey`: `replace` (default) moves a pending job of the key to this job's time;
   * `preserve_run_at` keeps the pending job's time (a wake-up that is already due stays due, so a
   * stream of adds cannot keep pushing it later).
   */
  keyMode?: 'replace' | 'preserve_run_at';
}

export type JobHandler = (payload: Record<string, unknown>) => Promise<void>;

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

export class JobQueue {
  private readonly tasks: TaskList = {};
  private runner: Runner | undefined;
  private pool: pg.Pool | undefined;

  constructor(
    private readonly knex: Knex,
    private readonly opts: { connectionString: string; concurrency: number; pollIntervalMs: number },
    private readonly log: PinoLogger,
  ) {}

  /** Registers the handler of a task (before start()). A handler that throws is retried with backoff. */
  register(name: string, handler: JobHandler): void {
    const task: Task = async (payload) => handler((payload ?? {}) as Record<string, unknown>);
    this.tasks[name] = task;
  }

  async start(): Promise<void> {
    if (this.runner) return;
    this.pool = quietPool(this.opts.connectionString, this.opts.concurrency + 2, (err) => this.log.warn({ err: err.message }, 'job queue connection error'));
    this.runner = await run({
      pgPool: this.pool,
      taskList: this.tasks,
      concurrency: this.opts.concurrency,
      pollInterval: this.opts.pollIntervalMs,
      noHandleSignals: true,
      logger: graphileLogger(this.log),
    });
  }

  /** Enqueues a job, in `trx` when given (it then exists only if the transaction commits). */
  async add(name: string, payload: Record<string, unknown>, options: JobOptions = {}, trx?: Knex.Transaction): Promise<void> {
    await (trx ?? this.knex).raw(
      `select graphile_worker.add_job(identifier => ?, payload => ?::json, run_at => ?::timestamptz, max_attempts => ?, job_key => ?, job_key_mode => ?)`,
      [
        name,
        JSON.stringify(payload),
        (options.runAt ?? new Date()).toISOString(),
        options.maxAttempts ?? 5,
        options.jobKey ?? null,
        options.keyMode ?? 'replace',
      ],
    );
  }

  /** Enqueues several jobs in one statement (graphile-worker's add_jobs; keyed ones replace pending ones). */
  async addMany(jobs: Array<JobOptions & { name: string; payload: Record<string, unknown> }>, trx?: Knex.Transaction): Promise<void> {
    if (!jobs.length) return;
    const specs = jobs.map((j) => ({
      identifier: j.name,
      payload: j.payload,
      run_at: (j.runAt ?? new Date()).toISOString(),
      max_attempts: j.maxAttempts ?? 5,
      job_key: j.jobKey ?? null,
    }));
    await (trx ?? this.knex).raw(
      `select count(*) from graphile_worker.add_jobs(array(
         select (s.identifier, s.payload, null, s.run_at, s.max_attempts, s.job_key, null, null)::graphile_worker.job_spec
         from json_to_recordset(?::json) as s(identifier text, payload json, run_at timestamptz, max_attempts smallint, job_key text)
       ))`,
      [JSON.stringify(specs)],
    );
  }

  /** Removes the pending job with this key, if any. */
  async remove(jobKey: string, trx?: Knex.Transaction): Promise<void> {
    await (trx ?? this.knex).raw('select graphile_worker.remove_job(?)', [jobKey]);
  }

  /** Stops taking jobs and waits for the running ones to finish. */
  async stop(): Promise<void> {
    await this.runner?.stop();
    this.runner = undefined;
    await this.pool?.end();
    this.pool = undefined;
  }
}
