/**
 * One test case: one conversation in text with the tested version, through the shared engine
 * (src/conversation/engine.ts) and the voice service, with no transport, no record, no slot and no
 * bill. The version's instruction and first message are filled with the test's variables over the
 * version's defaults; the tools are the case's MockTools. The conversation goes window by window:
 * window 0 is the agent's first message (none when it has none), window k its answer to user turn k.
 * A window is over when the voice service says the agent's turn is complete with no tool call
 * pending, or when the conversation ends (the agent ends it, a transfer, an opt-out). Each window has
 * TEST_TURN_TIMEOUT_MS (`reply_timeout`), the whole case TEST_CASE_TIMEOUT_MS (`case_timeout`). The
 * turns left once the conversation ended are not said. Then the expectations are judged
 * (expectations.ts).
 */
import type { Logger } from 'pino';
import type { components } from '../../generated/openapi.js';
import type { AgentService } from '../agents/service.js';
import type { TestDefinition } from '../agent-tests/definition.js';
import { argumentsMismatch } from '../agent-tests/schema-check.js';
import { conversationVariables, fillPlaceholders, filledFieldCaps } from '../contract/placeholders.js';
import { Conversation } from '../conversation/engine.js';
import type { ToolRunner } from '../conversation/tool-runner.js';
import type { KnowledgeService } from '../knowledge/service.js';
import type { Clock } from '../lib/clock.js';
import { VoiceModelRefusedError, type TranscriptTurn, type VoiceEvent, type VoiceService, type VoiceSession } from '../voice/types.js';
import { judgeExpectations, type ConversationWindow, type TestExpectationResult } from './expectations.js';
import { MockTools, type TestToolCall } from './mock-tools.js';

type TestCaseError = components['schemas']['TestCaseError'];
type EndedBy = 'agent' | 'transfer' | 'script_end';

export interface CaseInput {
  caseId: string;
  workspaceId: string;
  agentId: string;
  version: number;
  definition: TestDefinition;
}

export interface CaseOutcome {
  status: 'passed' | 'failed' | 'error';
  transcript: TranscriptTurn[];
  toolCalls: TestToolCall[];
  expectations: TestExpectationResult[];
  endedBy: EndedBy | null;
  error: TestCaseError | null;
  startedAt: Date;
  endedAt: Date;
}

export interface DriverOptions {
  turnTimeoutMs: number;
  caseTimeoutMs: number;
  /** JSON bytes of transcript kept per case (CONVERSATION_RECORD_MAX_BYTES). */
  recordMaxBytes: number;
}

export interface DriverDeps {
  agents: Pick<AgentService, 'findForRuntime'>;
  voice: VoiceService;
  tools: Pick<ToolRunner, 'catalogue'>;
  knowledge: Pick<KnowledgeService, 'searchIn'>;
  clock: Clock;
  log: Logger;
}

/** The tested agent is gone (being deleted): its runs go with it, so the case has nothing to record. */
export class AgentGone extends Error {}

class CaseFailure extends Error {
  constructor(
    readonly code: TestCaseError['code'],
    message: string,
  ) {
    super(message);
  }
}

/** A tool call that has not answered yet never finishes a window; a test's mocks answer at once, so it never says a filler. */
const NO_FILLER_MS = 2_147_483_647;

export class CaseDriver {
  constructor(
    private readonly deps: DriverDeps,
    private readonly opts: DriverOptions,
  ) {}

