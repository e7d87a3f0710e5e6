/**
 * Inbound numbers: pointing an agent's number at this service at its carrier (enableInbound) or away
 * from it (disableInbound), and, with the sandbox carriers, ringing such a number as a caller would.
 * The carrier is called first and the agent changes only when it succeeded, so a carrier failure (502)
 * changes nothing.
 */
import type { Logger } from 'pino';
import { badGateway, conflict, notFound, unprocessable } from '../errors/api-error.js';
import type { AgentService, Agent, RuntimeAgent } from '../agents/service.js';
import type { CallStore } from './store.js';
import { toCall, type Call } from './records.js';
import { CarrierError, MissingCredentialsError, PROVIDERS, type Carriers, type Provider } from '../carriers/index.js';

export const DEFAULT_SANDBOX_CALLER = '+15555550100';

/** The sandbox carriers as inbound calls use them: ring a number as a person would. */
export interface SandboxRinger {
  /** The providers that run on the sandbox carriers. */
  providers: Set<Provider>;
  ring(input: { provider: Provider; from: string; to: string }): Promise<{ callSid: string }>;
}

function carrierFailure(err: CarrierError) {
  if (err.kind === 'auth') return badGateway('carrier_auth_failed', 'The carrier rejected the stored credentials.');
  if (err.kind === 'not_found') return badGateway('carrier_number_not_found', err.message);
  return badGateway('carrier_error', `The carrier request failed: ${err.message}`);
}

export class InboundNumbers {
  constructor(
    private readonly agents: AgentService,
    private readonly carriers: Carriers,
    private readonly store: CallStore,
    /** The sandbox carriers when a provider runs on them. */
    private readonly sandbox: SandboxRinger | null,
    private readonly log: Logger,
  ) {}

  private configured(agent: RuntimeAgent, provider: Provider): { phoneNumber: string } {
    const c = this.carriers.account(agent, provider);
    if (!c?.configured || !c.phoneNumber) {
      const fields = this.carriers.get(provider).credentials.inboundFields;
      throw conflict('provider_not_configured', `${provider} is not configured on this agent: set ${fields} first.`, 'provider');
    }
    return { phoneNumber: c.phoneNumber };
  }

  private async atCarrier(agent: RuntimeAgent, provider: Provider, phoneNumber: string, enabled: boolean): Promise<void> {
    try {
      await this.carriers.get(provider).rest.setInbound(this.carriers.credentialsOf(agent, provider), phoneNumber, enabled);
    } catch (err) {
      if (err instanceof MissingCredentialsError) throw conflict('provider_not_configured', err.message, 'provider');
      if (err instanceof CarrierError) {
        this.log.warn({ agentId: agent.id, provider, kind: err.kind, detail: err.detail }, 'carrier refused the inbound configuration');
        throw carrierFailure(err);
      }
      throw err;
    }
  }

  async enable(workspaceId: string, agentId: string, provider: Provider): Promise<Agent> {
    const agent = await this.agents.loadForRuntime(workspaceId, agentId);
    const { phoneNumber } = this.configured(agent, provider);
    const holder = await this.agents.inboundAgent(provider, phoneNumber);
    if (holder && holder.id !== agent.id)
      throw conflict('phone_number_in_use', `Another agent already answers inbound calls on ${phoneNumber} at ${provider}.`, 'provider');
    await this.atCarrier(agent, provider, phoneNumber, true);
    return this.agents.setInbound(workspaceId, agentId, provider, phoneNumber, true);
  }

  async disable(workspaceId: string, agentId: string, provider: Provider): Promise<Agent> {
    const agent = await this.agents.loadForRuntime(workspaceId, agentId);
    const c = this.carriers.account(agent, provider);
    if (!c?.inboundEnabled) return this.agents.get(workspaceId, agentId);
    const { phoneNumber } = this.configured(agent, provider);
    await this.atCarrier(agent, provider, phoneNumber, false);
    return this.agents.setInbound(workspaceId, agentId, provider, phoneNumber, false);
  }

  /** POST /api/v1/sandbox/inbound-calls: the sandbox carrier rings the number; the answer is the call it created. */
  async ringSandbox(workspaceId: string, input: { to_number: string; from_number?: string; provider?: Provider }): Promise<Call> {
    const candidates: Array<[Provider, RuntimeAgent]> = [];
    for (const provider of input.provider ? [input.provider] : PROVIDERS) {
      const agent = await this.agents.inboundAgent(provider, input.to_number);
      if (agent && agent.workspaceId === workspaceId) candidates.push([provider, agent]);
    }
    if (candidates.length === 0) {
      throw notFound(
        'no_agent_for_number',
        `No agent of this workspace takes inbound calls on ${input.to_number}${input.provider ? ` at ${input.provider}` : ''}.`,
        'to_number',
      );
    }
    if (candidates.length > 1)
      throw unprocessable('provider_required', `${input.to_number} takes inbound calls at both providers; say which one rings it.`, 'provider');
    const [provider] = candidates[0];
    if (!this.sandbox || !this.sandbox.providers.has(provider)) {
      throw conflict('sandbox_not_enabled', `${provider} runs on a real carrier here; ring the number from a phone instead.`, 'provider');
    }
    let callSid: string;
    try {
      ({ callSid } = await this.sandbox.ring({ provider, from: input.from_number ?? DEFAULT_SANDBOX_CALLER, to: input.to_number }));
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'sandbox carrier could not ring the number');
      throw badGateway('carrier_error', `The sandbox carrier could not ring ${input.to_number}: ${(err as Error).message}`);
    }
    const call = await this.store.findByCallSid(provider, callSid);
    if (!call)
      throw conflict(
        'inbound_call_rejected',
        'The service refused the call (subscription inactive, plan minutes or concurrency slots used up); the carrier was told busy.',
      );
    // Just answered: no audio recorded yet.
    return toCall(call, null, []);
  }
}
