/**
 * The tools of one test case: what a phone call on the tested version would declare, none of which
 * leaves the service. HTTP and MCP tools are answered by the test's mocks (the first naming the tool
 * whose `when` the arguments match) or fail with a fixed error: this module has no way to call one
 * (it is given the tool catalogue, never the ToolService or the MCP service). `search_knowledge`
 * unmocked searches the version's documents (a database query). The phone built-ins act only here:
 * `transfer_call` succeeds with the chosen destination (nothing is dialed) and ends the conversation,
 * `opt_out` answers as on a phone call but writes no do-not-call entry and ends it, `send_dtmf` checks
 * the keys and presses nothing.
 */
import type { components } from '../../generated/openapi.js';
import { ApiError } from '../errors/api-error.js';
import type { RuntimeAgent } from '../agents/service.js';
import type { ToolMock } from '../agent-tests/definition.js';
import { boundedResult, type ConversationTools } from '../conversation/engine.js';
import { SEARCH_KNOWLEDGE, type ToolCallOutcome, type ToolScope, type ToolSource } from '../conversation/tool-runner.js';
import type { KnowledgeService } from '../knowledge/service.js';
import type { ToolDeclaration } from '../voice/types.js';
import { chosenDestination, TRANSFER_TOOL, transferDeclaration } from '../calls/live/transfer-tool.js';
import { OPT_OUT_DONE, OPT_OUT_TOOL, optOutDeclaration } from '../calls/live/opt-out-tool.js';
import { dtmfArguments, SEND_DTMF_TOOL, sendDtmfDeclaration } from '../calls/live/dtmf-tool.js';
import type { Mismatch } from './expectations.js';

export type TestToolCall = components['schemas']['TestToolCall'];

/** Most tool calls one case keeps (a model calling tools in a loop is stopped by the turn's time limit). */
export const MAX_TOOL_CALLS = 500;

export const noMock = (name: string) => `No mock for '${name}' in this test; test runs never call tools.`;

/** The phone built-ins a call on `agent` would declare. */
export function phoneBuiltins(agent: Pick<RuntimeAgent, 'transferDestinations' | 'optOutEnabled'>): ToolDeclaration[] {
  return [
    ...(agent.transferDestinations.length ? [transferDeclaration(agent.transferDestinations)] : []),
    ...(agent.optOutEnabled ? [optOutDeclaration] : []),
    sendDtmfDeclaration,
  ];
}

export class MockTools implements ConversationTools {
  /** Every tool call so far, in the order they were made. */
  readonly calls: TestToolCall[] = [];
  /** The window calls are made in now (set by the driver). */
  window = 0;
  /** The destination of the successful transfer, once one happened. */
  transferredTo: string | null = null;
  /** An opt-out was answered (the conversation ends after its window, as a phone call does). */
  optedOut = false;
  private readonly sources = new Map<string, ToolSource>();
  private readonly builtins: Set<string>;

  constructor(
    private readonly agent: RuntimeAgent,
    catalogue: Array<{ declaration: ToolDeclaration; source: ToolSource }>,
    private readonly mocks: ToolMock[],
    private readonly knowledge: Pick<KnowledgeService, 'searchIn'>,
    private readonly mismatch: Mismatch,
    private readonly now: () => number,
  ) {
    const builtins = phoneBuiltins(agent);
    this.builtins = new Set(builtins.map((d) => d.name));
    this.declared = [...builtins];
    for (const c of catalogue) {
      if (this.builtins.has(c.declaration.name) || this.sources.has(c.declaration.name)) continue;
      this.sources.set(c.declaration.name, c.source);
      this.declared.push(c.declaration);
    }
  }

  /** What the case declares to the voice service: the phone built-ins, then the version's tools. */
  readonly declared: ToolDeclaration[];

  async declarations(): Promise<ToolDeclaration[]> {
    return this.declared;
  }

  async call(scope: ToolScope, name: string, args: Record<string, unknown>): Promise<ToolCallOutcome> {
    const startedAt = this.now();
    const started = performance.now();
    const { outcome, mocked } = await this.answer(scope, name, args);
    const durationMs = performance.now() - started;
    if (this.calls.length < MAX_TOOL_CALLS) {
      this.calls.push({
        name,
        source: outcome.source,
        arguments: args,
        result: boundedResult(outcome.result),
        ok: outcome.ok,
        error: outcome.ok ? null : (outcome.error ?? 'failed'),
        duration_ms: Math.max(0, Math.round(durationMs)),
        started_at: startedAt / 1000,
        mocked,
        turn: this.window,
      });
    }
    return { ...outcome, durationMs };
  }

  private async answer(scope: ToolScope, name: string, args: Record<string, unknown>): Promise<{ outcome: ToolCallOutcome; mocked: boolean }> {
    const done = (source: ToolSource, ok: boolean, result: unknown, error: string | null, mocked = false) => ({
      outcome: { ok, result, error, source, durationMs: 0 },
      mocked,
    });
    if (this.builtins.has(name)) return this.builtin(name, args, done);
    const source = this.sources.get(name);
    if (source === undefined) return done('builtin', false, null, `No tool named '${name}' is available to this agent.`);
    for (const mock of this.mocks) {
      if (mock.tool !== name) continue;
      if (mock.when && (await this.mismatch(mock.when, args)) !== null) continue;
      return mock.error !== null ? done(source, false, null, mock.error, true) : done(source, true, mock.result, null, true);
    }
    if (source === 'knowledge' && name === SEARCH_KNOWLEDGE) {
      try {
        const query = typeof args.query === 'string' ? args.query : '';
        const limit = typeof args.limit === 'number' ? args.limit : 5;
        // The documents of the version the case runs, as a call of that version searches them.
        const hits = await this.knowledge.searchIn(scope.workspaceId, scope.agentId, scope.links.documentIds, query, limit);
        return done(source, true, { passages: hits.map((h) => ({ document: h.name, text: h.text, score: h.score })) }, null);
      } catch (err) {
        return done(source, false, null, err instanceof ApiError ? err.message : `The tool '${name}' failed unexpectedly.`);
      }
    }
    return done(source, false, null, noMock(name));
  }

  private builtin<T>(name: string, args: Record<string, unknown>, done: (source: ToolSource, ok: boolean, result: unknown, error: string | null) => T): T {
    if (name === TRANSFER_TOOL) {
      const chosen = chosenDestination(this.agent.transferDestinations, args);
      if ('error' in chosen) return done('builtin', false, null, chosen.error);
      this.transferredTo = chosen.destination.name;
      return done('builtin', true, 'The call is being transferred.', null);
    }
    if (name === OPT_OUT_TOOL) {
      this.optedOut = true;
      return done('builtin', true, OPT_OUT_DONE, null);
    }
    if (name === SEND_DTMF_TOOL) {
      const parsed = dtmfArguments(args);
      if ('error' in parsed) return done('builtin', false, null, parsed.error);
      return done('builtin', true, `Pressed ${parsed.keys}.`, null);
    }
    return done('builtin', false, null, `No tool named '${name}' is available to this agent.`);
  }
}
