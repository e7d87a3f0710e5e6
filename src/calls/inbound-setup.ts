/**
 * Per-caller setup of inbound calls: before an inbound call is answered, the agent's `inbound_setup.url`
 * is asked (a signed POST, as webhook deliveries are signed, through the outbound guard) and may set
 * the call's variables and first message, hand it to another agent of the workspace, or refuse it.
 * Within `timeoutMs` or not at all: a timeout, a failure or an answer that is not an
 * `InboundSetupAnswer` leaves the call to the agent's own settings, with the failure recorded. So does
 * an answer the call could not be stored with (text PostgreSQL refuses), whose variables would fill
 * a text past its cap, or that leaves a placeholder without a value: whatever is wrong with an answer,
 * the call is answered.
 */
import type { Logger } from 'pino';
import type { components } from '../../generated/openapi.js';
import { openapiSchemaValidator } from '../contract/documents.js';
import type { Clock } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import { guardedRequest, OutboundRequestError } from '../net/guarded-request.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';
import type { RuntimeAgent, RuntimeMiss } from '../agents/service.js';
import type { Variables } from '../contract/placeholders.js';
import { CallTexts } from './filled-text.js';
import { deliveryHeaders } from '../webhooks/signing.js';
import { USER_AGENT } from '../webhooks/delivery.js';
import type { Provider } from '../carriers/carrier.js';

export type InboundSetupOutcome = components['schemas']['InboundSetupOutcome'];
type Answer = components['schemas']['InboundSetupAnswer'];
type SetupError = components['schemas']['InboundSetupError'];

const MAX_ANSWER_BYTES = 64 * 1024;

/** What PostgreSQL cannot store in text or jsonb: a NUL, or a lone surrogate (JSON writes one as `\ud800`). */
const UNSTORABLE = /[\0\p{Cs}]/u;

/** Whether every string of the answer can be stored with the call. */
function storable(answer: Answer): boolean {
  const texts = [answer.first_message ?? '', ...Object.entries(answer.variables ?? {}).flat()];
  return texts.every((t) => typeof t !== 'string' || !UNSTORABLE.test(t));
}

export interface InboundSetupDeps {
  /** The workspace's webhook signing secrets (current first); null when they cannot be loaded. */
  signingSecrets(workspaceId: string): Promise<string[] | null>;
  runtimeOf(workspaceId: string, agentId: string): Promise<RuntimeAgent | RuntimeMiss>;
}

/** How the call is to be answered. */
export type SetupDecision =
  | { refused: true; outcome: InboundSetupOutcome }
  | { refused: false; agent: RuntimeAgent; variables: Variables; firstMessage?: string | null; outcome: InboundSetupOutcome | null };

class SetupFailure extends Error {
  constructor(readonly reason: SetupError) {
    super(reason);
  }
}

export class InboundSetup {
  constructor(
    private readonly deps: InboundSetupDeps,
    private readonly outbound: OutboundPolicy,
    private readonly clock: Clock,
    private readonly opts: { timeoutMs: number },
    private readonly log: Logger,
  ) {}

  /** Asks the agent's setup URL how to answer the call `callId`; agents without one answer with their own settings. */
  async decide(agent: RuntimeAgent, call: { callId: string; provider: Provider; from: string; to: string }): Promise<SetupDecision> {
    if (!agent.inboundSetupUrl) return { refused: false, agent, variables: {}, outcome: null };
    const started = performance.now();
    const took = () => Math.round(performance.now() - started);
    try {
      const answer = await this.ask(agent, agent.inboundSetupUrl, call);
      const chosen = answer.agent_id && answer.agent_id !== agent.id ? await this.deps.runtimeOf(agent.workspaceId, answer.agent_id) : agent;
      if (typeof chosen === 'string') throw new SetupFailure('agent_not_found');
      const texts = new CallTexts(chosen);
      if (texts.overflow(answer.variables, answer.first_message)) throw new SetupFailure('invalid_answer');
      if (answer.action !== 'refuse' && texts.missing(answer.variables, answer.first_message)) throw new SetupFailure('variable_missing');
      const outcome: InboundSetupOutcome = { status: 'applied', error: null, agent_id: answer.agent_id ?? null, duration_ms: took() };
      if (answer.action === 'refuse') return { refused: true, outcome };
      return {
        refused: false,
        agent: chosen,
        variables: answer.variables ?? {},
        ...(answer.first_message !== undefined ? { firstMessage: answer.first_message } : {}),
        outcome,
      };
    } catch (err) {
      const reason = err instanceof SetupFailure ? err.reason : 'network_error';
      if (!(err instanceof SetupFailure) && !(err instanceof OutboundRequestError)) this.log.error({ err }, 'inbound setup failed unexpectedly');
      this.log.info({ agentId: agent.id, callId: call.callId, reason }, "inbound setup failed; answering with the agent's own settings");
      return { refused: false, agent, variables: {}, outcome: { status: 'failed', error: reason, agent_id: null, duration_ms: took() } };
    }
  }

  private async ask(agent: RuntimeAgent, url: string, call: { callId: string; provider: Provider; from: string; to: string }): Promise<Answer> {
    const body = JSON.stringify({
      event: 'inbound.setup',
      call_id: call.callId,
      agent_id: agent.id,
      provider: call.provider,
      from_number: call.from,
      to_number: call.to,
      sent_at: this.clock.now().toISOString(),
    });
    const headers = deliveryHeaders({
      eventId: newId('event'),
      timestamp: Math.floor(this.clock.now().getTime() / 1000),
      body,
      secrets: await this.deps.signingSecrets(agent.workspaceId),
      userAgent: USER_AGENT,
    });
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new SetupFailure('timeout')), this.opts.timeoutMs);
    try {
      const res = await guardedRequest(this.outbound, url, {
        method: 'POST',
        headers,
        body,
        maxResponseBytes: MAX_ANSWER_BYTES,
        signal: deadline.signal,
      }).catch((err: unknown) => {
        throw err instanceof SetupFailure ? err : new SetupFailure(err instanceof OutboundRequestError && err.kind === 'timeout' ? 'timeout' : 'network_error');
      });
      if (res.status !== 200) {
        res.body.resume();
        throw new SetupFailure('http_status');
      }
      const chunks: Buffer[] = [];
      try {
        for await (const chunk of res.body) chunks.push(chunk as Buffer);
      } catch (err) {
        if (err instanceof SetupFailure) throw err;
        throw new SetupFailure(
          err instanceof OutboundRequestError && err.kind === 'too_large' ? 'invalid_answer' : deadline.signal.aborted ? 'timeout' : 'network_error',
        );
      }
      let answer: unknown;
      try {
        answer = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        throw new SetupFailure('invalid_answer');
      }
      if (!openapiSchemaValidator('InboundSetupAnswer')(answer) || !storable(answer as Answer)) throw new SetupFailure('invalid_answer');
      return answer as Answer;
    } finally {
      clearTimeout(timer);
    }
  }
}
