/**
 * A scripted test as stored (`agent_tests.definition`, and copied into each case of a run): the
 * request's fields normalised to the response's shapes (every expectation and mock with all its
 * fields, absent ones null), and the rules the contract cannot say in JSON Schema, each refused with
 * 422 `invalid_value` naming the field.
 */
import type { components } from '../../generated/openapi.js';
import { unprocessable } from '../errors/api-error.js';
import type { PlacedSchema } from './test-schema.js';

export type TestExpectation = components['schemas']['TestExpectation'];
export type TestTurn = components['schemas']['TestTurn'];
export type ToolMock = components['schemas']['ToolMock'];
export type VariableValue = components['schemas']['VariableValue'];
type ExpectationInput = components['schemas']['TestExpectationInput'];
type TurnInput = components['schemas']['TestTurnInput'];
type MockInput = components['schemas']['ToolMockInput'];

export interface TestDefinition {
  description: string | null;
  variables: Record<string, VariableValue>;
  expect_first_message: TestExpectation[];
  turns: TestTurn[];
  tool_mocks: ToolMock[];
}

/** Tools that never leave the service in a test (a phone call's own), so no mock may name them. */
export const UNMOCKABLE = ['transfer_call', 'opt_out', 'send_dtmf', 'end_conversation'];
/** Most bytes of a mock's `result` as JSON. */
export const MOCK_RESULT_MAX_BYTES = 16 * 1024;

/** The fields each expectation type takes: required, then optional. */
const FIELDS: Record<TestExpectation['type'], { required: Array<keyof ExpectationInput>; optional: Array<keyof ExpectationInput> }> = {
  reply_contains: { required: ['phrase'], optional: [] },
  reply_excludes: { required: ['phrase'], optional: [] },
  tool_called: { required: ['tool'], optional: ['arguments'] },
  tool_not_called: { required: ['tool'], optional: [] },
  transferred: { required: [], optional: ['destination'] },
  ended: { required: [], optional: [] },
};
const OPTIONAL_FIELDS: Array<keyof ExpectationInput> = ['phrase', 'tool', 'arguments', 'destination'];

function expectation(input: ExpectationInput, at: string): TestExpectation {
  const rule = FIELDS[input.type];
  for (const field of rule.required) {
    if (input[field] === undefined) throw unprocessable('invalid_value', `A '${input.type}' expectation needs '${field}'.`, `${at}.${field}`);
  }
  for (const field of OPTIONAL_FIELDS) {
    if (input[field] !== undefined && !rule.required.includes(field) && !rule.optional.includes(field)) {
      throw unprocessable('invalid_value', `'${field}' does not apply to a '${input.type}' expectation.`, `${at}.${field}`);
    }
  }
  return {
    type: input.type,
    phrase: input.phrase ?? null,
    tool: input.tool ?? null,
    arguments: (input.arguments as Record<string, unknown> | undefined) ?? null,
    destination: input.destination ?? null,
  };
}

function mock(input: MockInput, at: string): ToolMock {
  if (UNMOCKABLE.includes(input.tool)) {
    throw unprocessable('invalid_value', `'${input.tool}' cannot be mocked: it never leaves the service in a test.`, `${at}.tool`);
  }
  if (input.result !== undefined && input.error !== undefined) {
    throw unprocessable('invalid_value', 'A mock gives a result or an error, not both.', `${at}.error`);
  }
  if (input.result !== undefined && Buffer.byteLength(JSON.stringify(input.result)) > MOCK_RESULT_MAX_BYTES) {
    throw unprocessable('invalid_value', `A mock's result is at most ${MOCK_RESULT_MAX_BYTES} bytes as JSON.`, `${at}.result`);
  }
  return { tool: input.tool, when: (input.when as Record<string, unknown> | undefined) ?? null, result: input.result ?? null, error: input.error ?? null };
}

export const expectations = (list: ExpectationInput[] | undefined, at: string): TestExpectation[] => (list ?? []).map((e, i) => expectation(e, `${at}[${i}]`));
export const turns = (list: TurnInput[], at = 'turns'): TestTurn[] =>
  list.map((t, i) => ({ user: t.user, expect: expectations(t.expect, `${at}[${i}].expect`) }));
export const mocks = (list: MockInput[] | undefined, at = 'tool_mocks'): ToolMock[] => (list ?? []).map((m, i) => mock(m, `${at}[${i}]`));

/** Every JSON Schema of a definition, with where it is. */
export function schemasOf(d: Pick<TestDefinition, 'expect_first_message' | 'turns' | 'tool_mocks'>): PlacedSchema[] {
  const out: PlacedSchema[] = [];
  d.expect_first_message.forEach((e, i) => e.arguments && out.push({ param: `expect_first_message[${i}].arguments`, schema: e.arguments }));
  d.turns.forEach((t, k) => t.expect.forEach((e, i) => e.arguments && out.push({ param: `turns[${k}].expect[${i}].arguments`, schema: e.arguments })));
  d.tool_mocks.forEach((m, i) => m.when && out.push({ param: `tool_mocks[${i}].when`, schema: m.when }));
  return out;
}
