/** `test_runs` and `test_run_cases`: runs of agent tests, their cases and verdicts. Every read is scoped by workspace. */
import type { Knex } from 'knex';
import type { TestDefinition } from '../agent-tests/definition.js';
import type { TranscriptTurn } from '../voice/types.js';
import type { TestExpectationResult } from './expectations.js';
import type { TestToolCall } from './mock-tools.js';
import type { CaseGroup, CaseStatus } from './verdicts.js';

export interface TestRunRow {
  id: string;
  workspace_id: string;
  agent_id: string;
  agent_version: number;
  repeats: number;
  concurrency: number;
  status: 'queued' | 'running' | 'completed';
  passed: boolean | null;
  webhook_url: string | null;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
}

export interface TestCaseRow {
  id: string;
  run_id: string;
  workspace_id: string;
  test_id: string | null;
  test_name: string;
  position: number;
  repeat: number;
  definition: TestDefinition;
  status: CaseStatus;
  transcript: TranscriptTurn[];
  tool_calls: TestToolCall[];
  expectations: TestExpectationResult[];
  ended_by: 'agent' | 'transfer' | 'script_end' | null;
  error: { code: string; message: string } | null;
  started_at: Date | null;
  ended_at: Date | null;
  duration_ms: number | null;
}

export type NewCase = Pick<TestCaseRow, 'id' | 'test_id' | 'test_name' | 'position' | 'repeat' | 'definition'>;

export interface CaseResult {
  status: 'passed' | 'failed' | 'error';
  transcript: TranscriptTurn[];
  tool_calls: TestToolCall[];
  expectations: TestExpectationResult[];
  ended_by: TestCaseRow['ended_by'];
  error: TestCaseRow['error'];
  started_at: Date;
  ended_at: Date;
}

/** Cases inserted per statement when a run is created. */
const INSERT_CHUNK = 100;
/** Columns of a case besides its definition (the lists never read it). */
const CASE_COLUMNS = [
  'id',
  'run_id',
  'workspace_id',
  'test_id',
  'test_name',
  'position',
  'repeat',
  'status',
  'transcript',
  'tool_calls',
  'expectations',
  'ended_by',
  'error',
  'started_at',
  'ended_at',
  'duration_ms',
];

export class TestRunStore {
  constructor(readonly db: Knex) {}

