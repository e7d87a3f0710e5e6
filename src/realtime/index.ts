/** Assembles the realtime domain: session creation, the /ws/{user_id} gateway, slots and finalisation. */
import type http from 'node:http';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Clock } from '../lib/clock.js';
import type { BudgetClock } from '../lib/budget.js';
import type { Contract } from '../http/contract.js';
import type { Handlers } from '../contract/handlers.js';
import type { Page, PageParams } from '../lib/pagination.js';
import type { components } from '../../generated/openapi.js';
import type { UpgradeRoute } from '../http/upgrades.js';
import type { VoiceService } from '../voice/types.js';
import type { ConversationTools } from '../conversation/engine.js';
import type { WorkspaceAdmission } from '../workspaces/admission.js';
import type { SlotKeeper } from '../workspaces/slots.js';
import { ConversationFinaliser, type CallCompletedPublisher } from './conversation.js';
import { clientAddressResolver } from '../net/client-address.js';
import { IpAttemptLimiter } from './rate-limits.js';
import { LiveSessions } from './live-sessions.js';
import { ConversationRecords, recordedSessions } from './records.js';
import type { RecordingService } from '../recordings/service.js';
import type { RecordedConversations } from '../recordings/routes.js';
import { conversationEventRoutes, realtimeRoutes } from './routes.js';
import type { LiveEvents } from '../events/index.js';
import { RealtimeService, type RuntimeAgents } from './service.js';
import { RealtimeStore } from './store.js';
import { RealtimeGateway } from './ws-server.js';
import type { BridgeOptions } from './bridge.js';

type WebhookDelivery = components['schemas']['WebhookDelivery'];

const ORPHANS_PER_BEAT = 10;

export interface RealtimeDeps {
  config: Config;
  knex: Knex;
  clock: Clock;
  log: Logger;
  contract: Contract;
  agents: RuntimeAgents;
  voice: VoiceService;
  /** Billing checks, metering and the concurrency slots shared with phone calls. */
  admission: WorkspaceAdmission;
  tools: ConversationTools | null;
  events: CallCompletedPublisher | null;
  /** The webhook deliveries of a call.completed, by the event's conversation id. */
  deliveries: (workspaceId: string, conversationId: string, params: PageParams) => Promise<Page<WebhookDelivery>>;
  /** Records voice, camera and screen sessions whose agent's recording setting is on (null: recordings are not set up). */
  recordings: RecordingService | null;
  /** What recordings place the two sides' audio by (the service's clock; tests move their own). */
  recordingClock: Clock;
  /** Benchmarks: time from a frame's receipt to its hand-over to the voice session. */
  onForward?: (nanoseconds: bigint) => void;
  /** Counts a client's audio dropped beyond its budget, seconds. */
  onAudioDropped?: (seconds: number) => void;
  /** Counts a typed message or image dropped beyond its budget or size cap. */
  onInputDropped?: BridgeOptions['onInputDropped'];
  /** What the sessions' budgets refill by (tests hold it still); default: the monotonic clock. */
  budgetClock?: BudgetClock;
  /** Live events of sessions (their event streams); null: not set up. */
  live?: LiveEvents | null;
}

export interface Realtime {
  routes: Handlers;
  store: RealtimeStore;
  gateway: RealtimeGateway;
  /** The workspace slot keeper (shared with phone calls; owned by src/workspaces). */
  leases: SlotKeeper;
  /** Web sessions, finished or live, for their recording's routes. */
  recorded: RecordedConversations;
  /** Finished web sessions' records (their tombstones once erased). */
  records: ConversationRecords;
  /** The `/ws/{user_id}` WebSocket route, for src/http/upgrades.ts. */
  upgradeRoute: UpgradeRoute;
  /** Starts the ping sweep (the server is used for its port when PUBLIC_BASE_URL is unset). */
  attach(server: http.Server): void;
  /**
   * Shutdown: live sessions (and connections with tokens already issued) run on until they end or
   * `deadline` resolves; those left are then closed (1001, `end_reason` `shutdown`). Resolves once
   * their records and events are written.
   */
  drain(deadline: Promise<void>): Promise<void>;
}

