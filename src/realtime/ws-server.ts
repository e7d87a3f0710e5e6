/**
 * The realtime WebSocket `/ws/{user_id}?token=...` on the HTTP server's `upgrade` event (ws in noServer
 * mode). Before the upgrade: the per-IP attempt limit (HTTP 429 + Retry-After). After it: admission
 * (RealtimeService.admit; a refusal closes at once with its code and reason, no message before), then a
 * SessionBridge. Frames that arrive during admission are held (up to holdFrames / holdBytes) and
 * handled after `session_started`; frames beyond that are dropped and each answered then with
 * `forward_failed` (an apology `text` in a text session). Dead peers are found by ping/pong (from the
 * moment the socket is accepted, admission included) and terminated, which releases their slot.
 * The upgrade itself is routed by src/http/upgrades.ts. ws unmasks what clients send with the
 * `bufferutil` package (native; without it ws unmasks in JavaScript a byte at a time, 1.4 s of the loop
 * for forty of the largest frames allowed: issue 32's image flood), and reads each socket within its
 * byte budget (read-budget.ts), from the upgrade on.
 */
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { answerUpgrade, type UpgradeRoute } from '../http/upgrades.js';
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import { SessionBridge, type BridgeOptions } from './bridge.js';
import { MAX_FRAME_BYTES } from './frames.js';
import { throttleReads } from './read-budget.js';
import type { BudgetFigures } from '../lib/budget.js';
import type { ConversationTools } from '../conversation/engine.js';
import type { ConversationFinaliser } from './conversation.js';
import type { IpAttemptLimiter } from './rate-limits.js';
import type { RealtimeService, Admission, ModelRefused } from './service.js';
import type { RecordingService } from '../recordings/service.js';

/** Recording web sessions: where, and on which clock (the service's; tests move their own). */
export interface SessionRecording {
  recordings: RecordingService;
  clock: Clock;
}

export const REALTIME_PATH = /^\/ws\/([^/]+)$/;
/** Web sessions are recorded at the rate the browser sends (16 kHz); the agent's 24 kHz is resampled to it. */
const RECORDING_RATE = 16_000;

export interface GatewayOptions extends BridgeOptions {
  pingIntervalMs: number;
  /** Frames held while admission runs: at most this many, of at most this many bytes in all. */
  holdFrames: number;
  holdBytes: number;
  /** How fast the socket is read (read-budget.ts). */
  readBudget: BudgetFigures;
  /** After the drain deadline, drain() waits at most this long for the sessions it closed to be finalised (SHUTDOWN_GRACE_MS). */
  shutdownGraceMs: number;
}

function refuseUpgrade(socket: Duplex, status: string, headers: Record<string, string> = {}): void {
  answerUpgrade(socket, status, { headers });
}

/** Frames received while admission runs. */
interface Held {
  frames: Array<[Buffer, boolean, bigint]>;
  bytes: number;
  /** Frames dropped beyond the cap (everything after the first one that did not fit). */
  dropped: number;
}

