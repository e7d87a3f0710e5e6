/**
 * The rules of realtime sessions, without Koa or ws: session creation in the spec's check order, and
 * admission of a WebSocket connection in the order 4001 -> 4402 -> 4028 -> 4003 -> 4029 -> 4022/1011
 * (4022: the voice service refused the agent's model, a session that is recorded as such), and the
 * session's reservation of credit and plan minutes while it runs.
 */
import type { Logger } from 'pino';
import { ApiError, forbidden, notFound, otherWorkspace, paymentRequired, tooManyRequests, withParam } from '../errors/api-error.js';
import type { Clock } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import { agentNotFound, type RuntimeAgent, type RuntimeMiss } from '../agents/service.js';
import { VoiceModelRefusedError, type VoiceService, type VoiceSession } from '../voice/types.js';
import type { ReservationTerms, ReservationWatch, WorkspaceAdmission } from '../workspaces/admission.js';
import type { ConversationTools } from '../conversation/engine.js';
import { fillPlaceholders, filledFieldCaps } from '../contract/placeholders.js';
import { applySettings, effectiveSettings, type ConversationSettings, type ConversationSettingsInput } from '../voice/conversation-settings.js';
import type { CreationWindow, EndReason, RealtimeStore, Source, TokenRow } from './store.js';
import { hashSessionToken, newSessionToken, sessionWsUrl, TOKEN_PATTERN } from './tokens.js';
import type { SessionInfo } from './bridge.js';

/** AgentService as realtime uses it. */
export interface RuntimeAgents {
  /** The version to run (omitted: the published one, read fresh), or why there is none. */
  runtimeOf(workspaceId: string, agentId: string, version?: number | null): Promise<RuntimeAgent | RuntimeMiss>;
  /** A session's agent at the version its token was made for; null when the agent or version is gone. */
  findForRuntime(workspaceId: string, agentId: string, version?: number | null): Promise<RuntimeAgent | null>;
}

export interface RealtimeOptions {
  /** PUBLIC_BASE_URL, or the address the server listens on when that is unset. */
  publicBaseUrl: () => string;
  tokenTtlMs: number;
  windows: CreationWindow[];
  /** Price of a minute of a voice, camera or screen session, and of a text session. */
  centsPerMinute: number;
  textCentsPerMinute: number;
}

const AGENT_ID = /^agt_[0-9A-Z]{26}$/;

/** A version number as the contract takes it (`agent_version`: an integer from 1 to 2147483647). */
const isVersion = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 2147483647;

/** Whether a version of the agent lets sessions carry `source` (voice and text always). */
const allows = (agent: RuntimeAgent, source: unknown) =>
  source === 'camera' ? agent.realtime.enableWebcam : source === 'screen' ? agent.realtime.enableScreenShare : true;

export const CLOSE = {
  invalidToken: { code: 4001, reason: 'Invalid authentication token' },
  serviceUnavailable: { code: 4402, reason: 'Service unavailable' },
  planLimit: { code: 4028, reason: 'Plan limit' },
  insufficientCredits: { code: 4028, reason: 'Insufficient credits' },
  cameraDisabled: { code: 4003, reason: 'Camera is not enabled for this agent' },
  screenDisabled: { code: 4003, reason: 'Screen sharing is not enabled for this agent' },
  tooManySessions: { code: 4029, reason: 'Too many concurrent sessions for your plan' },
  modelRefused: { code: 4022, reason: 'Model refused' },
  startFailed: { code: 1011, reason: '' },
} as const;

export type Refusal = (typeof CLOSE)[keyof typeof CLOSE];

export interface Admission {
  sessionId: string;
  token: TokenRow;
  agent: RuntimeAgent;
  voice: VoiceSession;
  startedAt: Date;
  variables: Record<string, string>;
  instruction: string;
  /** The first message as the agent says it (placeholders filled); null when there is none. */
  firstMessage: string | null;
  /** Metering minutes the session's reservation holds from `startedAt`. */
  minutes: number;
  /** What the session runs with: the agent's conversation settings with the session's override. */
  conversation: ConversationSettings;
}

