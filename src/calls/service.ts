/**
 * The rules of phone calls, without Koa: placing an outbound call (agent, provider, numbers, webhook
 * target, billing and a concurrency slot, all checked before anything is dialed; the call row, its
 * dial job and its deadline job written in one transaction), reading and listing calls, hanging up,
 * and the inbound call record a carrier callback creates.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { components } from '../../generated/openapi.js';
import { ApiError, conflict, notFound, otherWorkspace, badGateway } from '../errors/api-error.js';
import type { Clock } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import { sha256Hex } from '../lib/tokens.js';
import type { Page, PageParams } from '../lib/pagination.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';
import { checkTargetUrl } from '../net/target-url.js';
import type { RuntimeAgent } from '../agents/service.js';
import type { ReservationTerms, WorkspaceAdmission, WorkspaceBilling } from '../workspaces/admission.js';
import type { Variables } from '../contract/placeholders.js';
import { job, type JobQueue } from '../jobs/queue.js';
import { CarrierError, MissingCredentialsError, PROVIDERS, type CarrierCredentials, type Carriers, type Provider } from '../carriers/index.js';
import type { InboundSetup, SetupDecision } from './inbound-setup.js';
import type { CallFinaliser } from './finaliser.js';
import { DEADLINE_JOB, DIAL_JOB, IN_PROCESS_DIAL_JOB } from './job-kinds.js';
import type { CallAgents, CallTiming } from './dependencies.js';
import { newStreamToken } from './stream-token.js';
import { CallTexts, missingError, overflowError } from './filled-text.js';
import { toCall, type Call } from './records.js';
import type { RecordingView } from '../recordings/service.js';
import { isRefusal, refusalError, type CallRefusal } from './refusals.js';
import { carrierAgentId, isTerminal, type CallFilters, type CallRow, type CallStore } from './store.js';
import { callerIdRefusal } from '../destinations/policy.js';
import type { DestinationService } from '../destinations/service.js';
import type { DoNotCallService } from '../do-not-call/service.js';
import { effectiveSettings, type ConversationSettingsInput } from '../voice/conversation-settings.js';

type CreateRequest = components['schemas']['CallCreateRequest'];

/** Who places an outbound call and from which number, resolved once for any number of calls. */
export interface OutboundPlan {
  workspaceId: string;
  agent: RuntimeAgent;
  provider: Provider;
  from: string;
}

/** What an outbound call names: its agent (and version: null, the published one), provider and calling number. */
export interface PlanRequest {
  agent_id: string;
  agent_version?: number | null;
  provider?: Provider;
  from_number?: string;
}

/** One outbound call to write (its concurrency slot is already held under `callId`). */
export interface QueuedCall {
  callId: string;
  to: string;
  variables?: Variables;
  firstMessage?: string | null;
  webhookUrl?: string | null;
  /** The call's or batch's own recording choice; null: the agent's. */
  recording?: boolean | null;
  /** The call's or batch's override of the agent's conversation settings (already checked). */
  conversation?: ConversationSettingsInput | null;
  batchId?: string | null;
  /** A batch's call: its recipient and which attempt it is (one call per attempt, a unique key). */
  attempt?: { recipientId: string; number: number };
}

const BILLING_CODES = { subscription_inactive: 'subscription_inactive', plan_limit: 'plan_limit_reached', insufficient_credit: 'insufficient_credit' } as const;

/** The billing checks passed, but what is left is held by the workspace's live conversations. */
const HELD_MESSAGES = {
  plan_limit: "The plan minutes left this month are held by the workspace's live calls and sessions; retry when one ends.",
  insufficient_credit: "The workspace's credit left is held by its live calls and sessions; retry when one ends, or add credit.",
} as const;

export function callNotFound(callId: string) {
  return notFound('call_not_found', `No call ${callId.slice(0, 64)}.`, 'call_id');
}

/** Which provider a call uses: the one asked for, else the agent's only configured one. */
function chooseProvider(carriers: Carriers, agent: RuntimeAgent, asked: Provider | undefined): Provider | CallRefusal {
  const configured = PROVIDERS.filter((p) => carriers.canDial(agent, p));
  if (asked) return configured.includes(asked) ? asked : { code: 'provider_not_configured', message: `The agent has no complete ${asked} configuration.` };
  if (configured.length === 0)
    return {
      code: 'provider_not_configured',
      message: `The agent has no telephony provider configured; set ${PROVIDERS.map((p) => `${p}_config`).join(' or ')} first.`,
    };
  if (configured.length > 1) return { code: 'provider_required' };
  return configured[0];
}