export function createRealtime(d: RealtimeDeps): Realtime {
  const { config: c, log } = d;
  const store = new RealtimeStore(d.knex);
  let server: http.Server | undefined;
  // Unset PUBLIC_BASE_URL (development, tests with PORT=0): the port the server actually listens on.
  const publicBaseUrl = () => {
    const address = server?.address();
    if (c.PUBLIC_BASE_URL || !address || typeof address === 'string') return c.publicBaseUrl;
    return c.publicBaseUrl.replace(/:\d+$/, `:${address.port}`);
  };
  const service = new RealtimeService(
    store,
    d.agents,
    d.voice,
    d.tools,
    d.admission,
    d.clock,
    {
      publicBaseUrl,
      tokenTtlMs: c.REALTIME_TOKEN_TTL_MS,
      windows: [
        { limit: c.REALTIME_SESSIONS_PER_HOUR, windowMs: c.REALTIME_HOUR_WINDOW_MS },
        { limit: c.REALTIME_SESSIONS_PER_DAY, windowMs: c.REALTIME_DAY_WINDOW_MS },
      ],
      centsPerMinute: c.REALTIME_CENTS_PER_MINUTE,
      textCentsPerMinute: c.REALTIME_TEXT_CENTS_PER_MINUTE,
    },
    log,
  );
  const live = new LiveSessions(d.knex, log, c.REALTIME_PROGRESS_SAVE_MS);
  const ipLimiter = new IpAttemptLimiter(d.knex, { attempts: c.REALTIME_IP_ATTEMPTS, windowMs: c.REALTIME_IP_WINDOW_MS });
  const finaliser = new ConversationFinaliser(
    store,
    live,
    d.voice,
    d.admission,
    d.events,
    { centsPerMinute: c.REALTIME_CENTS_PER_MINUTE, textCentsPerMinute: c.REALTIME_TEXT_CENTS_PER_MINUTE },
    log,
  );
  finaliser.recordings = d.recordings;
  finaliser.live = d.live?.writer ?? null;
  const gateway = new RealtimeGateway(
    service,
    finaliser,
    ipLimiter,
    clientAddressResolver(c.TRUSTED_PROXIES),
    d.tools,
    d.clock,
    d.recordings ? { recordings: d.recordings, clock: d.recordingClock } : null,
    {
      pingIntervalMs: c.REALTIME_PING_INTERVAL_MS,
      holdFrames: c.REALTIME_ADMISSION_HOLD_FRAMES,
      holdBytes: c.REALTIME_ADMISSION_HOLD_BYTES,
      readBudget: { perSecond: c.REALTIME_READ_BYTES_PER_SECOND, burst: c.REALTIME_READ_BURST_BYTES },
      shutdownGraceMs: c.SHUTDOWN_GRACE_MS,
      noAudioAfterMs: c.REALTIME_NO_AUDIO_AFTER_MS,
      audioBudget: { rate: c.REALTIME_AUDIO_RATE, burstMs: c.REALTIME_AUDIO_BURST_MS },
      onAudioDropped: d.onAudioDropped,
      textBudget: { perSecond: c.REALTIME_TEXT_RATE, burst: c.REALTIME_TEXT_BURST },
      imageBudget: { perSecond: c.REALTIME_IMAGE_RATE, burst: c.REALTIME_IMAGE_BURST },
      onInputDropped: d.onInputDropped,
      budgetClock: d.budgetClock,
      toolTimeoutMs: c.REALTIME_TOOL_TIMEOUT_MS,
      toolFillerMs: c.REALTIME_TOOL_FILLER_MS,
      recordMaxBytes: c.CONVERSATION_RECORD_MAX_BYTES,
      onForward: d.onForward,
    },
    log,
  );
  let pruneTimer: NodeJS.Timeout | undefined;
  let liveTimer: NodeJS.Timeout | undefined;
  let sweeping = false;
  /**
   * This instance's sessions are alive (every beat, whatever else is running: a renewal that waited
   * for a slow sweep would let this instance's own sessions expire); sessions of dead instances are
   * finalised, a few per beat, one sweep at a time.
   */
  const liveBeat = async () => {
    await live.renew().catch((err) => log.warn({ err }, 'live session heartbeat failed'));
    if (sweeping) return;
    sweeping = true;
    try {
      for (let i = 0; i < ORPHANS_PER_BEAT; i++) {
        if (!(await live.claimOrphan(c.REALTIME_LEASE_EXPIRY_MS, (row, trx) => finaliser.finaliseOrphan(row, trx)))) break;
      }
    } catch (err) {
      log.warn({ err }, 'orphaned session sweep failed');
    } finally {
      sweeping = false;
    }
  };
  const records = new ConversationRecords(store, d.recordings);
  return {
    routes: {
      ...realtimeRoutes(service, records, d.contract, c.BODY_LIMIT_BYTES, d.deliveries),
      ...(d.live ? conversationEventRoutes(store, d.admission.slots, d.live) : {}),
    },
    store,
    recorded: recordedSessions(store),
    records,
    gateway,
    leases: d.admission.slots,
    upgradeRoute: gateway.route,
    attach(httpServer) {
      server = httpServer;
      gateway.attach();
      pruneTimer = setInterval(
        () => {
          void service.prune().catch((err) => log.warn({ err }, 'token pruning failed'));
          void ipLimiter.prune().catch((err) => log.warn({ err }, 'connection-attempt log pruning failed'));
        },
        60 * 60 * 1000,
      );
      pruneTimer.unref();
      liveTimer = setInterval(() => void liveBeat(), c.REALTIME_LEASE_HEARTBEAT_MS);
      liveTimer.unref();
      void liveBeat();
    },
    async drain(deadline) {
      clearInterval(pruneTimer);
      // Live sessions' leases are renewed until the last one is finalised (else another instance
      // would take them for orphans of a dead instance).
      await gateway.drain(deadline);
      clearInterval(liveTimer);
      live.stop();
    },
  };
}
