/**
 * Assembles phone calls: their store, rules and jobs, finalisation, the carriers' callbacks, inbound
 * numbers, the media streams' server and the signals to live calls' bridges, from named
 * dependencies; gives the service their routes, start and drain.
 */
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Clock } from '../lib/clock.js';
import type { BudgetClock } from '../lib/budget.js';
import type { Handlers } from '../contract/handlers.js';
import type { Page, PageParams } from '../lib/pagination.js';
import type { components } from '../../generated/openapi.js';
import type { Listener } from '../db/listener.js';
import type { JobQueue } from '../jobs/queue.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';
import type { VoiceService } from '../voice/types.js';
import type { ConversationTools } from '../conversation/engine.js';
import type { AgentService } from '../agents/service.js';
import type { WorkspaceAdmission } from '../workspaces/admission.js';
import type { DestinationService } from '../destinations/service.js';
import type { EventPublisher } from '../webhooks/events.js';
import type { LiveEvents } from '../events/index.js';
import type { RecordingService } from '../recordings/service.js';
import type { DoNotCallService } from '../do-not-call/service.js';
import type { Carriers } from '../carriers/index.js';
import { CallSignals } from './live/signals.js';
import { CarrierCallbacks } from './callbacks.js';
import { InboundNumbers, type SandboxRinger } from './inbound.js';
import { MediaServer } from './live/media-server.js';
import { CallStore } from './store.js';
import { CallFinaliser } from './finaliser.js';
import { InboundSetup } from './inbound-setup.js';
import { CallService } from './service.js';
import { CallJobs } from './jobs.js';
import { CallLiveEvents } from './live-events.js';
import { callEventRoutes, callRoutes, carrierCallbackRoutes } from './routes.js';
import type { TurnTiming } from './live/bridge.js';

type WebhookDelivery = components['schemas']['WebhookDelivery'];

export interface CallsDeps {
  config: Config;
  knex: Knex;
  clock: Clock;
  log: Logger;
  /** The instance's LISTEN connection (signals to live calls' bridges). */
  listener: Listener;
  jobs: JobQueue;
  /** The registered carriers. */
  carriers: Carriers;
  agents: AgentService;
  admission: WorkspaceAdmission;
  destinations: DestinationService;
  voice: VoiceService;
  tools: ConversationTools | null;
  events: EventPublisher;
  liveEvents: LiveEvents;
  recordings: RecordingService;
  /** The workspace's do-not-call list: calls to listed numbers refused, opt-outs listed. */
  doNotCall: DoNotCallService;
  outbound: OutboundPolicy;
  webhooks: {
    signingSecrets(workspaceId: string): ReturnType<InboundSetupDeps['signingSecrets']>;
    callDeliveries(workspaceId: string, callId: string, params: PageParams): Promise<Page<WebhookDelivery>>;
  };
  /** The sandbox carriers, when a provider runs on them: they ring numbers, and send media and keys `speed` times faster than real time. */
  sandbox: (SandboxRinger & { speed: number }) | null;
  onAudioDropped?: (seconds: number) => void;
  onKeysDropped?: (keys: number) => void;
  budgetClock?: BudgetClock;
  /** Benchmarks: a caller frame's receipt-to-forward time. */
  onForward?: (nanoseconds: bigint) => void;
  /** Benchmarks: each caller turn's reply stamps (scripts/bench/turn-latency.ts). */
  onTurnTiming?: (timing: TurnTiming) => void;
}

type InboundSetupDeps = ConstructorParameters<typeof InboundSetup>[0];

export interface Calls {
  service: CallService;
  store: CallStore;
  finaliser: CallFinaliser;
  jobs: CallJobs;
  signals: CallSignals;
  media: MediaServer;
  carriers: Carriers;
  routes: Handlers;
  /** The carriers' media stream endpoints, for src/http/upgrades.ts. */
  upgradeRoutes: MediaServer['routes'];
  /** Starts renewing live calls' deadlines (the job handlers are registered at assembly). */
  start(): void;
  /**
   * Shutdown: live calls run on until they end or `deadline` resolves; those left are then hung up
   * with `end_reason` `shutdown` and the media server stops. Resolves once they are finalised.
   */
  drain(deadline: Promise<void>): Promise<void>;
}

