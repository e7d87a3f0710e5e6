/**
 * Aggregation of a run's cases: a test's verdict over its repeats (`failed` when any repeat failed,
 * else `error` when any could not be judged, else `passed` once all passed; until then `running` when
 * some repeat started, else `pending`), and the run's `passed` (null until completed, then whether
 * every test passed). Pure.
 */
import type { components } from '../../generated/openapi.js';

export type TestRunCounts = components['schemas']['TestRunCounts'];
export type TestRunTestResult = components['schemas']['TestRunTestResult'];
export type CaseStatus = components['schemas']['TestCaseStatus'];

/** The cases of one status of one test of a run (one row of the grouped read). */
export interface CaseGroup {
  position: number;
  test_id: string | null;
  test_name: string;
  status: CaseStatus;
  n: number;
}

export function countsOf(groups: CaseGroup[]): TestRunCounts {
  const c: TestRunCounts = { cases: 0, pending: 0, running: 0, passed: 0, failed: 0, errored: 0 };
  for (const g of groups) {
    c.cases += g.n;
    if (g.status === 'error') c.errored += g.n;
    else c[g.status] += g.n;
  }
  return c;
}

export function testsOf(groups: CaseGroup[], repeats: number): TestRunTestResult[] {
  const byPosition = new Map<number, CaseGroup[]>();
  for (const g of groups) byPosition.set(g.position, [...(byPosition.get(g.position) ?? []), g]);
  return [...byPosition.entries()]
    .sort(([a], [b]) => a - b)
    .map(([, gs]) => {
      const n = (s: CaseStatus) => gs.filter((g) => g.status === s).reduce((sum, g) => sum + g.n, 0);
      const passes = n('passed');
      const failures = n('failed');
      const errors = n('error');
      const status: TestRunTestResult['status'] =
        failures > 0 ? 'failed' : errors > 0 ? 'error' : passes === repeats ? 'passed' : passes > 0 || n('running') > 0 ? 'running' : 'pending';
      return { test_id: gs[0].test_id, name: gs[0].test_name, status, passes, failures, errors, repeats };
    });
}

export const runPassed = (completed: boolean, tests: TestRunTestResult[]): boolean | null => (completed ? tests.every((t) => t.status === 'passed') : null);
