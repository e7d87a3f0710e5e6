/**
 * Judging a scripted test's expectations on what happened in each window of its conversation (window
 * 0: the agent's first message; window k: the agent's answer to user turn k, its tool calls included).
 * Rules (the README's "Agent tests" section says the same):
 * - The reply of a window is the agent's transcript entries committed in it, joined with one space;
 *   phrases match case-insensitively, every run of whitespace counting as one space, in both.
 * - `reply_contains` / `reply_excludes`: the phrase is / is not in the reply.
 * - `tool_called`: a call of the tool in the window whose arguments match the expectation's schema
 *   (when it has one); `tool_not_called`: no call of the tool in the window.
 * - `transferred`: `transfer_call` answered successfully in the window (to `destination` when given).
 * - `ended`: the conversation ended in the window (the agent ended it, a transfer, or an opt-out).
 * - A turn not said because the conversation had ended fails every expectation of it.
 * Pure but for `mismatch`, which matches arguments against a schema (in the schema pool).
 */
import type { components } from '../../generated/openapi.js';
import type { TestDefinition, TestExpectation } from '../agent-tests/definition.js';

export type TestExpectationResult = components['schemas']['TestExpectationResult'];

export interface WindowToolCall {
  name: string;
  arguments: Record<string, unknown>;
  ok: boolean;
}

/** What one window of the conversation showed. */
export interface ConversationWindow {
  reply: string;
  toolCalls: WindowToolCall[];
  /** The destination a successful `transfer_call` of the window chose; null: none. */
  transferredTo: string | null;
  /** The conversation ended in this window. */
  ended: boolean;
}

/** Why `args` do not match `schema`; null when they do. */
export type Mismatch = (schema: Record<string, unknown>, args: Record<string, unknown>) => Promise<string | null>;

const QUOTE_MAX = 300;

export const normalised = (text: string) => text.replace(/\s+/g, ' ').trim().toLowerCase();
const quoted = (text: string) => (text.length > QUOTE_MAX ? `${text.slice(0, QUOTE_MAX - 1)}…` : text);
const where = (turn: number) => (turn === 0 ? 'First message' : `Turn ${turn}`);

async function judge(e: TestExpectation, w: ConversationWindow, at: string, mismatch: Mismatch): Promise<{ passed: boolean; detail: string }> {
  switch (e.type) {
    case 'reply_contains':
    case 'reply_excludes': {
      const phrase = e.phrase ?? '';
      const has = normalised(w.reply).includes(normalised(phrase));
      if (e.type === 'reply_contains') {
        return has
          ? { passed: true, detail: `${at}: the reply contained "${phrase}".` }
          : { passed: false, detail: `${at}: the reply did not contain "${phrase}"; it was "${quoted(w.reply)}".` };
      }
      return has
        ? { passed: false, detail: `${at}: the reply contained "${phrase}": "${quoted(w.reply)}".` }
        : { passed: true, detail: `${at}: the reply did not contain "${phrase}".` };
    }
    case 'tool_called': {
      const calls = w.toolCalls.filter((c) => c.name === e.tool);
      if (!calls.length) return { passed: false, detail: `${at}: \`${e.tool}\` was not called.` };
      if (!e.arguments) return { passed: true, detail: `${at}: \`${e.tool}\` was called with ${JSON.stringify(calls[0].arguments)}.` };
      let firstWhy = '';
      for (const c of calls) {
        const why = await mismatch(e.arguments, c.arguments);
        if (why === null) return { passed: true, detail: `${at}: \`${e.tool}\` was called with ${JSON.stringify(c.arguments)}.` };
        firstWhy ||= why;
      }
      return {
        passed: false,
        detail: `${at}: \`${e.tool}\` was called with ${JSON.stringify(calls[0].arguments)}, which does not match the expected arguments: ${firstWhy}.`,
      };
    }
    case 'tool_not_called': {
      const call = w.toolCalls.find((c) => c.name === e.tool);
      return call
        ? { passed: false, detail: `${at}: \`${e.tool}\` was called with ${JSON.stringify(call.arguments)}.` }
        : { passed: true, detail: `${at}: \`${e.tool}\` was not called.` };
    }
    case 'transferred': {
      if (w.transferredTo === null) return { passed: false, detail: `${at}: the call was not transferred.` };
      if (e.destination && e.destination !== w.transferredTo) {
        return { passed: false, detail: `${at}: the call was transferred to ${w.transferredTo}, not to ${e.destination}.` };
      }
      return { passed: true, detail: `${at}: the call was transferred to ${w.transferredTo}.` };
    }
    case 'ended':
      return w.ended ? { passed: true, detail: `${at}: the conversation ended.` } : { passed: false, detail: `${at}: the conversation did not end.` };
  }
}

/**
 * Every expectation of `test` judged, in order (first message, then each turn's). `windows[k]` is the
 * window of turn k; a turn with no window was not said (the conversation had ended at `endedAt`).
 */
export async function judgeExpectations(
  test: Pick<TestDefinition, 'expect_first_message' | 'turns'>,
  windows: ConversationWindow[],
  endedAt: number | null,
  mismatch: Mismatch,
): Promise<TestExpectationResult[]> {
  const lists: TestExpectation[][] = [test.expect_first_message, ...test.turns.map((t) => t.expect)];
  const out: TestExpectationResult[] = [];
  for (let turn = 0; turn < lists.length; turn++) {
    const w = windows[turn];
    for (let index = 0; index < lists[turn].length; index++) {
      const e = lists[turn][index];
      if (!w) {
        const ended = endedAt === null ? 'before it' : endedAt === 0 ? 'at the first message' : `at turn ${endedAt}`;
        out.push({ turn, index, type: e.type, passed: false, detail: `${where(turn)}: not said; the conversation had ended ${ended}.` });
        continue;
      }
      out.push({ turn, index, type: e.type, ...(await judge(e, w, where(turn), mismatch)) });
    }
  }
  return out;
}
