/**
 * The carriers' media stream endpoints `/telephony/provider_a/media` and `/telephony/provider_b/media`
 * (ws in noServer mode, routed by src/http/upgrades.ts). A stream must identify its call in its
 * `start` message within CALL_STREAM_START_TIMEOUT_MS: the call id and the single-use stream token we
 * gave the carrier (TwiML `<Parameter>`s, or `client_state`), for a live call of that provider with the
 * same carrier call id, whose media has not started (one stream per call: a second stream is refused,
 * the first never replaced). Anything else is closed with 1008 before any audio is taken. An accepted
 * stream becomes a CallBridge; the instance's bridges renew their calls' deadlines while they run.
 */
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import type { UpgradeRoute } from '../../http/upgrades.js';
import { sha256Hex } from '../../lib/tokens.js';
import type { RuntimeAgent } from '../../agents/service.js';
import type { ReservationTerms, ReservationWatch, WorkspaceAdmission } from '../../workspaces/admission.js';
import type { CallRow } from '../store.js';
import { CallBridge, type CallBridgeDeps, type CallBridgeOptions } from './bridge.js';
import type { Carrier, Provider } from '../../carriers/carrier.js';
import type { MediaDialect } from '../../carriers/media.js';
import { providerAMedia } from '../../carriers/provider-a/media.js';
import { providerBMedia } from '../../carriers/provider-b/media.js';
import type { CallSignals } from './signals.js';

const DIALECTS: Record<Provider, MediaDialect> = { provider_a: providerAMedia, provider_b: providerBMedia };
/** Largest frame a carrier sends (20 ms frames are a few hundred bytes). */
const MAX_FRAME_BYTES = 64 * 1024;

export interface MediaServerDeps extends Omit<CallBridgeDeps, 'carrier' | 'log'> {
  carriers: Record<Provider, Carrier>;
  agents: { findForRuntime(workspaceId: string, agentId: string): Promise<RuntimeAgent | null> };
  admission: WorkspaceAdmission;
  signals: CallSignals;
}

export interface MediaServerOptions extends CallBridgeOptions {
  /** What a call reserves (CallService.reservationTerms), for its extensions. */
  reservation: ReservationTerms;
  startTimeoutMs: number;
  instanceId: string;
  heartbeatMs: number;
  orphanAfterMs: number;
  shutdownGraceMs: number;
}