/**
 * An admitted session whose agent's live model the voice service refused at setup: it holds its slot
 * and reservation until its record (`failed`, `model_refused`, nothing said) is written, then closes
 * with 4022.
 */
export interface ModelRefused {
  refusal: typeof CLOSE.modelRefused;
  info: SessionInfo;
  instruction: string;
}

export class RealtimeService {
  constructor(
    private readonly store: RealtimeStore,
    private readonly agents: RuntimeAgents,
    private readonly voice: VoiceService,
    private readonly tools: ConversationTools | null,
    private readonly admission: WorkspaceAdmission,
    private readonly clock: Clock,
    private readonly opts: RealtimeOptions,
    private readonly log: Logger,
  ) {}

  /**
   * POST /api/v1/realtime/sessions after authentication. `validateBody` raises the body's problems
   * (unreadable body, wrong media type, schema errors) and runs at step 5.
   */
  async createSession(
    workspaceId: string,
    body: unknown,
    validateBody: (body: unknown) => void,
    mintedBy: string | null = null,
  ): Promise<{ session_token: string; ws_url: string; agent_version: number }> {
    // 2. Billing.
    const workspace = await this.admission.workspace(workspaceId);
    if (!workspace) throw new ApiError(401, 'authentication_error', 'unauthorized', 'The workspace of this API key no longer exists.');
    if (this.admission.isBlocked(workspace)) {
      throw paymentRequired('subscription_inactive', `The workspace subscription is ${workspace.subscription_status}; update billing to start sessions.`);
    }
    // 3-4. Source enabled in the version the session is to run, agent (then version) exists here; read
    // from the body before it is validated.
    const b = body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
    let agent: RuntimeAgent | null = null;
    if (typeof b.agent_id === 'string') {
      // An id that is not well formed names no agent, and is never sent to the database (it may hold anything, NUL included).
      if (!AGENT_ID.test(b.agent_id)) throw agentNotFound(b.agent_id.slice(0, 64));
      // A version that is not a version number is refused at step 5; the agent is still checked here.
      const named = b.agent_version === undefined ? undefined : isVersion(b.agent_version) ? b.agent_version : null;
      const found = await this.agents.runtimeOf(workspaceId, b.agent_id, named);
      if (found === 'not_found') throw agentNotFound(b.agent_id);
      if (found === 'other_workspace') throw withParam(otherWorkspace('agent'), 'agent_id');
      if (found === 'version_not_found') {
        throw notFound('agent_version_not_found', `Agent ${b.agent_id} has no version ${String(named)}.`, 'agent_version');
      }
      // The source is checked against the version the session is to run (not for a malformed one), and
      // against a version published after it (see sourceAllowed); an unnamed version is the published one.
      if (named !== null && (b.source === 'camera' || b.source === 'screen')) {
        const allowed = named === undefined ? allows(found, b.source) : await this.sourceAllowed(workspaceId, found, b.source);
        if (!allowed && b.source === 'camera') throw forbidden('webcam_disabled', 'Camera sessions are not enabled for this agent.', 'source');
        if (!allowed) throw forbidden('screen_share_disabled', 'Screen sharing is not enabled for this agent.', 'source');
      }
      agent = found;
    }
    // 5. Body.
    validateBody(body);
    const input = body as { agent_id: string; user_id: string; source: Source; conversation?: ConversationSettingsInput | null };
    // A valid body has a well-formed agent_id, so step 4 found the agent and the version it runs.
    if (!agent) throw new Error('createSession: a valid body without the agent of step 4');
    // 422 for an override the contract cannot refuse (the agent's own settings do not matter to it).
    applySettings(null, input.conversation);
    // 6. Rate limit, counted by the token it issues.
    const token = newSessionToken();
    const now = this.clock.now();
    const result = await this.store.issueToken(
      {
        token_hash: hashSessionToken(token),
        minted_by: mintedBy,
        workspace_id: workspaceId,
        agent_id: input.agent_id,
        agent_version: agent.version,
        user_id: input.user_id,
        source: input.source,
        expires_at: new Date(now.getTime() + this.opts.tokenTtlMs),
        created_at: now,
        conversation: input.conversation ?? null,
      },
      this.opts.windows,
    );
    if (!result.issued) {
      const seconds = Math.ceil(result.retryAfterMs / 1000);
      throw tooManyRequests(
        seconds,
        `Too many realtime sessions for this workspace (${this.opts.windows.map((w) => `${w.limit} per ${Math.round(w.windowMs / 1000)} s`).join(', ')}); retry after ${seconds} seconds.`,
      );
    }
    this.log.info({ workspaceId, agentId: input.agent_id, agentVersion: agent.version, source: input.source }, 'realtime session token issued');
    return { session_token: token, ws_url: sessionWsUrl(this.opts.publicBaseUrl(), input.user_id, token), agent_version: agent.version };
  }