export class RealtimeGateway {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false });
  private readonly bridges = new Set<SessionBridge>();
  private readonly alive = new WeakMap<WebSocket, boolean>();
  private readonly inFlight = new Set<Promise<unknown>>();
  private pingTimer: NodeJS.Timeout | undefined;
  private closing = false;

  constructor(
    private readonly service: RealtimeService,
    private readonly finaliser: ConversationFinaliser,
    private readonly ipLimiter: IpAttemptLimiter,
    private readonly clientAddress: (req: http.IncomingMessage) => string,
    private readonly tools: ConversationTools | null,
    private readonly clock: Clock,
    private readonly recording: SessionRecording | null,
    private readonly opts: GatewayOptions,
    private readonly log: Logger,
  ) {}

  /** The `/ws/{user_id}` upgrade route (for routeUpgrades). */
  get route(): UpgradeRoute {
    return {
      path: REALTIME_PATH,
      handle: (req, socket, head, [rawUserId], url) => this.track(this.upgrade(req, socket, head, rawUserId, url.searchParams.get('token'))),
    };
  }

  /** Starts the ping sweep (the upgrade is routed by the caller: see `route`). */
  attach(): void {
    this.pingTimer = setInterval(() => this.pingAll(), this.opts.pingIntervalMs);
    this.pingTimer.unref();
  }

  /** Live sessions on this instance. */
  get size(): number {
    return this.bridges.size;
  }

  /** The spec: any attempt uses the token, a refused one too. */
  private async spendToken(token: string | null): Promise<void> {
    await this.service.spend(token).catch((err) => this.log.warn({ err }, 'could not use up the token of a refused attempt'));
  }

  private track(p: Promise<unknown>): void {
    const tracked = p.catch((err) => this.log.error({ err }, 'realtime session error')).finally(() => this.inFlight.delete(tracked));
    this.inFlight.add(tracked);
  }

  private async upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer, rawUserId: string, token: string | null): Promise<void> {
    if (this.closing) {
      await this.spendToken(token);
      return refuseUpgrade(socket, '503 Service Unavailable');
    }
    const ip = this.clientAddress(req);
    let waitSeconds: number | null;
    try {
      waitSeconds = await this.ipLimiter.attempt(ip);
    } catch (err) {
      this.log.error({ err }, 'connection-attempt limit unavailable');
      return refuseUpgrade(socket, '503 Service Unavailable');
    }
    if (waitSeconds !== null) {
      await this.spendToken(token);
      this.log.info({ ip }, 'realtime connection attempts over the per-IP limit');
      return refuseUpgrade(socket, '429 Too Many Requests', { 'Retry-After': String(waitSeconds) });
    }
    let userId: string;
    try {
      userId = decodeURIComponent(rawUserId);
    } catch {
      userId = rawUserId;
    }
    // ws answers a malformed handshake (no Sec-WebSocket-Key, wrong version...) itself with 400 and
    // never calls back: settle on the socket's close too, or drain() would wait for it forever.
    if (socket.destroyed) return;
    const ws = await new Promise<WebSocket | null>((resolve) => {
      socket.once('close', () => resolve(null));
      this.wss.handleUpgrade(req, socket, head, resolve);
    });
    if (!ws) return;
    throttleReads(ws, socket, this.opts.readBudget);
    await this.connect(ws, userId, token);
  }

  private async connect(ws: WebSocket, userId: string, token: string | null): Promise<void> {
    // Answer pings from the start: admission can outlast two ping intervals (voice-service retries).
    this.alive.set(ws, true);
    ws.on('pong', () => this.alive.set(ws, true));
    const held: Held = { frames: [], bytes: 0, dropped: 0 };
    const hold = (data: Buffer, isBinary: boolean) => {
      if (held.dropped === 0 && held.frames.length < this.opts.holdFrames && held.bytes + data.length <= this.opts.holdBytes) {
        held.frames.push([data, isBinary, process.hrtime.bigint()]);
        held.bytes += data.length;
      } else {
        held.dropped += 1;
      }
    };
    ws.on('message', hold);
    ws.on('error', (err) => this.log.debug({ err }, 'realtime socket error'));
    const result = await this.service.admit(token, userId).catch((err) => {
      this.log.error({ err }, 'realtime admission failed');
      return { code: 1011, reason: '' } as const;
    });
    if ('refusal' in result) {
      await this.endRefused(ws, result);
      return;
    }
    if (!('sessionId' in result)) {
      ws.close(result.code, result.reason);
      return;
    }
    if (ws.readyState !== ws.OPEN || this.closing) {
      // Gone (or shutting down) while admission ran: nothing started, give everything back.
      await result.voice.close().catch(() => undefined);
      await this.service.discard(result.sessionId);
      if (ws.readyState === ws.OPEN) ws.close(1001, 'Server shutting down');
      return;
    }
    this.run(ws, result, held, hold);
  }

  /**
   * The voice service refused the agent's model: the session is recorded (`failed`, `model_refused`,
   * ended as it started, so nothing is billed) and its call.completed sent, then the socket closes
   * with 4022, so a client reading the record after the close finds it.
   */
  private async endRefused(ws: WebSocket, r: ModelRefused): Promise<void> {
    try {
      await this.service.release(r.info.id);
      await this.finaliser.finalise(r.info, r.instruction, {
        status: 'failed',
        endReason: 'model_refused',
        endedAt: r.info.startedAt,
        transcript: [],
        transcriptTruncated: false,
        interruptionCount: 0,
        latenciesMs: [],
        toolCalls: [],
        firstMessageDelivered: false,
      });
    } catch (err) {
      this.log.error({ err, sessionId: r.info.id }, 'the record of a session refused its model could not be written');
    } finally {
      await this.service.settled(r.info.id).catch((err) => this.log.warn({ err }, 'could not settle a refused session'));
      if (ws.readyState === ws.OPEN) ws.close(r.refusal.code, r.refusal.reason);
    }
  }

  private run(ws: WebSocket, a: Admission, held: Held, hold: (d: Buffer, b: boolean) => void): void {
    const log = this.log.child({ sessionId: a.sessionId });
    // The agent's setting as the session starts decides; a text session has no audio to record.
    const recorded = a.agent.recordingEnabled && a.token.source !== 'text';
    const recorder =
      recorded && this.recording
        ? this.recording.recordings.startClockedTwoChannel(
            {
              workspaceId: a.token.workspace_id,
              conversationId: a.sessionId,
              kind: 'web_session',
              sampleRate: RECORDING_RATE,
              redacted: a.agent.redaction?.targets.includes('recordings') ?? false,
            },
            this.recording.clock,
            log,
          )
        : null;
    const bridge = new SessionBridge(
      ws,
      a.voice,
      {
        id: a.sessionId,
        workspaceId: a.token.workspace_id,
        agentId: a.agent.id,
        links: a.agent.links,
        agentVersion: a.agent.version,
        userId: a.token.user_id,
        source: a.token.source,
        startedAt: a.startedAt,
        firstMessage: a.firstMessage,
        variables: a.variables,
        analysis: a.agent.analysis,
        analysisModel: a.agent.analysisModel,
        recording: recorded,
        redaction: a.agent.redaction,
        conversation: a.conversation,
      },
      this.tools,
      this.clock,
      this.opts,
      log,
      recorder,
      this.finaliser.live?.sink(a.token.workspace_id, a.sessionId) ?? null,
    );
    this.bridges.add(bridge);
    this.finaliser.track(bridge.info, a.instruction, (onChange) => bridge.watchProgress(onChange));
    const reservation = this.service.watchReservation(a, (refusal, endReason) => bridge.close(refusal.code, refusal.reason, endReason));
    bridge.start();
    ws.off('message', hold);
    for (const [data, isBinary, at] of held.frames) bridge.handleFrame(data, isBinary, at);
    if (held.dropped)
      this.log.warn(
        { sessionId: a.sessionId, dropped: held.dropped, held: held.frames.length, heldBytes: held.bytes },
        'frames sent during admission beyond the hold limit were dropped',
      );
    for (let i = 0; i < held.dropped; i++) bridge.frameDropped();
    ws.on('message', (data: Buffer, isBinary: boolean) => bridge.handleFrame(data, isBinary, process.hrtime.bigint()));
    this.track(
      bridge.done.then(async (outcome) => {
        reservation.stop();
        this.bridges.delete(bridge);
        await this.service.release(a.sessionId);
        try {
          await this.finaliser.finalise(bridge.info, a.instruction, outcome);
        } finally {
          await this.service.settled(a.sessionId);
        }
      }),
    );
  }

  private pingAll(): void {
    for (const ws of this.wss.clients) {
      if (this.alive.get(ws) === false) {
        ws.terminate();
        continue;
      }
      this.alive.set(ws, false);
      ws.ping();
    }
  }

  /**
   * Shutdown. Until `deadline`: sessions run on to their end, and connections with a token already
   * issued are still taken (the developer's session creation succeeded; the balancer sends this
   * instance no new ones once its readiness answers 503, and new tokens are refused while it drains).
   * At the deadline: new upgrades are refused, live sessions are closed (1001, `end_reason`
   * `shutdown`), and their records and events are waited for, at most shutdownGraceMs (then what is
   * still running is abandoned and logged).
   */
  async drain(deadline: Promise<void>): Promise<void> {
    let due = false;
    void deadline.then(() => (due = true));
    while (this.inFlight.size && !due) await Promise.race([Promise.allSettled([...this.inFlight]), deadline]);
    this.closing = true;
    clearInterval(this.pingTimer);
    if (this.bridges.size) this.log.warn({ sessions: this.bridges.size }, 'drain deadline: ending live sessions');
    for (const bridge of this.bridges) bridge.close(1001, 'Server shutting down', 'shutdown');
    // A peer that does not answer the close handshake promptly is cut.
    const cut = setTimeout(
      () => {
        for (const ws of this.wss.clients) ws.terminate();
      },
      Math.min(1000, this.opts.shutdownGraceMs),
    );
    let timedOut = false;
    const graceOver = new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        timedOut = true;
        resolve();
      }, this.opts.shutdownGraceMs);
      timer.unref();
    });
    while (this.inFlight.size && !timedOut) await Promise.race([Promise.allSettled([...this.inFlight]), graceOver]);
    clearTimeout(cut);
    if (timedOut && this.inFlight.size) {
      this.log.warn({ pending: this.inFlight.size }, 'realtime sessions still finishing after SHUTDOWN_GRACE_MS; not waiting any longer');
      for (const ws of this.wss.clients) ws.terminate();
    }
    this.wss.close();
  }
}
