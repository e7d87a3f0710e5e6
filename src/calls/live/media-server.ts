/**
 * The carriers' media stream endpoints `/telephony/provider_a/media` and `/telephony/provider_b/media`
 * (ws in noServer mode, routed by src/http/upgrades.ts). A stream must identify its call in its
 * `start` message within CALL_STREAM_START_TIMEOUT_MS: the call id and the single-use stream token we
 * gave the carrier (TwiML `<Parameter>`s, or `client_state`), for a live call of that provider with the
 * same carrier call id, whose media has not started (one stream per call: a second stream is refused,
 * the first never replaced). Anything else is closed with 1008 before any audio is taken. An accepted
 * stream becomes a CallBridge; the instance's bridges renew their calls' deadlines while they run.
 * From its claim on, the stream's connection no longer counts against its address's connection cap
 * (a carrier's media server carries many calls). A carrier whose media is in-process (SIP's RTP)
 * hands its streams over as MediaSockets in its own dialect; they are taken the same way.
 */
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import type { UpgradeRoute } from '../../http/upgrades.js';
import { exemptFromAddressCap } from '../../http/connection-limits.js';
import { sha256Hex } from '../../lib/tokens.js';
import type { RuntimeAgent } from '../../agents/service.js';
import type { ReservationTerms, ReservationWatch, WorkspaceAdmission } from '../../workspaces/admission.js';
import type { CallRow } from '../store.js';
import { CallBridge, type CallBridgeDeps, type CallBridgeOptions } from './bridge.js';
import { ProgressSaves } from '../../conversation/progress-saves.js';
import type { Carriers, CarrierPlugin, MediaSocket, Provider } from '../../carriers/index.js';
import type { CallSignals } from './signals.js';
/** Largest frame a carrier sends (20 ms frames are a few hundred bytes). */
const MAX_FRAME_BYTES = 64 * 1024;

/** Frames held between a stream's `start` and its bridge (2 s of 20 ms frames; the lookup takes milliseconds). */
const EARLY_FRAMES = 100;

export interface MediaServerDeps extends Omit<CallBridgeDeps, 'carrier' | 'credentials' | 'log' | 'progress'> {
  carriers: Carriers;
  agents: { findForRuntime(workspaceId: string, agentId: string, version?: number | null): Promise<RuntimeAgent | null> };
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
  /** A call's progress is saved within this long of a change (CALL_PROGRESS_SAVE_MS). */
  progressSaveMs: number;
}