  transaction<T>(work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  /** Serialises run creations of one workspace (the active-run count and the insert), until the transaction ends. */
  async lockWorkspace(trx: Knex.Transaction, workspaceId: string): Promise<void> {
    await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`test_runs:${workspaceId}`]);
  }

  async activeRuns(trx: Knex.Transaction, workspaceId: string): Promise<number> {
    const [row] = await trx('test_runs').where({ workspace_id: workspaceId }).whereIn('status', ['queued', 'running']).count<{ count: string }[]>('* as count');
    return Number(row.count);
  }

  async insertRun(
    trx: Knex.Transaction,
    run: Omit<TestRunRow, 'created_at' | 'started_at' | 'completed_at' | 'status' | 'passed'>,
    cases: NewCase[],
  ): Promise<TestRunRow> {
    const [row] = await trx('test_runs').insert(run).returning('*');
    for (let i = 0; i < cases.length; i += INSERT_CHUNK) {
      await trx('test_run_cases').insert(
        cases.slice(i, i + INSERT_CHUNK).map((c) => ({ ...c, run_id: run.id, workspace_id: run.workspace_id, definition: JSON.stringify(c.definition) })),
      );
    }
    return row;
  }

  find(workspaceId: string, id: string): Promise<TestRunRow | undefined> {
    return this.db('test_runs').where({ id, workspace_id: workspaceId }).first();
  }

  /** A run by id in any workspace (for telling another workspace's from none). */
  exists(id: string): Promise<{ workspace_id: string } | undefined> {
    return this.db('test_runs').where({ id }).first('workspace_id');
  }

  async listRuns(
    workspaceId: string,
    params: { limit?: number | string; starting_after?: string; agent_id?: string },
  ): Promise<{ rows: TestRunRow[]; hasMore: boolean }> {
    const limit = Math.min(100, Math.max(1, Number(params.limit ?? 20) || 20));
    const q = this.db('test_runs').where({ workspace_id: workspaceId });
    if (params.agent_id) q.where({ agent_id: params.agent_id });
    if (params.starting_after) q.where('id', '<', params.starting_after);
    const rows: TestRunRow[] = await q.orderBy('id', 'desc').limit(limit + 1);
    return { rows: rows.slice(0, limit), hasMore: rows.length > limit };
  }

  /** The cases of `runIds` grouped by run, test and status (what counts and verdicts are made of). */
  async groups(runIds: string[], db: Knex = this.db): Promise<Map<string, CaseGroup[]>> {
    const out = new Map<string, CaseGroup[]>(runIds.map((id) => [id, []]));
    if (!runIds.length) return out;
    const rows: Array<CaseGroup & { run_id: string; n: string | number }> = await db('test_run_cases')
      .whereIn('run_id', runIds)
      .groupBy('run_id', 'position', 'test_id', 'test_name', 'status')
      .select('run_id', 'position', 'test_id', 'test_name', 'status')
      .count('* as n');
    for (const r of rows) out.get(r.run_id)!.push({ position: r.position, test_id: r.test_id, test_name: r.test_name, status: r.status, n: Number(r.n) });
    return out;
  }

  /** A page of a run's cases in run order (ascending id). */
  async listCases(runId: string, params: { limit?: number | string; starting_after?: string }): Promise<{ rows: TestCaseRow[]; hasMore: boolean }> {
    const limit = Math.min(100, Math.max(1, Number(params.limit ?? 20) || 20));
    const q = this.db('test_run_cases').where({ run_id: runId }).select(CASE_COLUMNS);
    if (params.starting_after) q.where('id', '>', params.starting_after);
    const rows: TestCaseRow[] = await q.orderBy('id', 'asc').limit(limit + 1);
    return { rows: rows.slice(0, limit), hasMore: rows.length > limit };
  }

  /** The run, now running (started once); undefined when it is completed or gone. */
  async claim(runId: string): Promise<TestRunRow | undefined> {
    const [row] = await this.db('test_runs')
      .where({ id: runId })
      .whereIn('status', ['queued', 'running'])
      .update({ status: 'running', started_at: this.db.raw('coalesce(started_at, now())') })
      .returning('*');
    return row;
  }

  /** Cases an earlier attempt of the run left running (its instance stopped) go back to pending. */
  async requeueRunning(runId: string): Promise<void> {
    await this.db('test_run_cases').where({ run_id: runId, status: 'running' }).update({ status: 'pending', started_at: null });
  }

  /** Ids of the run's cases still to run, in run order. */
  async pendingCases(runId: string): Promise<string[]> {
    return (await this.db('test_run_cases').where({ run_id: runId, status: 'pending' }).orderBy('id', 'asc').select('id')).map((r: { id: string }) => r.id);
  }

  /** The case, now running, with its definition; undefined when it is not pending (or gone). */
  async startCase(caseId: string): Promise<TestCaseRow | undefined> {
    const [row] = await this.db('test_run_cases')
      .where({ id: caseId, status: 'pending' })
      .update({ status: 'running', started_at: this.db.fn.now() })
      .returning('*');
    return row;
  }

  async finishCase(caseId: string, r: CaseResult): Promise<void> {
    await this.db('test_run_cases')
      .where({ id: caseId, status: 'running' })
      .update({
        status: r.status,
        transcript: JSON.stringify(r.transcript),
        tool_calls: JSON.stringify(r.tool_calls),
        expectations: JSON.stringify(r.expectations),
        ended_by: r.ended_by,
        error: r.error ? JSON.stringify(r.error) : null,
        started_at: r.started_at,
        ended_at: r.ended_at,
        duration_ms: Math.max(0, r.ended_at.getTime() - r.started_at.getTime()),
      });
  }

  /** The run row held for its completion; undefined when it is gone. */
  lockRun(trx: Knex.Transaction, runId: string): Promise<TestRunRow | undefined> {
    return trx('test_runs').where({ id: runId }).forUpdate().first();
  }

  async complete(trx: Knex.Transaction, runId: string, passed: boolean): Promise<TestRunRow> {
    const [row] = await trx('test_runs').where({ id: runId }).update({ status: 'completed', passed, completed_at: trx.fn.now() }).returning('*');
    return row;
  }
}
