/** Runs and cases as the API shows them, and the `test_run.completed` payload, in the contract's field order. */
import type { components } from '../../generated/openapi.js';
import type { WebhookEventPayloads } from '../../generated/asyncapi-types.js';
import type { TestCaseRow, TestRunRow } from './store.js';
import { countsOf, runPassed, testsOf, type CaseGroup } from './verdicts.js';

export type TestRun = components['schemas']['TestRun'];
export type TestCase = components['schemas']['TestCase'];

export function toTestRun(row: TestRunRow, groups: CaseGroup[]): TestRun {
  const tests = testsOf(groups, row.repeats);
  return {
    object: 'test_run',
    run_id: row.id,
    agent_id: row.agent_id,
    agent_version: row.agent_version,
    repeats: row.repeats,
    concurrency: row.concurrency,
    status: row.status,
    passed: row.status === 'completed' ? (row.passed ?? runPassed(true, tests)) : null,
    counts: countsOf(groups),
    tests,
    webhook_url: row.webhook_url,
    created_at: row.created_at.toISOString(),
    started_at: row.started_at ? row.started_at.toISOString() : null,
    completed_at: row.completed_at ? row.completed_at.toISOString() : null,
  };
}

export function toTestCase(row: TestCaseRow): TestCase {
  return {
    object: 'test_case',
    case_id: row.id,
    run_id: row.run_id,
    test_id: row.test_id,
    test_name: row.test_name,
    repeat: row.repeat,
    status: row.status,
    transcript: row.transcript,
    tool_calls: row.tool_calls,
    expectations: row.expectations,
    ended_by: row.ended_by,
    error: row.error as TestCase['error'],
    started_at: row.started_at ? row.started_at.toISOString() : null,
    ended_at: row.ended_at ? row.ended_at.toISOString() : null,
    duration_ms: row.duration_ms,
  };
}

export function testRunCompletedPayload(row: TestRunRow, groups: CaseGroup[]): WebhookEventPayloads['test_run.completed'] {
  const run = toTestRun(row, groups);
  return {
    event: 'test_run.completed',
    run_id: run.run_id,
    agent_id: run.agent_id,
    agent_version: run.agent_version,
    status: 'completed',
    passed: run.passed === true,
    counts: run.counts,
    tests: run.tests,
    created_at: run.created_at,
    completed_at: run.completed_at ?? new Date().toISOString(),
  };
}