export class MediaServer {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false });
  private readonly bridges = new Map<string, CallBridge>();
  private heartbeat: NodeJS.Timeout | undefined;
  private closing = false;
  /** Streams between their upgrade and their bridge (waiting for `start`, claiming the call). */
  private readonly accepting = new Set<Promise<void>>();
  /** The progress saves of every call bridged here. */
  private readonly progress: ProgressSaves;

  constructor(
    private readonly deps: MediaServerDeps,
    private readonly opts: MediaServerOptions,
    private readonly log: Logger,
  ) {
    this.progress = new ProgressSaves((saves) => deps.store.saveProgress(saves), opts.progressSaveMs, log);
  }

  get routes(): UpgradeRoute[] {
    return this.deps.carriers
      .list()
      .filter((plugin) => plugin.media.kind === 'websocket')
      .map((plugin) => ({
        path: new RegExp(`^/telephony/${plugin.provider}/media$`),
        handle: (req, socket, head) => {
          if (this.closing) {
            socket.destroy();
            return;
          }
          this.wss.handleUpgrade(req, socket, head, (ws) => this.take(ws, plugin, () => exemptFromAddressCap(socket)));
        },
      }));
  }

  private take(ws: MediaSocket, plugin: CarrierPlugin, authenticated: () => void): void {
    const accepting = this.accept(ws, plugin, authenticated)
      .catch((err) => {
        // The call is not lost: its deadline ends it if the stream cannot be taken now.
        this.log.error({ err, provider: plugin.provider }, 'media stream could not be accepted');
        if (ws.readyState === ws.OPEN) ws.close(1011);
      })
      .finally(() => this.accepting.delete(accepting));
    this.accepting.add(accepting);
  }

  /** Live calls on this instance. */
  get size(): number {
    return this.bridges.size;
  }

  start(): void {
    // A carrier's own in-process streams (SIP's RTP) are taken as a WebSocket stream is, after its upgrade.
    for (const plugin of this.deps.carriers.list()) {
      const media = plugin.media;
      if (media.kind !== 'in_process') continue;
      media.onStream((socket) => {
        if (this.closing) socket.close(1001);
        else this.take(socket, plugin, () => undefined);
      });
    }
    this.heartbeat = setInterval(() => {
      void this.deps.store
        .renewDeadlines([...this.bridges.keys()], this.opts.orphanAfterMs)
        .catch((err) => this.log.warn({ err }, 'call deadline renewal failed'));
    }, this.opts.heartbeatMs);
    this.heartbeat.unref();
  }

  /** `authenticated`: the stream's token was good (its connection stops counting as a browser's). */
  private async accept(ws: MediaSocket, plugin: CarrierPlugin, authenticated: () => void): Promise<void> {
    const { provider } = plugin;
    const dialect = plugin.media.dialect;
    ws.on('error', (err) => this.log.debug({ err: err.message }, 'media socket error'));
    const log = this.log.child({ provider });
    // Frames after `start` while the call is looked up: held for its bridge, so no caller audio (nor
    // any moment of a recording) is lost to the lookup.
    const early: Buffer[] = [];
    const hold = (data: Buffer, isBinary: boolean) => {
      if (!isBinary && early.length < EARLY_FRAMES) early.push(data);
    };
    // Frames until `start`; audio before it is not taken.
    const start = await new Promise<{ streamId: string; callSid: string; callId: string | null; streamToken: string | null } | null>((resolve) => {
      const timer = setTimeout(() => resolve(null), this.opts.startTimeoutMs);
      const onMessage = (data: Buffer, isBinary: boolean) => {
        if (isBinary) return;
        const e = dialect.parse(data.toString());
        if (e?.kind !== 'start') return;
        clearTimeout(timer);
        ws.off('message', onMessage);
        ws.on('message', hold);
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
    authenticated();
    const agent = await this.conversationAgent(call);
    if (!agent) {
      log.warn({ callId: call.id }, 'media stream refused: the call agent is gone');
      ws.close(1008, 'Agent unavailable');
      await this.endUnbridged(call, plugin, null, 'service_error');
      return;
    }
    // The socket closed while the call was being looked up (the carrier ended the call: a hang-up
    // asked while it was being answered): no bridge is started for it, and it ends now rather than at
    // its deadline. (At the drain deadline the bridge is started and ended with `shutdown`.)
    if (ws.readyState !== ws.OPEN) {
      log.info({ callId: call.id }, 'media stream closed before its bridge started; ending the call');
      await this.endUnbridged(call, plugin, agent, null);
      return;
    }
    // Asked to hang up while it was being dialed, and answered before the carrier took it (a stream
    // given when dialing, provider_b's): no conversation starts.
    if (call.hangup_requested_at) {
      log.info({ callId: call.id }, 'media stream of a call asked to hang up; ending the call');
      ws.close(1000);
      await this.endUnbridged(call, plugin, agent, null);
      return;
    }
    const bridge = new CallBridge(
      ws,
      dialect,
      start.streamId,
      call,
      agent,
      {
        ...this.deps,
        carrier: plugin.rest,
        credentials: (accounts) => this.deps.carriers.credentialsOf(accounts, provider),
        progress: this.progress,
        log,
      },
      this.opts,
      log.child({ callId: call.id }),
    );
    // Frames go to the bridge from now on (it holds caller audio until the voice session is open).
    ws.off('message', hold);
    for (const frame of early.splice(0)) bridge.handleMessage(frame, process.hrtime.bigint());
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (!isBinary) bridge.handleMessage(data, process.hrtime.bigint());
    });
    // An in-process stream (SIP's RTP) hands its caller audio over as it is, not as frames to parse.
    ws.onCallerAudio?.((ulaw) => bridge.handleCallerAudio(ulaw, process.hrtime.bigint()));
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
    // Taken after the drain deadline passed (drain() waits for such streams, at most its grace).
    if (this.closing) bridge.endForShutdown();
    // An answering-machine result that arrived before this bridge took its signals is on the row.
    const now = await this.deps.store.get(call.id);
    if (now?.answered_by === 'machine')
      bridge.onSignal({ callId: call.id, kind: 'amd', answeredBy: 'machine', greetingEnded: plugin.machineResultAfterGreeting });
  }

  /**
   * A call whose stream was claimed but never bridged: its media has ended, so it is hung up at the
   * carrier (when its accounts are known; a call already over there is no error) and finalised now. A
   * carrier's report of its end meanwhile found its media live and waited for a bridge that never came.
   */
  private async endUnbridged(call: CallRow, plugin: CarrierPlugin, agent: RuntimeAgent | null, hint: 'service_error' | null): Promise<void> {
    if (agent && call.call_sid) {
      try {
        await plugin.rest.hangup(this.deps.carriers.credentialsOf(agent, plugin.provider), call.call_sid, { answered: true });
      } catch (err) {
        this.log.warn({ callId: call.id, err: (err as Error).message }, 'hang-up of an unbridged call failed');
      }
    }
    const endedAt = this.deps.clock.now();
    await this.deps.store.update(call.id, { media_ended_at: endedAt, ...(hint ? { end_reason_hint: hint } : {}) });
    await this.deps.finaliser.finalise(call.id, { endedAt });
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
    // The version the call was created with: a publish since does not change a live conversation.
    const agent = await this.deps.agents.findForRuntime(call.workspace_id, call.agent_id, call.agent_version);
    if (!agent || !call.number_agent_id) return agent;
    const numberAgent = await this.deps.agents.findForRuntime(call.workspace_id, call.number_agent_id);
    return numberAgent ? { ...agent, carrierAccounts: numberAgent.carrierAccounts, sip: numberAgent.sip } : null;
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
   * Shutdown. Until `deadline`: live calls run on to their end, and streams of calls already placed
   * are still taken (the call was dialed and answered; refusing its stream would drop it). At the
   * deadline: new streams are refused and the calls left are hung up with `end_reason` `shutdown`
   * (recorded, billed and reported as usual), waited for at most shutdownGraceMs.
   */
  async drain(deadline: Promise<void>): Promise<void> {
    let due = false;
    void deadline.then(() => (due = true));
    const live = () => [...this.accepting, ...[...this.bridges.values()].map((b) => b.done)];
    while (live().length && !due) await Promise.race([Promise.allSettled(live()), deadline]);
    this.closing = true;
    const grace = new Promise<void>((r) => setTimeout(r, this.opts.shutdownGraceMs).unref());
    // Streams being taken at the deadline become bridges first, so that they are ended like the others.
    await Promise.race([Promise.allSettled([...this.accepting]), grace]);
    const left = [...this.bridges.values()];
    if (left.length) this.log.warn({ calls: left.length }, 'drain deadline: ending live calls');
    for (const b of left) b.endForShutdown();
    await Promise.race([Promise.allSettled(left.map((b) => b.done)), grace]);
    clearInterval(this.heartbeat);
    this.progress.stop();
    for (const ws of this.wss.clients) ws.terminate();
    this.wss.close();
  }
}