  /** Runs every connection check in order; on success the session holds a slot and a voice session. */
  async admit(token: string | null, pathUserId: string): Promise<Admission | ModelRefused | Refusal> {
    // 4001: the token (redeemed by this attempt whatever follows), its user_id, its agent.
    if (!token || !TOKEN_PATTERN.test(token)) return CLOSE.invalidToken;
    const now = this.clock.now();
    const row = await this.store.redeemToken(hashSessionToken(token), now);
    if (!row || row.expires_at.getTime() <= now.getTime() || row.user_id !== pathUserId) return CLOSE.invalidToken;
    // The version the token was made for, whatever was published since (null: a token from before tokens kept it).
    const agent = await this.agents.findForRuntime(row.workspace_id, row.agent_id, row.agent_version);
    if (!agent) return CLOSE.invalidToken;
    const workspace = await this.admission.workspace(row.workspace_id);
    if (!workspace) return CLOSE.invalidToken;
    // 4402, then 4028 (plan minutes, then credit; text sessions need no credit)
    const refusal = await this.admission.refusal(workspace, row.source === 'text' ? 0 : Math.max(1, this.opts.centsPerMinute));
    if (refusal === 'subscription_inactive') return CLOSE.serviceUnavailable;
    if (refusal === 'plan_limit') return CLOSE.planLimit;
    if (refusal === 'insufficient_credit') return CLOSE.insufficientCredits;
    // 4003: the source turned off in the session's version, or since the token was made (sourceAllowed).
    if ((row.source === 'camera' || row.source === 'screen') && !(await this.sourceAllowed(workspace.id, agent, row.source))) {
      return row.source === 'camera' ? CLOSE.cameraDisabled : CLOSE.screenDisabled;
    }
    // 4029, with the session's reservation of credit and plan minutes: 4028 when what is left is held by
    // the workspace's other live conversations (decided here, in the slot's transaction).
    const sessionId = newId('conversation');
    const ask = this.admission.ask(workspace.plan, this.reservationTerms(row.source));
    const admitted = await this.admission.slots.admit(sessionId, workspace.id, workspace.concurrent_session_limit, ask);
    if (admitted === 'plan_limit') return CLOSE.planLimit;
    if (admitted === 'insufficient_credit') return CLOSE.insufficientCredits;
    if (admitted === 'concurrency') return CLOSE.tooManySessions;
    // 1011
    const variables = agent.variablePlaceholders ?? {};
    const caps = filledFieldCaps();
    const instruction = fillPlaceholders(agent.instruction, variables, caps.instruction);
    const firstMessage = (agent.firstMessage && fillPlaceholders(agent.firstMessage, variables, caps.first_message)) || null;
    const conversation = effectiveSettings(agent.conversation, row.conversation);
    try {
      const tools = this.tools ? await this.tools.declarations({ workspaceId: workspace.id, agentId: agent.id, links: agent.links }) : [];
      const voice = await this.voice.open({
        instruction,
        firstMessage,
        model: agent.model,
        voiceId: agent.voiceId,
        language: agent.language,
        languageCode: agent.languageCode,
        tools,
        canEndConversation: agent.canEndConversation && row.source !== 'text',
        source: row.source,
        conversation,
      });
      return {
        sessionId,
        token: row,
        agent,
        voice,
        startedAt: this.clock.now(),
        variables,
        instruction,
        firstMessage,
        minutes: admitted.minutes,
        conversation,
      };
    } catch (err) {
      if (err instanceof VoiceModelRefusedError) {
        this.log.warn({ err: err.message, sessionId, workspaceId: workspace.id, model: agent.model }, "the voice service refused the agent's model");
        const info: SessionInfo = {
          id: sessionId,
          workspaceId: workspace.id,
          agentId: agent.id,
          links: agent.links,
          agentVersion: agent.version,
          userId: row.user_id,
          source: row.source,
          startedAt: this.clock.now(),
          firstMessage,
          variables,
          analysis: agent.analysis,
          analysisModel: agent.analysisModel,
          recording: false,
          redaction: agent.redaction,
        };
        return { refusal: CLOSE.modelRefused, info, instruction };
      }
      this.log.warn({ err, sessionId, workspaceId: workspace.id }, 'voice session could not start');
      await this.discard(sessionId);
      return CLOSE.startFailed;
    }
  }

