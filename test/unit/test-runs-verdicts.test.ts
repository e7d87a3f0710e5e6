/**
 * The pure parts of test runs: each expectation type judged on hand-made windows (passing and failing,
 * the exact detail), the phrase rules (case, whitespace), turns after the end; and a run's counts and
 * per-test verdicts from its cases (failed beats error beats passed, running and pending until done).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { judgeExpectations, type ConversationWindow } from '../../src/test-runs/expectations.js';
import { countsOf, runPassed, testsOf, type CaseGroup } from '../../src/test-runs/verdicts.js';
import type { TestExpectation } from '../../src/agent-tests/definition.js';

const e = (type: TestExpectation['type'], fields: Partial<TestExpectation> = {}): TestExpectation => ({
  type,
  phrase: null,
  tool: null,
  arguments: null,
  destination: null,
  ...fields,
});
const w = (fields: Partial<ConversationWindow> = {}): ConversationWindow => ({ reply: '', toolCalls: [], transferredTo: null, ended: false, ...fields });
/** Matches a schema of the form {const: x} against the arguments' `day`. */
const mismatch = async (schema: Record<string, unknown>, args: Record<string, unknown>) =>
  args.day === schema.const ? null : `'arguments.day' must be equal to constant`;

async function judged(expect: TestExpectation[], window: ConversationWindow): Promise<string[]> {
  const results = await judgeExpectations({ expect_first_message: [], turns: [{ user: 'x', expect }] }, [w(), window], null, mismatch);
  return results.map((r) => `${r.passed ? 'PASS' : 'FAIL'} ${r.detail}`);
}

describe('expectations', () => {
  it('judges phrases case-insensitively with whitespace runs as one space, and quotes the reply when one fails', async () => {
    const reply = 'As  Maya from\nBright Smile, I heard: "hello".';
    assert.deepEqual(
      await judged(
        [
          e('reply_contains', { phrase: 'maya FROM bright smile' }),
          e('reply_contains', { phrase: 'Sam' }),
          e('reply_excludes', { phrase: 'Sam' }),
          e('reply_excludes', { phrase: 'bright  SMILE' }),
        ],
        w({ reply }),
      ),
      [
        'PASS Turn 1: the reply contained "maya FROM bright smile".',
        `FAIL Turn 1: the reply did not contain "Sam"; it was "${reply}".`,
        'PASS Turn 1: the reply did not contain "Sam".',
        `FAIL Turn 1: the reply contained "bright  SMILE": "${reply}".`,
      ],
    );
  });

  it("judges tool calls by name and by arguments matching the schema, any of the window's calls", async () => {
    const window = w({
      toolCalls: [
        { name: 'check', arguments: { day: 'Monday' }, ok: true },
        { name: 'check', arguments: { day: 'Tuesday' }, ok: false },
      ],
    });
    assert.deepEqual(
      await judged(
        [
          e('tool_called', { tool: 'check' }),
          e('tool_called', { tool: 'check', arguments: { const: 'Tuesday' } }),
          e('tool_called', { tool: 'check', arguments: { const: 'Friday' } }),
          e('tool_called', { tool: 'book' }),
          e('tool_not_called', { tool: 'book' }),
          e('tool_not_called', { tool: 'check' }),
        ],
        window,
      ),
      [
        'PASS Turn 1: `check` was called with {"day":"Monday"}.',
        'PASS Turn 1: `check` was called with {"day":"Tuesday"}.',
        'FAIL Turn 1: `check` was called with {"day":"Monday"}, which does not match the expected arguments: \'arguments.day\' must be equal to constant.',
        'FAIL Turn 1: `book` was not called.',
        'PASS Turn 1: `book` was not called.',
        'FAIL Turn 1: `check` was called with {"day":"Monday"}.',
      ],
    );
  });

  it('judges transfers, their destination, and the end', async () => {
    assert.deepEqual(
      await judged(
        [e('transferred'), e('transferred', { destination: 'billing' }), e('transferred', { destination: 'sales' }), e('ended')],
        w({ transferredTo: 'billing', ended: true }),
      ),
      [
        'PASS Turn 1: the call was transferred to billing.',
        'PASS Turn 1: the call was transferred to billing.',
        'FAIL Turn 1: the call was transferred to billing, not to sales.',
        'PASS Turn 1: the conversation ended.',
      ],
    );
    assert.deepEqual(await judged([e('transferred'), e('ended')], w()), [
      'FAIL Turn 1: the call was not transferred.',
      'FAIL Turn 1: the conversation did not end.',
    ]);
  });

  it('fails every expectation of a turn not said, naming where the conversation ended', async () => {
    const test = {
      expect_first_message: [e('reply_contains', { phrase: 'Hi' })],
      turns: [
        { user: 'bye', expect: [e('ended')] },
        { user: 'hello?', expect: [e('reply_contains', { phrase: 'x' }), e('ended')] },
      ],
    };
    const results = await judgeExpectations(test, [w({ reply: 'Hi.' }), w({ ended: true })], 1, mismatch);
    assert.deepEqual(
      results.map((r) => [r.turn, r.index, r.type, r.passed, r.detail]),
      [
        [0, 0, 'reply_contains', true, 'First message: the reply contained "Hi".'],
        [1, 0, 'ended', true, 'Turn 1: the conversation ended.'],
        [2, 0, 'reply_contains', false, 'Turn 2: not said; the conversation had ended at turn 1.'],
        [2, 1, 'ended', false, 'Turn 2: not said; the conversation had ended at turn 1.'],
      ],
    );
  });
});

describe('verdicts', () => {
  const g = (position: number, status: CaseGroup['status'], n: number): CaseGroup => ({
    position,
    test_id: `tst_${position}`,
    test_name: `T${position}`,
    status,
    n,
  });

  it('counts cases by status and gives each test its verdict over its repeats', () => {
    const groups = [
      g(0, 'passed', 3),
      g(1, 'passed', 2),
      g(1, 'failed', 1),
      g(2, 'error', 1),
      g(2, 'passed', 2),
      g(3, 'passed', 1),
      g(3, 'pending', 2),
      g(4, 'pending', 3),
      g(5, 'failed', 1),
      g(5, 'error', 1),
      g(5, 'running', 1),
    ];
    assert.deepEqual(countsOf(groups), { cases: 18, pending: 5, running: 1, passed: 8, failed: 2, errored: 2 });
    assert.deepEqual(
      testsOf(groups, 3).map((t) => [t.name, t.status, t.passes, t.failures, t.errors]),
      [
        ['T0', 'passed', 3, 0, 0],
        ['T1', 'failed', 2, 1, 0],
        ['T2', 'error', 2, 0, 1],
        ['T3', 'running', 1, 0, 0],
        ['T4', 'pending', 0, 0, 0],
        ['T5', 'failed', 0, 1, 1],
      ],
    );
  });

  it('says a run passed only once completed, and only when every test passed', () => {
    const all = testsOf([g(0, 'passed', 2), g(1, 'passed', 2)], 2);
    assert.equal(runPassed(false, all), null);
    assert.equal(runPassed(true, all), true);
    assert.equal(runPassed(true, testsOf([g(0, 'passed', 2), g(1, 'error', 2)], 2)), false);
  });
});