export class CallService {
  /** Set once recordings exist (src/service.ts): the recording shown with each call. */
  recordings: { viewsOf(ids: string[]): Promise<Map<string, RecordingView>> } | null = null;
  /** Set once the do-not-call list exists (src/service.ts): a call to a listed number is refused. */
  doNotCall: Pick<DoNotCallService, 'check'> | null = null;

  constructor(
    private readonly store: CallStore,
    private readonly agents: CallAgents,
    private readonly admission: WorkspaceAdmission,
    private readonly jobs: JobQueue,
    private readonly carriers: Carriers,
    private readonly finaliser: CallFinaliser,
    private readonly outbound: OutboundPolicy,
    private readonly clock: Clock,
    private readonly timing: CallTiming,
    private readonly opts: { centsPerMinute: number },
    private readonly log: Logger,
    private readonly destinations: DestinationService,
    private readonly inboundSetup: InboundSetup | null = null,
  ) {}

  /** How long a new call may take at most before its deadline job ends it. */
  private firstDeadline(): Date {
    const t = this.timing;
    return new Date(this.clock.now().getTime() + t.dialGraceMs + t.ringTimeoutS * 1000 + t.orphanAfterMs);
  }

  /** The workspace's billing fields, or why billing refuses a conversation now. */
  async billing(workspaceId: string): Promise<WorkspaceBilling | CallRefusal> {
    const workspace = await this.admission.workspace(workspaceId);
    if (!workspace) return { code: 'unauthorized' };
    const refusal = await this.admission.refusal(workspace, Math.max(1, this.opts.centsPerMinute));
    return refusal ? { code: BILLING_CODES[refusal] } : workspace;
  }

  /** The workspace's billing fields; 401/402 when billing refuses a conversation now. */
  async checkBilling(workspaceId: string): Promise<WorkspaceBilling> {
    const billing = await this.billing(workspaceId);
    if (isRefusal(billing)) throw refusalError(billing);
    return billing;
  }

