/**
 * Running a test run: the TEST_RUN_EXECUTE job (added with the run, so a run exists exactly when its
 * job does) claims the run and runs its pending cases, at most the run's `concurrency` at once and at
 * most TEST_RUNS_INSTANCE_CONCURRENCY on this instance across runs, then completes it: status,
 * `passed` and the `test_run.completed` event in one transaction, once (the run row is held, and a
 * completed run is left alone). Each case's verdict is written as it ends. A job that ran on an
 * instance that stopped is taken again by graphile-worker (at-least-once): the cases that instance left
 * running go back to pending and run again; finished ones keep their verdicts.
 */
import type { Logger } from 'pino';
import type { TestRunCompletedPublisher } from '../webhooks/events.js';
import type { JobQueue } from '../jobs/queue.js';
import { AgentGone, type CaseDriver } from './driver.js';
import { TEST_RUN_EXECUTE } from './job-kinds.js';
import { testRunCompletedPayload } from './records.js';
import type { TestRunRow, TestRunStore } from './store.js';
import { runPassed, testsOf } from './verdicts.js';

/** A counting semaphore: the instance's cases in progress, across runs. */
export class Slots {
  private used = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly size: number) {}

  async take(): Promise<void> {
    if (this.used < this.size) {
      this.used++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.used--;
  }
}

export class TestRunRunner {
  private readonly slots: Slots;

  constructor(
    private readonly store: TestRunStore,
    private readonly driver: CaseDriver,
    private readonly events: TestRunCompletedPublisher,
    private readonly log: Logger,
    opts: { instanceConcurrency: number },
  ) {
    this.slots = new Slots(opts.instanceConcurrency);
  }

  register(jobs: Pick<JobQueue, 'register'>): void {
    jobs.register(TEST_RUN_EXECUTE, ({ run_id }) => this.execute(run_id));
  }

  async execute(runId: string): Promise<void> {
    const run = await this.store.claim(runId);
    if (!run) return;
    await this.store.requeueRunning(runId);
    const pending = await this.store.pendingCases(runId);
    let next = 0;
    const worker = async () => {
      while (next < pending.length) {
        const caseId = pending[next++];
        await this.slots.take();
        try {
          await this.runCase(run, caseId);
        } finally {
          this.slots.give();
        }
      }
    };
    // Every worker stops before the job ends, also when one failed: a retry of the job must not find a
    // case still being run by this attempt.
    const settled = await Promise.allSettled(Array.from({ length: Math.min(run.concurrency, pending.length) }, worker));
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    await this.complete(runId);
  }

  private async runCase(run: TestRunRow, caseId: string): Promise<void> {
    const row = await this.store.startCase(caseId);
    if (!row) return;
    try {
      const outcome = await this.driver.run({
        caseId,
        workspaceId: run.workspace_id,
        agentId: run.agent_id,
        version: run.agent_version,
        definition: row.definition,
      });
      await this.store.finishCase(caseId, {
        status: outcome.status,
        transcript: outcome.transcript,
        tool_calls: outcome.toolCalls,
        expectations: outcome.expectations,
        ended_by: outcome.endedBy,
        error: outcome.error,
        started_at: outcome.startedAt,
        ended_at: outcome.endedAt,
      });
    } catch (err) {
      // The agent is being deleted: its runs go with it. Anything else is retried with the job.
      if (err instanceof AgentGone) return;
      throw err;
    }
  }

  private async complete(runId: string): Promise<void> {
    await this.store.transaction(async (trx) => {
      const run = await this.store.lockRun(trx, runId);
      if (!run || run.status === 'completed') return;
      const groups = (await this.store.groups([runId], trx)).get(runId)!;
      if (groups.some((g) => g.status === 'pending' || g.status === 'running')) return;
      const done = await this.store.complete(trx, runId, runPassed(true, testsOf(groups, run.repeats)) === true);
      await this.events.testRunCompleted({ workspaceId: done.workspace_id, webhookUrl: done.webhook_url, payload: testRunCompletedPayload(done, groups) }, trx);
      this.log.info({ runId, workspaceId: done.workspace_id, passed: done.passed }, 'test run completed');
    });
  }
}