export class MediaServer {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false });
  private readonly bridges = new Map<string, CallBridge>();
  private heartbeat: NodeJS.Timeout | undefined;
  private closing = false;

  constructor(
    private readonly deps: MediaServerDeps,
    private readonly opts: MediaServerOptions,
    private readonly log: Logger,
  ) {}

  get routes(): UpgradeRoute[] {
    return (['provider_a', 'provider_b'] as const).map((provider) => ({
      path: new RegExp(`^/telephony/${provider}/media$`),
      handle: (req, socket, head) => {
        if (this.closing) {
          socket.destroy();
          return;
        }
        this.wss.handleUpgrade(req, socket, head, (ws) => {
          this.accept(ws, provider).catch((err) => {
            // The call is not lost: its deadline ends it if the stream cannot be taken now.
            this.log.error({ err, provider }, 'media stream could not be accepted');
            if (ws.readyState === ws.OPEN) ws.close(1011);
          });
        });
      },
    }));
  }

  /** Live calls on this instance. */
  get size(): number {
    return this.bridges.size;
  }

  start(): void {
    this.heartbeat = setInterval(() => {
      void this.deps.store
        .renewDeadlines([...this.bridges.keys()], this.opts.orphanAfterMs)
        .catch((err) => this.log.warn({ err }, 'call deadline renewal failed'));
    }, this.opts.heartbeatMs);
    this.heartbeat.unref();
  }

  private async accept(ws: WebSocket, provider: Provider): Promise<void> {
    const dialect = DIALECTS[provider];
    ws.on('error', (err) => this.log.debug({ err: err.message }, 'media socket error'));
    const log = this.log.child({ provider });
    // Frames until `start`; audio before it is not taken.
    const start = await new Promise<{ streamId: string; callSid: string; callId: string | null; streamToken: string | null } | null>((resolve) => {
      const timer = setTimeout(() => resolve(null), this.opts.startTimeoutMs);
      const onMessage = (data: Buffer, isBinary: boolean) => {
        if (isBinary) return;
        const e = dialect.parse(data.toString());
        if (e?.kind !== 'start') return;
        clearTimeout(timer);
        ws.off('message', onMessage);
        resolve(e);
      };
      ws.on('message', onMessage);
      ws.once('close', () => {
        clearTimeout(timer);
        resolve(null);
      });
    });
    if (!start) {
      if (ws.readyState === ws.OPEN) ws.close(1008, 'No start message');
      return;
    }
    // One stream per call: a call this instance already streams is refused without asking the
    // database (whose claim refuses it anyway, on any instance), with the same answer as a bad token.
    const call =
      start.callId && start.streamToken && !this.bridges.has(start.callId)
        ? await this.claim(provider, start.callId, start.streamToken, start.callSid)
        : undefined;
    if (!call) {
      log.warn({ callSid: start.callSid }, 'media stream refused: no live call matches its start message');
      ws.close(1008, 'Unknown or expired stream');
      return;
    }
    const agent = await this.conversationAgent(call);
    if (!agent) {
      log.warn({ callId: call.id }, 'media stream refused: the call agent is gone');
      ws.close(1008, 'Agent unavailable');
      return;
    }
    // The socket closed (or shutdown began) while the call was being looked up: no bridge is started
    // for it; the call's deadline ends it.
    if (this.closing || ws.readyState !== ws.OPEN) {
      if (ws.readyState === ws.OPEN) ws.close(1001, 'Shutting down');
      return;
    }
    const bridge = new CallBridge(
      ws,
      dialect,
      start.streamId,
      call,
      agent,
      { ...this.deps, carrier: this.deps.carriers[provider], log },
      this.opts,
      log.child({ callId: call.id }),
    );
    // Frames go to the bridge from now on (it holds caller audio until the voice session is open).
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (!isBinary) bridge.handleMessage(data.toString(), process.hrtime.bigint());
    });
    // Never replaces a bridge: the claim above let one stream per call through.
    this.bridges.set(call.id, bridge);
    this.deps.signals.register(call.id, (s) => bridge.onSignal(s));
    void bridge.done.finally(() => {
      this.bridges.delete(call.id);
      this.deps.signals.unregister(call.id);
    });
    const reservation = await this.watchReservation(call, bridge, log);
    void bridge.done.finally(() => reservation.stop());
    await bridge.start();
    // An answering-machine result that arrived before this bridge took its signals is on the row.
    const now = await this.deps.store.get(call.id);
    if (now?.answered_by === 'machine') bridge.onSignal({ callId: call.id, kind: 'amd', answeredBy: 'machine', greetingEnded: provider === 'provider_a' });
  }

  /** The call's reservation, extended while it runs from its answer; the call ends when it runs out. */
  private async watchReservation(call: CallRow, bridge: CallBridge, log: Logger): Promise<ReservationWatch> {
    return this.deps.admission.watch(
      {
        ...this.opts.reservation,
        id: call.id,
        workspaceId: call.workspace_id,
        startedAt: new Date(call.answered_at ?? this.deps.clock.now()),
        minutes: await this.deps.admission.reservedMinutes(call.id),
        onExhausted: (reason) =>
          bridge.endForReservation(reason === 'plan_limit' ? 'plan_limit_reached' : reason === 'error' ? 'service_error' : 'insufficient_credit'),
      },
      log,
    );
  }

  /**
   * The agent the conversation runs with; a call its inbound setup handed to another agent keeps the
   * carrier accounts of the agent whose number was called (they sign and place its carrier requests).
   */
  private async conversationAgent(call: CallRow): Promise<RuntimeAgent | null> {
    const agent = await this.deps.agents.findForRuntime(call.workspace_id, call.agent_id);
    if (!agent || !call.number_agent_id) return agent;
    const numberAgent = await this.deps.agents.findForRuntime(call.workspace_id, call.number_agent_id);
    return numberAgent ? { ...agent, providerA: numberAgent.providerA, providerB: numberAgent.providerB } : null;
  }

  private claim(provider: Provider, callId: string, streamToken: string, callSid: string) {
    return this.deps.store.claimStream({
      callId,
      provider,
      tokenHash: sha256Hex(streamToken),
      callSid,
      instanceId: this.opts.instanceId,
      now: this.deps.clock.now(),
      deadlineMs: this.opts.orphanAfterMs,
    });
  }

  /**
   * Shutdown: new streams are refused; live calls get half of shutdownGraceMs to end on their own, then
   * their streams are closed (the calls end and are finalised) within the other half.
   */
  async drain(): Promise<void> {
    this.closing = true;
    const wait = (ms: number, what: Array<Promise<void>>) => Promise.race([Promise.allSettled(what), new Promise((r) => setTimeout(r, ms).unref())]);
    await wait(
      this.opts.shutdownGraceMs / 2,
      [...this.bridges.values()].map((b) => b.done),
    );
    const left = [...this.bridges.values()];
    if (left.length) this.log.warn({ calls: left.length }, 'ending live calls for shutdown');
    for (const b of left) b.close();
    await wait(
      this.opts.shutdownGraceMs / 2,
      left.map((b) => b.done),
    );
    clearInterval(this.heartbeat);
    for (const ws of this.wss.clients) ws.terminate();
    this.wss.close();
  }
}