export function createCalls(d: CallsDeps): Calls {
  const { config: c, clock, carriers } = d;
  const log = d.log.child({ component: 'calls' });
  const timing = {
    ringTimeoutS: c.CALL_RING_TIMEOUT_S,
    maxDurationS: c.CALL_MAX_DURATION_S,
    dialGraceMs: c.CALL_DIAL_GRACE_MS,
    orphanAfterMs: c.CALL_ORPHAN_AFTER_MS,
  };
  const store = new CallStore(d.knex);
  const live = new CallLiveEvents(d.liveEvents.writer, d.events, clock, log);
  store.statusObserver = {
    moved: (moves, trx) => live.statusMoved(moves, trx),
    inline: (call, to, gate, predicted, trx) => live.inlineMove(call, to, gate, predicted, trx),
  };
  const finaliser = new CallFinaliser(store, d.voice, d.admission, d.events, d.jobs, clock, { centsPerMinute: c.CALL_CENTS_PER_MINUTE }, log);
  finaliser.recordings = d.recordings;
  const inboundSetup = new InboundSetup(
    { signingSecrets: (workspaceId) => d.webhooks.signingSecrets(workspaceId), runtimeOf: (workspaceId, agentId) => d.agents.runtimeOf(workspaceId, agentId) },
    d.outbound,
    clock,
    { timeoutMs: c.INBOUND_SETUP_TIMEOUT_MS },
    log,
  );
  const service = new CallService(
    store,
    d.agents,
    d.admission,
    d.jobs,
    carriers,
    finaliser,
    d.outbound,
    clock,
    timing,
    { centsPerMinute: c.CALL_CENTS_PER_MINUTE },
    log,
    d.destinations,
    inboundSetup,
  );
  service.recordings = d.recordings;
  service.doNotCall = d.doNotCall;
  const jobs = new CallJobs(store, d.agents, carriers, finaliser, d.jobs, clock, { ...timing, machineDetectionTimeoutS: 30 }, log);
  jobs.register();
  const signals = new CallSignals(d.listener, log);
  const callbacks = new CarrierCallbacks(
    store,
    d.agents,
    service,
    finaliser,
    signals,
    carriers,
    clock,
    { orphanAfterMs: c.CALL_ORPHAN_AFTER_MS, statusGraceMs: c.CALL_STATUS_GRACE_MS },
    log,
  );
  // Carriers whose messages come from an in-process user agent (SIP) hand them over here, as HTTP callbacks are.
  for (const plugin of carriers.list()) {
    plugin.inProcess?.listen((operation, message) =>
      callbacks.receive(plugin.provider, operation, message, { path: `${plugin.provider}:${operation}`, verified: () => undefined }),
    );
  }
  const inbound = new InboundNumbers(d.agents, carriers, store, d.sandbox, log);
  // The sandbox carriers send media and keys `speed` times faster than real time.
  const speed = d.sandbox ? Math.max(1, d.sandbox.speed) : 1;
  const media = new MediaServer(
    {
      store,
      voice: d.voice,
      tools: d.tools,
      finaliser,
      clock,
      carriers,
      agents: d.agents,
      admission: d.admission,
      signals,
      destinations: d.destinations,
      doNotCall: d.doNotCall,
      recordings: d.recordings,
      live,
    },
    {
      toolTimeoutMs: c.REALTIME_TOOL_TIMEOUT_MS,
      toolFillerMs: c.REALTIME_TOOL_FILLER_MS,
      recordMaxBytes: c.CONVERSATION_RECORD_MAX_BYTES,
      silenceTimeoutMs: c.CALL_SILENCE_TIMEOUT_MS,
      dtmfGapMs: c.CALL_DTMF_GAP_MS,
      transferMaxAttempts: c.TRANSFER_MAX_ATTEMPTS,
      maxDurationMs: c.CALL_MAX_DURATION_S * 1000,
      audioBudget: { rate: d.sandbox ? Math.max(c.CALL_AUDIO_RATE, d.sandbox.speed) : c.CALL_AUDIO_RATE, burstMs: c.CALL_AUDIO_BURST_MS },
      openHoldMs: c.VOICE_CONNECT_TIMEOUT_MS,
      onAudioDropped: d.onAudioDropped,
      keyBudget: { perSecond: c.CALL_DTMF_RATE * speed, burst: c.CALL_DTMF_BURST },
      onKeysDropped: d.onKeysDropped,
      budgetClock: d.budgetClock,
      reservation: service.reservationTerms,
      onForward: d.onForward,
      onTurnTiming: d.onTurnTiming,
      startTimeoutMs: c.CALL_STREAM_START_TIMEOUT_MS,
      instanceId: `inst_${randomBytes(6).toString('hex')}`,
      heartbeatMs: c.CALL_HEARTBEAT_MS,
      orphanAfterMs: c.CALL_ORPHAN_AFTER_MS,
      shutdownGraceMs: c.SHUTDOWN_GRACE_MS,
      progressSaveMs: c.CALL_PROGRESS_SAVE_MS,
    },
    log,
  );
  return {
    service,
    store,
    finaliser,
    jobs,
    signals,
    media,
    carriers,
    routes: {
      ...callRoutes(service, inbound, (workspaceId, callId, params) => d.webhooks.callDeliveries(workspaceId, callId, params)),
      ...carrierCallbackRoutes(carriers, callbacks),
      ...callEventRoutes(service, d.liveEvents),
    },
    upgradeRoutes: media.routes,
    start: () => media.start(),
    drain: (deadline) => media.drain(deadline),
  };
}