  /**
   * Whether a session of `agent` (the version it runs) may carry `source`: that version allows it, and
   * no version published after it has turned it off. Turning a source off takes effect at once (the
   * spec's 4003: the setting turned off after the session was created), for sessions pinned to older
   * versions too; a draft newer than the published version keeps its own setting (it can be tried out
   * before it is published). The published version is read fresh, as for a new conversation.
   */
  private async sourceAllowed(workspaceId: string, agent: RuntimeAgent, source: 'camera' | 'screen'): Promise<boolean> {
    if (!allows(agent, source)) return false;
    const published = await this.agents.runtimeOf(workspaceId, agent.id);
    // Gone since: the agent's own checks decide (a deleted agent never reaches this point at admission).
    if (typeof published === 'string') return true;
    return published.version <= agent.version || allows(published, source);
  }

  /** What a session reserves: a slice at its kind's price, renewed by the slot heartbeat. */
  private reservationTerms(source: Source): ReservationTerms {
    return {
      kind: 'web_session',
      centsPerMinute: source === 'text' ? this.opts.textCentsPerMinute : this.opts.centsPerMinute,
      expiryMs: this.admission.slots.reservationExpiryMs,
    };
  }

  /**
   * The admitted session's reservation, extended while it runs; when it runs out and cannot be, the
   * session is closed with 4028 (`Insufficient credits` or `Plan limit`, as at admission).
   */
  watchReservation(a: Admission, close: (refusal: Refusal, endReason: EndReason) => void): ReservationWatch {
    return this.admission.watch(
      {
        ...this.reservationTerms(a.token.source),
        id: a.sessionId,
        workspaceId: a.token.workspace_id,
        startedAt: a.startedAt,
        minutes: a.minutes,
        onExhausted: (reason) => {
          if (reason === 'plan_limit') close(CLOSE.planLimit, 'plan_limit_reached');
          else if (reason === 'insufficient_credit') close(CLOSE.insufficientCredits, 'insufficient_credit');
          else close(CLOSE.startFailed, 'service_error');
        },
      },
      this.log.child({ sessionId: a.sessionId }),
    );
  }

  /** An admitted session that never ran: its slot and reservation go back. */
  async discard(sessionId: string): Promise<void> {
    await this.admission.slots.settled(sessionId, { releaseReservation: true });
  }

  /** An attempt refused before admission (per-address limit, shutdown) still uses the token it names. */
  async spend(token: string | null): Promise<void> {
    if (token && TOKEN_PATTERN.test(token)) await this.store.redeemToken(hashSessionToken(token), this.clock.now());
  }

  /** The session closed: its slot goes back at once (its reservation when it is billed: `settled`). */
  async release(sessionId: string): Promise<void> {
    await this.admission.slots.release(sessionId);
  }

  /** The session was billed (or another instance billed it): its reservation is no longer renewed here. */
  async settled(sessionId: string): Promise<void> {
    await this.admission.slots.settled(sessionId);
  }

  /** Tokens older than every creation window count for nothing. */
  async prune(): Promise<void> {
    const longest = Math.max(...this.opts.windows.map((w) => w.windowMs), this.opts.tokenTtlMs);
    await this.store.pruneTokens(new Date(this.clock.now().getTime() - longest));
  }
}