  async run(input: CaseInput): Promise<CaseOutcome> {
    const startedAt = this.deps.clock.now();
    const agent = await this.deps.agents.findForRuntime(input.workspaceId, input.agentId, input.version);
    if (!agent) throw new AgentGone(`agent ${input.agentId} version ${input.version} is gone`);
    const d = input.definition;
    const values = conversationVariables(agent.variablePlaceholders, d.variables);
    const caps = filledFieldCaps();
    const instruction = fillPlaceholders(agent.instruction, values, caps.instruction);
    const firstMessage = (agent.firstMessage && fillPlaceholders(agent.firstMessage, values, caps.first_message)) || null;
    const mismatch = (schema: Record<string, unknown>, args: Record<string, unknown>) => argumentsMismatch(input.workspaceId, schema, args);
    const tools = new MockTools(
      agent,
      await this.deps.tools.catalogue({ workspaceId: input.workspaceId, agentId: agent.id, links: agent.links }),
      d.tool_mocks,
      this.deps.knowledge,
      mismatch,
      () => this.deps.clock.now().getTime(),
    );
    const failed = (e: CaseFailure, transcript: TranscriptTurn[] = []): CaseOutcome => ({
      status: 'error',
      transcript,
      toolCalls: tools.calls,
      expectations: [],
      endedBy: null,
      error: { code: e.code, message: e.message },
      startedAt,
      endedAt: this.deps.clock.now(),
    });

    let session: VoiceSession;
    try {
      session = await this.deps.voice.open({
        instruction,
        firstMessage,
        model: agent.model,
        voiceId: agent.voiceId,
        language: agent.language,
        languageCode: agent.languageCode,
        tools: tools.declared,
        canEndConversation: agent.canEndConversation,
        source: 'text',
        conversation: agent.conversation,
      });
    } catch (err) {
      if (err instanceof VoiceModelRefusedError) return failed(new CaseFailure('model_refused', `The voice service refused the model: ${err.message}`));
      this.deps.log.warn({ err }, 'test case: the voice session could not start');
      return failed(new CaseFailure('voice_service_unavailable', 'The voice service could not start a session.'));
    }

    // Windows: what was committed in each, and when each is over.
    let window = 0;
    let pendingTools = 0;
    let agentEnded = false;
    let lost: CaseFailure | null = null;
    const replies: string[][] = [[]];
    let waiter: { resolve: () => void; reject: (e: CaseFailure) => void } | null = null;
    const settle = () => {
      const w = waiter;
      waiter = null;
      w?.resolve();
    };
    const observe = (e: VoiceEvent) => {
      if (e.type === 'tool_call') pendingTools += e.calls.length;
      else if (e.type === 'turn_complete' && pendingTools === 0) settle();
      else if (e.type === 'end_conversation') {
        agentEnded = true;
        settle();
      } else if ((e.type === 'unavailable' || e.type === 'closed') && !conversation.isFinished) {
        lost ??= new CaseFailure('voice_service_unavailable', e.type === 'unavailable' ? e.message : 'The voice session closed.');
        const w = waiter;
        waiter = null;
        w?.reject(lost);
      }
    };
    // The engine sees every event first (a turn's text is committed before its window is over).
    const observed: VoiceSession = {
      sendAudio: (pcm) => session.sendAudio(pcm),
      sendImage: (jpeg) => session.sendImage(jpeg),
      sendText: (text) => session.sendText(text),
      sendKeys: (keys) => session.sendKeys(keys),
      say: (text) => session.say(text),
      sendToolResponses: (r) => session.sendToolResponses(r),
      close: () => session.close(),
      onEvent: (listener) =>
        session.onEvent((e) => {
          listener(e);
          observe(e);
        }),
    };
    const conversation: Conversation = new Conversation(
      observed,
      { id: input.caseId, workspaceId: input.workspaceId, agentId: agent.id, links: agent.links, firstMessage, textMode: true, live: null, redaction: null },
      tools,
      this.deps.clock,
      { toolTimeoutMs: this.opts.turnTimeoutMs, toolFillerMs: NO_FILLER_MS, recordMaxBytes: this.opts.recordMaxBytes },
      {
        committed: (turn) => {
          if (turn.role === 'model') replies[window].push(turn.text);
        },
        toolCall: (_name, status) => {
          if (status !== 'started') pendingTools = Math.max(0, pendingTools - 1);
        },
      },
      this.deps.log,
    );
    const over = (): Promise<void> => {
      if (lost) return Promise.reject(lost);
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiter = null;
          reject(
            new CaseFailure(
              'reply_timeout',
              `The agent did not finish answering ${window === 0 ? 'with its first message' : `turn ${window}`} within ${this.opts.turnTimeoutMs} ms.`,
            ),
          );
        }, this.opts.turnTimeoutMs);
        waiter = {
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        };
      });
    };
    const ended = () => agentEnded || tools.transferredTo !== null || tools.optedOut;

    // Which windows are over, and whether the conversation ended in each. Their replies are read once the
    // conversation is finished: the agent's last words are committed when it ends.
    const closed: boolean[] = [];
    const closeWindow = () => {
      closed[window] = ended();
    };
    let caseTimer: NodeJS.Timeout | undefined;
    const caseTimeout = new Promise<never>((_, reject) => {
      caseTimer = setTimeout(() => reject(new CaseFailure('case_timeout', `The case ran longer than ${this.opts.caseTimeoutMs} ms.`)), this.opts.caseTimeoutMs);
    });
    const script = async (): Promise<number | null> => {
      // The first message is judged on its own window; an agent without one waits for the caller.
      if (firstMessage) await over();
      closeWindow();
      if (ended()) return 0;
      for (let k = 1; k <= d.turns.length; k++) {
        window = k;
        tools.window = k;
        replies[k] = [];
        const reply = over();
        conversation.sendText(d.turns[k - 1].user);
        await reply;
        closeWindow();
        if (ended()) return k;
      }
      return null;
    };
    let endedAt: number | null;
    try {
      endedAt = await Promise.race([script(), caseTimeout]);
    } catch (err) {
      const outcome = await conversation.finish();
      if (err instanceof CaseFailure) return failed(err, outcome.transcript);
      throw err;
    } finally {
      clearTimeout(caseTimer);
    }
    const outcome = await conversation.finish();
    const windows: ConversationWindow[] = closed.map((endedHere, k) => {
      const calls = tools.calls.filter((c) => c.turn === k);
      return {
        reply: replies[k].join(' '),
        toolCalls: calls.map((c) => ({ name: c.name, arguments: c.arguments, ok: c.ok })),
        transferredTo: calls.some((c) => c.name === 'transfer_call' && c.ok) ? tools.transferredTo : null,
        ended: endedHere,
      };
    });
    const endedBy: EndedBy = tools.transferredTo !== null ? 'transfer' : endedAt !== null ? 'agent' : 'script_end';
    const expectations = await judgeExpectations(d, windows, endedAt, mismatch);
    return {
      status: expectations.every((e) => e.passed) ? 'passed' : 'failed',
      transcript: outcome.transcript,
      toolCalls: tools.calls,
      expectations,
      endedBy,
      error: null,
      startedAt,
      endedAt: outcome.endedAt,
    };
  }
}