  /**
   * The agent, provider and caller number of an outbound call, or why it cannot be placed. A batch
   * plans once per dispatch round.
   */
  async planOrRefusal(workspaceId: string, body: PlanRequest): Promise<OutboundPlan | CallRefusal> {
    const agent = await this.agents.runtimeOf(workspaceId, body.agent_id, body.agent_version);
    if (agent === 'not_found') return { code: 'agent_not_found', agentId: body.agent_id };
    if (agent === 'other_workspace') return { code: 'forbidden' };
    if (agent === 'version_not_found') return { code: 'agent_version_not_found', agentId: body.agent_id, version: body.agent_version! };
    const provider = chooseProvider(this.carriers, agent, body.provider);
    if (typeof provider !== 'string') return provider;
    const config = this.carriers.account(agent, provider);
    const from = body.from_number ?? config?.phoneNumber ?? null;
    if (!from) return { code: 'from_number_missing', message: `The agent's ${provider} configuration has no phone_number; set it or send from_number.` };
    const callerId = callerIdRefusal(from);
    if (callerId) return { code: callerId.code, message: `${body.from_number ? 'from_number' : `The agent's ${provider} phone_number`}: ${callerId.message}` };
    return { workspaceId, agent, provider, from };
  }

  /** The plan of an outbound call (404/403 for the agent, 422 for the provider and number). */
  async plan(workspaceId: string, body: PlanRequest): Promise<OutboundPlan> {
    const plan = await this.planOrRefusal(workspaceId, body);
    if (isRefusal(plan)) throw refusalError(plan);
    return plan;
  }

  /** 422 `url_not_allowed` unless the webhook target passes the outbound guard. */
  async checkWebhookUrl(url: string | undefined, param = 'webhook_url'): Promise<void> {
    if (url !== undefined) await checkTargetUrl(this.outbound, url, param, { acceptUnresolvable: false });
  }

  /** The slot lease of a call lasts as long as the longest call could (it is released when the call ends). */
  get slotTtlMs(): number {
    const t = this.timing;
    return t.dialGraceMs + t.ringTimeoutS * 1000 + t.maxDurationS * 1000 + 2 * t.orphanAfterMs;
  }

  /** What a call reserves of the credit and plan minutes: a slice at the call price, lasting as its slot does, never beyond its maximum length. */
  get reservationTerms(): ReservationTerms {
    return {
      kind: 'phone_call',
      centsPerMinute: this.opts.centsPerMinute,
      expiryMs: this.slotTtlMs,
      maxMinutes: this.admission.minutesFor(this.timing.maxDurationS * 1000),
    };
  }

  /**
   * Admits a call: its reservation and a fixed-term slot in one transaction. Refused: the billing code
   * (the credit or plan minutes left are held by the workspace's live conversations), or null for a
   * full workspace.
   */
  private async admit(callId: string, workspace: WorkspaceBilling): Promise<CallRefusal | null | undefined> {
    const ask = this.admission.ask(workspace.plan, this.reservationTerms);
    const admitted = await this.admission.slots.admitFixed(callId, workspace.id, workspace.concurrent_session_limit, this.slotTtlMs, ask);
    if (admitted === 'concurrency') return null;
    if (typeof admitted === 'string') return { code: BILLING_CODES[admitted], message: HELD_MESSAGES[admitted] };
    return undefined;
  }

  /**
   * Writes queued outbound calls with their dial and deadline jobs, in `trx` (the caller holds their
   * concurrency slots, ids as call ids). Nothing is dialed unless the transaction commits.
   */
  async insertQueued(plan: OutboundPlan, calls: QueuedCall[], trx: Knex.Transaction): Promise<CallRow[]> {
    const deadline = this.firstDeadline();
    const { agent } = plan;
    const texts = new CallTexts(agent);
    const rows = await this.store.insertMany(
      calls.map((c) => {
        const filled = texts.filled(c.variables, c.firstMessage ?? undefined);
        return {
          id: c.callId,
          workspace_id: plan.workspaceId,
          agent_id: agent.id,
          batch_id: c.batchId ?? null,
          batch_recipient_id: c.attempt?.recipientId ?? null,
          attempt: c.attempt?.number ?? null,
          direction: 'outbound' as const,
          provider: plan.provider,
          from_number: plan.from,
          to_number: c.to,
          status: 'queued' as const,
          call_sid: null,
          first_message: filled.first_message,
          variables: c.variables ?? {},
          webhook_url: c.webhookUrl ?? null,
          instruction: filled.instruction,
          analysis: agent.analysis,
          analysis_model: agent.analysisModel,
          agent_version: agent.version,
          redaction: agent.redaction,
          conversation: effectiveSettings(agent.conversation, c.conversation),
          recording_enabled: c.recording ?? agent.recordingEnabled,
          stream_token_hash: null,
          deadline_at: deadline,
        };
      }),
      trx,
    );
    const dialJob = this.carriers.dialsInProcess(plan.provider) ? IN_PROCESS_DIAL_JOB : DIAL_JOB;
    await this.jobs.addMany(
      calls.flatMap((c) => [
        job(dialJob, { call_id: c.callId }),
        // First at the end of the dial grace (a dial job lost with its instance is taken over), then at the deadline.
        job(DEADLINE_JOB, { call_id: c.callId }, new Date(this.clock.now().getTime() + this.timing.dialGraceMs)),
      ]),
      trx,
    );
    return rows;
  }

  /** POST /api/v1/calls: every check first; nothing is dialed when one refuses. */
  async create(workspaceId: string, body: CreateRequest): Promise<Call> {
    const plan = await this.plan(workspaceId, body);
    // 422 for an override the contract cannot refuse, before anything is held or stored.
    effectiveSettings(plan.agent.conversation, body.conversation);
    const texts = new CallTexts(plan.agent);
    const missing = texts.missing(body.variables, body.first_message);
    if (missing) throw missingError(missing);
    const overflow = texts.overflow(body.variables, body.first_message);
    if (overflow) throw overflowError(overflow, body.variables);
    await this.destinations.checkDestination(workspaceId, body.to_number, 'to_number');
    // Before billing and the slot: a listed number costs the workspace nothing and stores nothing.
    await this.doNotCall?.check(workspaceId, body.to_number, 'to_number');
    await this.checkWebhookUrl(body.webhook_url);
    const workspace = await this.checkBilling(workspaceId);
    await this.destinations.checkDailyCap(workspaceId);
    const callId = newId('call');
    const refused = await this.admit(callId, workspace);
    if (refused) throw refusalError(refused);
    if (refused === null) {
      throw new ApiError(
        429,
        'rate_limit_error',
        'concurrency_limit_reached',
        `All ${workspace.concurrent_session_limit} concurrency slots of the workspace are in use; retry when a call or session ends.`,
        {
          headers: { 'Retry-After': '5' },
        },
      );
    }
    try {
      const [row] = await this.store.knex.transaction((trx) =>
        this.insertQueued(
          plan,
          [
            {
              callId,
              to: body.to_number,
              variables: body.variables,
              firstMessage: body.first_message,
              webhookUrl: body.webhook_url,
              recording: body.recording?.enabled ?? null,
              conversation: body.conversation ?? null,
            },
          ],
          trx,
        ),
      );
      this.log.info({ callId, workspaceId, agentId: plan.agent.id, provider: plan.provider }, 'call queued');
      return toCall(row, null, []);
    } catch (err) {
      await this.admission.slots.releaseUnused(callId).catch(() => undefined);
      // Another request took the day's last call between the check above and the insert.
      throw this.destinations.dailyCapError(err) ?? err;
    }
  }

  /** The call row of this workspace: 404 when there is none, 403 when it is another workspace's. */
  async owned(workspaceId: string, callId: string): Promise<CallRow> {
    const row = await this.store.get(callId);
    if (!row) throw callNotFound(callId);
    if (row.workspace_id !== workspaceId) throw otherWorkspace('call');
    return row;
  }

  async get(workspaceId: string, callId: string): Promise<Call> {
    return this.shown(await this.owned(workspaceId, callId));
  }

  /** The call whatever its workspace (a signed recording link names it): 404 when there is none. */
  async any(callId: string): Promise<CallRow> {
    const row = await this.store.get(callId);
    if (!row) throw callNotFound(callId);
    return row;
  }

  /** The call as the API shows it, its recording included. */
  async shown(row: CallRow): Promise<Call> {
    const [views, transfers] = await Promise.all([
      this.recordings ? this.recordings.viewsOf([row.id]) : new Map<string, RecordingView>(),
      this.store.transfers.of(row.workspace_id, [row.id]),
    ]);
    return toCall(row, views.get(row.id) ?? null, transfers.get(row.id) ?? []);
  }

  async list(workspaceId: string, query: CallFilters & PageParams): Promise<Page<Call>> {
    const page = await this.store.list(workspaceId, query, query);
    const ids = page.data.map((r) => r.id);
    const [views, transfers] = await Promise.all([
      this.recordings ? this.recordings.viewsOf(ids) : new Map<string, RecordingView>(),
      this.store.transfers.of(workspaceId, ids),
    ]);
    return { ...page, data: page.data.map((r) => toCall(r, views.get(r.id) ?? null, transfers.get(r.id) ?? [])) };
  }

  /**
   * POST /calls/{call_id}/hangup. A queued call not yet handed to the carrier is canceled here; a
   * call at the carrier is hung up there (its end then arrives as usual); a terminal one is 409.
   */
  async hangup(workspaceId: string, callId: string): Promise<Call> {
    const row = await this.owned(workspaceId, callId);
    if (isTerminal(row.status)) throw conflict('call_already_ended', `The call has already ended (status '${row.status}').`);
    const marked = await this.store.update(callId, { hangup_requested_at: this.clock.now(), end_reason_hint: row.answered_at ? 'api_hangup' : 'canceled' });
    if (!marked) return this.get(workspaceId, callId);
    if (marked.status === 'queued' && !marked.call_sid) {
      // Not dialed yet (or the dial is in flight: the dial job sees the request and hangs up at once).
      if (!marked.dial_attempted_at) {
        const done = await this.finaliser.finalise(callId, { endReason: 'canceled' });
        if (done) return this.shown(done);
      }
      return this.get(workspaceId, callId);
    }
    await this.hangupAtCarrier(marked);
    return this.get(workspaceId, callId);
  }

  /** Tells the carrier to end the call; a carrier failure is 502 (the call is left as it is). */
  async hangupAtCarrier(row: CallRow): Promise<void> {
    if (!row.call_sid) return;
    const agent = await this.agents.findForRuntime(row.workspace_id, carrierAgentId(row));
    let credentials: CarrierCredentials;
    try {
      if (!agent) throw new MissingCredentialsError('the agent is gone');
      credentials = this.carriers.credentialsOf(agent, row.provider);
    } catch (err) {
      if (!(err instanceof MissingCredentialsError)) throw err;
      throw badGateway('carrier_error', 'The call cannot be hung up: its agent or provider configuration is gone.');
    }
    try {
      await this.carriers.get(row.provider).rest.hangup(credentials, row.call_sid, { answered: Boolean(row.answered_at) });
    } catch (err) {
      if (err instanceof CarrierError) {
        this.log.warn({ callId: row.id, kind: err.kind, detail: err.detail }, 'carrier refused the hang-up');
        throw badGateway(err.kind === 'auth' ? 'carrier_auth_failed' : 'carrier_error', `The carrier did not hang up the call: ${err.message}`);
      }
      throw err;
    }
  }

  /**
   * An inbound call the carrier announced to an agent's number: checks billing and a slot (false: the
   * carrier is to reject it as busy), then records it `ringing` with a stream token.
   */
  async createInbound(
    numberAgent: RuntimeAgent,
    input: { provider: Provider; callSid: string; from: string; to: string },
  ): Promise<{ row: CallRow; streamToken: string } | null> {
    const workspace = await this.admission.workspace(numberAgent.workspaceId);
    if (!workspace) return null;
    const refusal = await this.admission.refusal(workspace, Math.max(1, this.opts.centsPerMinute));
    if (refusal) {
      this.log.info({ agentId: numberAgent.id, refusal }, 'inbound call refused by billing');
      return null;
    }
    const callId = newId('call');
    const setup: SetupDecision = this.inboundSetup
      ? await this.inboundSetup.decide(numberAgent, { callId, provider: input.provider, from: input.from, to: input.to })
      : { refused: false, agent: numberAgent, variables: {}, outcome: null };
    if (setup.refused) {
      this.log.info({ agentId: numberAgent.id, callId }, 'inbound call refused by its setup');
      return null;
    }
    const agent = setup.agent;
    const refused = await this.admit(callId, workspace);
    if (refused !== undefined) {
      this.log.info({ agentId: agent.id, refusal: refused?.code ?? 'concurrency_limit_reached' }, 'inbound call refused: no reservation or concurrency slot');
      return null;
    }
    const streamToken = newStreamToken();
    const filled = new CallTexts(agent).filled(setup.variables, setup.firstMessage);
    try {
      const row = await this.store.knex.transaction(async (trx) => {
        const deadline = new Date(this.clock.now().getTime() + this.timing.orphanAfterMs);
        const created = await this.store.insert(
          {
            id: callId,
            workspace_id: workspace.id,
            agent_id: agent.id,
            batch_id: null,
            direction: 'inbound',
            provider: input.provider,
            from_number: input.from,
            to_number: input.to,
            status: 'ringing',
            call_sid: input.callSid,
            first_message: filled.first_message,
            variables: setup.variables,
            webhook_url: null,
            instruction: filled.instruction,
            analysis: agent.analysis,
            analysis_model: agent.analysisModel,
            agent_version: agent.version,
            redaction: agent.redaction,
            conversation: agent.conversation,
            recording_enabled: agent.recordingEnabled,
            stream_token_hash: sha256Hex(streamToken),
            deadline_at: deadline,
            number_agent_id: agent.id === numberAgent.id ? null : numberAgent.id,
            inbound_setup: setup.outcome,
          },
          trx,
        );
        await this.jobs.add(DEADLINE_JOB, { call_id: callId }, { runAt: deadline }, trx);
        return created;
      });
      this.log.info({ callId, agentId: agent.id, provider: input.provider }, 'inbound call answered');
      return { row, streamToken };
    } catch (err) {
      await this.admission.slots.releaseUnused(callId).catch(() => undefined);
      throw err;
    }
  }
}
