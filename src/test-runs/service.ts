/**
 * Test runs: creation (the version named, else the one published now, read from the agent's row at
 * once; the tests copied into the run's cases; limits), reads (counts and verdicts computed from the
 * cases) and the run's cases. A run's cases are run by runner.ts, from a job added with the run.
 */
import type { components } from '../../generated/openapi.js';
import { notFound, otherWorkspace, tooManyRequests, unprocessable } from '../errors/api-error.js';
import { agentNotFound, type AgentService } from '../agents/service.js';
import { agentTestNotFound } from '../agent-tests/service.js';
import type { AgentTestRow, AgentTestStore } from '../agent-tests/store.js';
import { newId } from '../lib/ids.js';
import type { Page } from '../lib/pagination.js';
import type { JobQueue } from '../jobs/queue.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';
import { checkTargetUrl } from '../net/target-url.js';
import { toTestCase, toTestRun, type TestCase, type TestRun } from './records.js';
import { TEST_RUN_EXECUTE } from './job-kinds.js';
import type { NewCase, TestRunStore } from './store.js';

type CreateRequest = components['schemas']['TestRunCreateRequest'];

/** Most cases (tests times repeats) one run may have. */
export const MAX_CASES = 1000;
/** Most bytes of test definitions one run copies (each test's JSON times its repeats). */
export const MAX_RUN_DEFINITION_BYTES = 32 * 1024 * 1024;
/** What a refused creation waits before trying again: a run of a few cases takes seconds. */
const RETRY_AFTER_S = 10;

export function testRunNotFound(runId: string) {
  return notFound('test_run_not_found', `No test run ${runId}.`, 'run_id');
}

export interface TestRunServiceOptions {
  activePerWorkspace: number;
}

export class TestRunService {
  constructor(
    private readonly store: TestRunStore,
    private readonly tests: AgentTestStore,
    private readonly agents: Pick<AgentService, 'runtimeOf'>,
    private readonly jobs: Pick<JobQueue, 'add'>,
    private readonly outbound: OutboundPolicy,
    private readonly opts: TestRunServiceOptions,
  ) {}

  /** The tests a run takes: `ids` in their order (each the agent's), else all of the agent's, oldest first. */
  private async testsFor(workspaceId: string, agentId: string, ids: string[] | undefined): Promise<AgentTestRow[]> {
    const rows = await this.tests.forRun(workspaceId, agentId, ids);
    if (!ids) {
      if (!rows.length)
        throw unprocessable('no_tests', `Agent ${agentId} has no tests to run; create one with POST /api/v1/agents/${agentId}/tests.`, 'agent_id');
      return rows;
    }
    const byId = new Map(rows.map((r) => [r.id, r]));
    return ids.map((id, i) => {
      const row = byId.get(id);
      if (!row) throw agentTestNotFound(id, `test_ids[${i}]`);
      return row;
    });
  }

  async create(workspaceId: string, body: CreateRequest): Promise<TestRun> {
    const agent = await this.agents.runtimeOf(workspaceId, body.agent_id, body.agent_version ?? null);
    if (agent === 'not_found') throw agentNotFound(body.agent_id);
    if (agent === 'other_workspace') throw otherWorkspace('agent');
    if (agent === 'version_not_found')
      throw notFound('agent_version_not_found', `Agent ${body.agent_id} has no version ${body.agent_version}.`, 'agent_version');
    const rows = await this.testsFor(workspaceId, agent.id, body.test_ids);
    const repeats = body.repeats ?? 1;
    if (rows.length * repeats > MAX_CASES) {
      throw unprocessable(
        'test_run_too_large',
        `${rows.length} tests times ${repeats} repeats is ${rows.length * repeats} cases; a run has at most ${MAX_CASES}.`,
        'repeats',
      );
    }
    const bytes = rows.reduce((sum, r) => sum + Buffer.byteLength(JSON.stringify(r.definition)), 0) * repeats;
    if (bytes > MAX_RUN_DEFINITION_BYTES) {
      throw unprocessable(
        'test_run_too_large',
        `The run's tests times its repeats come to ${bytes} bytes of JSON; a run copies at most ${MAX_RUN_DEFINITION_BYTES}.`,
        'repeats',
      );
    }
    if (body.webhook_url !== undefined) await checkTargetUrl(this.outbound, body.webhook_url, 'webhook_url', { acceptUnresolvable: false });
    const runId = newId('testRun');
    // Cases in run order (test by test, its repeats in order): ids are made in that order, so they sort so.
    const cases: NewCase[] = rows.flatMap((t, position) =>
      Array.from({ length: repeats }, (_, r) => ({
        id: newId('testCase'),
        test_id: t.id,
        test_name: t.name,
        position,
        repeat: r + 1,
        definition: t.definition,
      })),
    );
    const row = await this.store.transaction(async (trx) => {
      await this.store.lockWorkspace(trx, workspaceId);
      const active = await this.store.activeRuns(trx, workspaceId);
      if (active >= this.opts.activePerWorkspace) {
        throw tooManyRequests(
          RETRY_AFTER_S,
          `This workspace has ${active} test runs queued or running, as many as it may; retry after ${RETRY_AFTER_S} seconds.`,
          'too_many_test_runs',
        );
      }
      const inserted = await this.store.insertRun(
        trx,
        {
          id: runId,
          workspace_id: workspaceId,
          agent_id: agent.id,
          agent_version: agent.version,
          repeats,
          concurrency: body.concurrency ?? 5,
          webhook_url: body.webhook_url ?? null,
        },
        cases,
      );
      await this.jobs.add(TEST_RUN_EXECUTE, { run_id: runId }, {}, trx);
      return inserted;
    });
    return toTestRun(row, (await this.store.groups([row.id])).get(row.id)!);
  }

  private async owned(workspaceId: string, runId: string) {
    const row = await this.store.find(workspaceId, runId);
    if (row) return row;
    if (await this.store.exists(runId)) throw otherWorkspace('test run');
    throw testRunNotFound(runId);
  }

  async get(workspaceId: string, runId: string): Promise<TestRun> {
    const row = await this.owned(workspaceId, runId);
    return toTestRun(row, (await this.store.groups([row.id])).get(row.id)!);
  }

  async list(workspaceId: string, params: { limit?: number; starting_after?: string; agent_id?: string }): Promise<Page<TestRun>> {
    const { rows, hasMore } = await this.store.listRuns(workspaceId, params);
    const groups = await this.store.groups(rows.map((r) => r.id));
    return { object: 'list', data: rows.map((r) => toTestRun(r, groups.get(r.id)!)), has_more: hasMore, next_cursor: hasMore ? rows.at(-1)!.id : null };
  }

  async listCases(workspaceId: string, runId: string, params: { limit?: number; starting_after?: string }): Promise<Page<TestCase>> {
    await this.owned(workspaceId, runId);
    const { rows, hasMore } = await this.store.listCases(runId, params);
    return { object: 'list', data: rows.map(toTestCase), has_more: hasMore, next_cursor: hasMore ? rows.at(-1)!.id : null };
  }
}
