/**
 * Assembles the running service from configuration: database, contract, domain services, HTTP server.
 * main.ts runs it as a process; tests start it in-process on a random port.
 */
import { configureSchemaPool } from './contract/schema-pool.js';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { limitConnections, serverOptions } from './http/connection-limits.js';
import { OverloadGuard } from './system/overload.js';
import { trustedProxyMatcher } from './net/client-address.js';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { Counter, Registry, collectDefaultMetrics } from 'prom-client';
import type { Config } from './config.js';
import { openDatabase, type Database } from './db/database.js';
import { Listener } from './db/listener.js';
import { answerClientErrors } from './http/client-errors.js';
import { NotifiedCaches } from './db/notified-cache.js';
import { Contract } from './http/contract.js';
import type { Handlers } from './contract/handlers.js';
import { createApp } from './app.js';
import { systemClock, type Clock } from './lib/clock.js';
import type { BudgetClock } from './lib/budget.js';
import { loadSecretBox, type SecretBox } from './crypto/secrets.js';
import { checkSecretsKey } from './crypto/key-check.js';
import { WorkspaceStore } from './workspaces/store.js';
import { WorkspaceService } from './workspaces/service.js';
import { workspaceRoutes } from './workspaces/routes.js';
import { AuthRateLimit } from './workspaces/auth-rate-limit.js';
import { AdmissionStore } from './workspaces/admission-store.js';
import { WorkspaceAdmission } from './workspaces/admission.js';
import { SlotKeeper } from './workspaces/slots.js';
import { UsageService } from './workspaces/usage.js';
import { usageRoutes } from './workspaces/usage-routes.js';
import { systemRoutes } from './system/routes.js';
import type { OutboundPolicy } from './net/outbound-guard.js';
import { DestinationStore } from './destinations/store.js';
import { DestinationService } from './destinations/service.js';
import { destinationRoutes } from './destinations/routes.js';
import { DoNotCallStore } from './do-not-call/store.js';
import { DoNotCallService } from './do-not-call/service.js';
import { doNotCallRoutes } from './do-not-call/routes.js';
import { AgentStore } from './agents/store.js';
import { AgentService } from './agents/service.js';
import { agentRoutes } from './agents/routes.js';
import { ToolStore } from './tools/store.js';
import { ToolService } from './tools/service.js';
import { toolRoutes } from './tools/routes.js';
import { createAgentTests } from './agent-tests/index.js';
import { createTestRuns, type TestRuns } from './test-runs/index.js';
import { createSipTrunks, type SipTrunks } from './sip-trunks/index.js';
import { sipOptionsFromConfig } from './sip/settings.js';
import { ToolRunner } from './conversation/tool-runner.js';
import { KnowledgeStore } from './knowledge/store.js';
import { TextExtractor } from './knowledge/extractor.js';
import { KnowledgeService } from './knowledge/service.js';
import { knowledgeRoutes } from './knowledge/routes.js';
import { WebhookStore } from './webhooks/store.js';
import { WebhookService } from './webhooks/service.js';
import { webhookRoutes } from './webhooks/routes.js';
import { WebhookDispatcher } from './webhooks/delivery.js';
import { EventPublisher } from './webhooks/events.js';
import { McpStore } from './mcp/store.js';
import { McpService } from './mcp/service.js';
import { mcpRoutes } from './mcp/routes.js';
import { Idempotency } from './http/idempotency.js';
import { createVoiceService, type VoiceService } from './voice/index.js';
import { voiceCatalogue } from './voice/catalogue.js';
import { startSandboxes, type Sandboxes } from './sandbox/index.js';
import { createRealtime, type Realtime } from './realtime/index.js';
import { routeUpgrades } from './http/upgrades.js';
import { JobQueue } from './jobs/queue.js';
import { RecordingService } from './recordings/service.js';
import { RecordingStore } from './recordings/store.js';
import { RecordingLinks } from './recordings/signed-url.js';
import { recordingStorage } from './recordings/backends.js';
import { recordingRoutes } from './recordings/routes.js';
import { callbackUrls, createCarriers, type Carriers } from './carriers/index.js';
import { createCalls, type Calls } from './calls/index.js';
import type { TurnTiming } from './calls/live/bridge.js';
import { callNotFound, type CallService } from './calls/service.js';
import type { CallStore } from './calls/store.js';
import type { CallFinaliser } from './calls/finaliser.js';
import type { CallJobs } from './calls/jobs.js';
import { ErasureService } from './erasure/service.js';
import { ErasureStore } from './erasure/store.js';
import { erasureRoutes } from './erasure/routes.js';
import { conversationNotFound } from './realtime/records.js';
import { BatchStore } from './batches/store.js';
import { BatchEngine } from './batches/engine.js';
import { BatchService } from './batches/service.js';
import { batchRoutes } from './batches/routes.js';
import { serviceUnavailable } from './errors/api-error.js';
import { LiveEvents } from './events/index.js';

/** Hang-ups of SIP calls for the instance holding their dialog (src/carriers/sip/options.ts). */
const SIP_HANGUPS_CHANNEL = 'sip_hangups';
/** NOTIFY carries at most 8000 bytes; a Call-ID is far shorter (a peer's longer one is ended by its deadline). */
const MAX_NOTIFIED_CALL_SID = 1000;

export interface RunningService {
  url: string;
  server: http.Server;
  db: Database;
  secrets: SecretBox;
  workspaces: WorkspaceService;
  /** Billing checks, metering and the concurrency slots web sessions and phone calls share. */
  admission: WorkspaceAdmission;
  /** Which numbers a workspace may call, and its daily cap of calls. */
  destinations: DestinationService;
  /** The workspaces' do-not-call lists. */
  doNotCall: DoNotCallService;
  agents: AgentService;
  tools: ToolService;
  /** SIP trunks: the API, and the inbound trust decision and outbound termination the SIP stack uses. */
  sipTrunks: SipTrunks;
  /** MCP servers; toolsForServers/callTool serve the ToolRunner. */
  mcp: McpService;
  knowledge: KnowledgeService;
  /** The tools an agent can call mid-call (HTTP, MCP, search_knowledge), for the call and session bridges. */
  toolRunner: ToolRunner;
  outbound: OutboundPolicy;
  webhooks: WebhookService;
  /** Raises call.completed and batch.completed (recorded durably, delivered in the background). */
  events: EventPublisher;
  /** The per-instance caches of agents and webhooks' event kinds, and their LISTEN connection. */
  caches: NotifiedCaches;
  /** The instance's one LISTEN connection (src/db/listener.ts). */
  listener: Listener;
  /** The voice service (the Gemini Live adapter, pointed at VOICE_SERVICE_URL or the sandbox). */
  voice: VoiceService;
  /** The simulators started in-process for what the configuration gives no URL (tests use their controls). */
  sandbox: Sandboxes;
  /** Realtime web sessions: POST /realtime/sessions and the /ws/{user_id} WebSocket. */
  realtime: Realtime;
  /** Phone calls: the API's rules, their store and finalisation. */
  calls: { service: CallService; store: CallStore; finaliser: CallFinaliser; jobs: CallJobs };
  /** Batches: the API's rules, their store and the dispatch engine. */
  batches: { service: BatchService; store: BatchStore; engine: BatchEngine };
  /** The carrier adapters, the media stream endpoints, and the signals to live calls' bridges. */
  telephony: { carriers: Carriers; media: Calls['media']; signals: Calls['signals'] };
  /** Agent test runs: creation and reads, and the runner of their cases. */
  testRuns: TestRuns;
  /** The PostgreSQL job queue (dialing, call deadlines). */
  jobs: JobQueue;
  /** Live events of calls and web sessions: their writer, streams and retention. */
  liveEvents: LiveEvents;
  /** Recordings of calls and web sessions: storage, links, retention. */
  recordings: RecordingService;
  /** Erasure of calls and web sessions (by request and by retention). */
  erasure: ErasureService;
  /** operationIds that have a handler; the rest answer 501. */
  implemented: string[];
  /**
   * Drain, then stop: readiness answers 503 and new calls and sessions are refused (503 + Retry-After)
   * at once, no new jobs are taken; live calls and sessions run on until they end or SHUTDOWN_DRAIN_MS,
   * when those left end with `shutdown`; then in-flight requests finish (up to SHUTDOWN_GRACE_MS), the
   * workers stop and the database closes.
   */
  close(): Promise<void>;
  /** True from the moment close() is called. */
  readonly draining: boolean;
}

export async function startService(
  config: Config,
  log: Logger,
  opts: {
    clock?: Clock;
    /** What web sessions' recordings place audio by (tests move it; default: `clock`). */
    recordingClock?: Clock;
    /** What the budgets of live streams (audio, keys, typed messages, images) refill by (tests hold it still to count; default: the monotonic clock). */
    budgetClock?: BudgetClock;
    /** Benchmarks: realtime frame receipt-to-forward time. */
    onFrameForwarded?: (ns: bigint) => void;
    /** Benchmarks: phone call caller-frame receipt-to-forward time. */
    onCallFrameForwarded?: (ns: bigint) => void;
    /** Benchmarks: the stamps of each phone-call caller turn and the start of its reply (scripts/bench/turn-latency.ts). */
    onCallTurnTiming?: (timing: TurnTiming) => void;
    /** Benchmarks: a live event queued by a conversation of this instance (an utterance's end in the bridge). */
    onLiveEvent?: (conversationId: string, type: string, data: Record<string, unknown>) => void;
  } = {},
): Promise<RunningService> {
  const clock = opts.clock ?? systemClock;
  const contract = Contract.load();
  const api = await contract.backend();
  const secrets = loadSecretBox({ secretsKey: config.SECRETS_KEY, dataDir: config.dataDir, production: config.NODE_ENV === 'production' });
  const db = await openDatabase({
    databaseUrl: config.DATABASE_URL,
    migrationUrl: config.DATABASE_MIGRATION_URL,
    dataDir: config.dataDir,
    embeddedPort: config.EMBEDDED_PG_PORT,
    poolMax: config.DATABASE_POOL_MAX,
    log,
  });

  const metrics = new Registry();
  collectDefaultMetrics({ register: metrics });
  // Caller audio beyond a stream's budget (real time plus a burst), dropped before transcoding and the voice service.
  const audioDropped = new Counter({
    name: 'media_audio_dropped_seconds_total',
    help: 'Caller audio dropped beyond its stream budget (real time plus a burst), seconds, by kind of stream.',
    labelNames: ['stream'] as const,
    registers: [metrics],
  });
  // Keys, typed messages and images beyond their stream's budget (rate) or size cap, dropped before the voice service.
  const inputDropped = new Counter({
    name: 'media_input_dropped_total',
    help: 'Keys a caller pressed, typed messages and images dropped beyond their stream budget (reason rate) or size cap (reason size), by kind of stream.',
    labelNames: ['stream', 'kind', 'reason'] as const,
    registers: [metrics],
  });
  /** Set by close(): readiness answers 503 and new calls and sessions are refused. */
  let draining = false;

  const outbound: OutboundPolicy = { production: config.NODE_ENV === 'production', allowList: config.OUTBOUND_ALLOW_LIST };

  // Agents and the event kinds workspaces' webhooks list, kept per instance; any write anywhere drops
  // them on every instance (NOTIFY from triggers). Nothing is kept until the LISTEN connection is up.
  // The instance's one LISTEN connection: call signals, live events, webhook wake-ups, cache invalidations.
  const listener = new Listener(db.url, log.child({ component: 'listen' }), { retryMs: config.LISTEN_RETRY_MS });
  const caches = new NotifiedCaches(listener, { ttlMs: config.CACHE_TTL_MS, maxEntries: config.CACHE_MAX_ENTRIES });
  const webhookStore = new WebhookStore(db.knex, caches.of('webhooks'));
  const webhooks = new WebhookService(webhookStore, secrets, outbound, clock, { secretOverlapMs: config.WEBHOOK_SECRET_OVERLAP_MS }, log);
  // Before anything reads a secret: this instance's SECRETS_KEY must be the one this database's secrets are sealed with.
  try {
    await checkSecretsKey(db.knex, secrets, () => webhooks.sealedSample());
  } catch (err) {
    await db.close();
    throw err;
  }

  // Domain services, each built from what it needs. Later domains add theirs below, in dependency order.
  const workspaceStore = new WorkspaceStore(db.knex);
  const workspaces = new WorkspaceService(
    workspaceStore,
    clock,
    { sessionTtlMs: config.SESSION_TTL_MS, keyLastUsedResolutionMs: config.KEY_LAST_USED_RESOLUTION_MS },
    log,
  );
  const admissionStore = new AdmissionStore(db.knex);
  const slots = new SlotKeeper(
    admissionStore,
    { instanceId: `inst_${randomBytes(6).toString('hex')}`, heartbeatMs: config.REALTIME_LEASE_HEARTBEAT_MS, expiryMs: config.REALTIME_LEASE_EXPIRY_MS },
    log,
  );
  const admission = new WorkspaceAdmission(
    admissionStore,
    slots,
    clock,
    {
      planMinutes: config.REALTIME_PLAN_MINUTES,
      minuteSeconds: config.METERING_MINUTE_S,
      reservationMinutes: config.RESERVATION_MINUTES,
      renewBeforeMs: config.RESERVATION_RENEW_BEFORE_MS,
    },
    log.child({ component: 'admission' }),
  );
  const destinations = new DestinationService(new DestinationStore(db.knex), clock, log.child({ component: 'destinations' }));
  const doNotCall = new DoNotCallService(new DoNotCallStore(db.knex), log.child({ component: 'do-not-call' }), config.DO_NOT_CALL_MAX_ENTRIES);
  const agents = new AgentService(new AgentStore(db.knex), secrets, destinations, outbound, caches.of('agents'));
  agents.useCatalogue(voiceCatalogue(config));
  const tools = new ToolService(new ToolStore(db.knex), agents, secrets, outbound);
  const sipTrunks = createSipTrunks({ db: db.knex, secrets, outbound, agents });
  configureSchemaPool({ threads: config.SCHEMA_POOL_THREADS, taskTimeoutMs: config.SCHEMA_TASK_TIMEOUT_MS });
  const extractor = new TextExtractor({ threads: config.KNOWLEDGE_EXTRACT_THREADS, timeoutMs: config.KNOWLEDGE_EXTRACT_TIMEOUT_MS });
  const knowledge = new KnowledgeService(new KnowledgeStore(db.knex), agents, extractor);
  const mcp = new McpService(
    new McpStore(db.knex),
    secrets,
    outbound,
    clock,
    {
      connectTimeoutMs: config.MCP_CONNECT_TIMEOUT_MS,
      stateTtlMs: config.MCP_OAUTH_STATE_TTL_MS,
      refreshMarginMs: config.MCP_TOKEN_REFRESH_MARGIN_MS,
      sessionIdleMs: config.MCP_SESSION_IDLE_MS,
      redirectUri: `${config.publicBaseUrl}/api/v1/mcp-servers/oauth/callback`,
    },
    log,
    agents,
  );
  const toolRunner = new ToolRunner(tools, knowledge, mcp);
  const webhookDispatcher = new WebhookDispatcher(
    webhookStore,
    (workspaceId, known) => webhooks.signingSecrets(workspaceId, known),
    outbound,
    clock,
    {
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      concurrency: config.WEBHOOK_CONCURRENCY,
      pollIntervalMs: config.WEBHOOK_POLL_INTERVAL_MS,
      retentionMs: config.WEBHOOK_DELIVERY_RETENTION_MS,
    },
    log,
    listener,
  );
  const events = new EventPublisher(webhookStore, () => webhookDispatcher.kick());
  // Live events of calls and web sessions: written in order, streamed by every instance.
  const liveEvents = new LiveEvents(
    db.knex,
    listener,
    clock,
    {
      flushMs: config.EVENTS_FLUSH_MS,
      heartbeatMs: config.EVENTS_HEARTBEAT_MS,
      maxStreamsPerWorkspace: config.EVENTS_MAX_STREAMS_PER_WORKSPACE,
      maxPerConversation: config.EVENTS_MAX_PER_CONVERSATION,
      retentionMs: config.EVENTS_RETENTION_MS,
      retentionSweepMs: config.EVENTS_RETENTION_SWEEP_MS,
      credentialLive: (id) => workspaceStore.credentialLive(id, clock.now()),
      onAppend: opts.onLiveEvent,
    },
    log.child({ component: 'events' }),
  );
  // The simulators stand in for the carriers and the voice service that have no URL configured.
  const sandbox = await startSandboxes(config, log);
  const voice = createVoiceService(config, { url: config.VOICE_SERVICE_URL ?? sandbox.voice!.url, sandbox: !config.VOICE_SERVICE_URL }, log);
  // The URLs the carriers call and recording links follow the port the server really listens on when
  // PUBLIC_BASE_URL is unset (PORT=0 in tests).
  let listening: http.Server | undefined;
  const publicBaseUrl = () => {
    const address = listening?.address();
    if (config.PUBLIC_BASE_URL || !address || typeof address === 'string') return config.publicBaseUrl;
    return config.publicBaseUrl.replace(/:\d+$/, `:${address.port}`);
  };
  // Recordings of calls and web sessions (both kinds of conversation record through them).
  const recordings = new RecordingService(
    new RecordingStore(db.knex),
    recordingStorage(config),
    new RecordingLinks(
      config.RECORDING_URL_SECRET ? Buffer.from(config.RECORDING_URL_SECRET, 'utf8') : secrets.derive('recording links'),
      publicBaseUrl,
      config.RECORDING_URL_TTL_S,
    ),
    clock,
    {
      flushMs: config.RECORDING_FLUSH_MS,
      redactionHoldMs: config.RECORDING_REDACTION_HOLD_MS,
      maxBytes: config.RECORDING_MAX_BYTES,
      retentionDays: config.RECORDING_RETENTION_DAYS,
      retentionSweepMs: config.RECORDING_RETENTION_SWEEP_MS,
    },
    log.child({ component: 'recordings' }),
  );
  const realtime = createRealtime({
    config,
    knex: db.knex,
    clock,
    log,
    contract,
    agents,
    voice,
    admission,
    tools: toolRunner,
    events,
    deliveries: (workspaceId, conversationId, params) => webhooks.callDeliveries(workspaceId, conversationId, params),
    recordings,
    recordingClock: opts.recordingClock ?? clock,
    onForward: opts.onFrameForwarded,
    onAudioDropped: (seconds) => audioDropped.inc({ stream: 'realtime' }, seconds),
    onInputDropped: (kind, reason) => inputDropped.inc({ stream: 'realtime', kind, reason }),
    budgetClock: opts.budgetClock,
    live: liveEvents,
  });

  // Phone calls.
  const jobs = new JobQueue(
    db.knex,
    {
      connectionString: db.url,
      concurrency: config.JOBS_CONCURRENCY,
      pollIntervalMs: config.JOBS_POLL_INTERVAL_MS,
      restartDelayMs: config.JOBS_RESTART_DELAY_MS,
    },
    log,
  );
  const carriers = createCarriers(
    {
      // Each carrier at its configured API URL, or at its simulator (the sandbox carriers' settings for it).
      ...sandbox.carriers?.settings,
      ...Object.fromEntries(Object.entries(config.carrierApiUrls).map(([provider, apiUrl]) => [provider, { apiUrl }])),
      // The SIP user agent when SIP_PORT is set: INVITEs let in by the trunks' rules, calls out through a trunk's termination.
      sip: {
        apiUrl: '',
        sip: {
          userAgent: (authenticateInbound) => sipOptionsFromConfig(config, { authenticateInbound, log: log.child({ component: 'sip' }) }),
          enabled: config.SIP_PORT !== undefined,
          authorize: (req) => sipTrunks.authorizeInbound(req),
          termination: (workspaceId, trunkId) => sipTrunks.outboundTermination(workspaceId, trunkId),
          ringTimeoutS: config.CALL_RING_TIMEOUT_S,
          hangups: {
            send: async (callSid) => {
              if (callSid.length <= MAX_NOTIFIED_CALL_SID) await db.knex.raw('select pg_notify(?, ?)', [SIP_HANGUPS_CHANNEL, callSid]);
            },
            on: (handler) => listener.on(SIP_HANGUPS_CHANNEL, (callSid) => callSid && handler(callSid)),
          },
          log: log.child({ component: 'sip' }),
        },
      },
    },
    callbackUrls(publicBaseUrl),
    config.CARRIER_TIMEOUT_MS,
  );
  log.info({ sandbox: [...(sandbox.carriers?.providers ?? [])], sandboxUrl: sandbox.carriers?.server.url }, 'carriers ready');
  const retention = recordings.register(jobs);
  const eventsRetention = liveEvents.register(jobs);
  // Erasure of calls and web sessions, by request and by the workspaces' transcript retention.
  const erasure = new ErasureService(
    new ErasureStore(db.knex),
    recordings,
    clock,
    { retentionSweepMs: config.TRANSCRIPT_RETENTION_SWEEP_MS },
    log.child({ component: 'erasure' }),
  );
  const erasureRetention = erasure.register(jobs);
  // Agent tests and their runs (conversations in text with mocked tools: no call, no request, no bill).
  const agentTests = createAgentTests(db.knex, agents);
  const testRuns = createTestRuns({
    config,
    knex: db.knex,
    clock,
    log,
    agents,
    tests: agentTests.store,
    voice,
    tools: toolRunner,
    knowledge,
    events,
    jobs,
    outbound,
  });
  const calls = createCalls({
    config,
    knex: db.knex,
    clock,
    log,
    listener,
    jobs,
    carriers,
    agents,
    admission,
    destinations,
    voice,
    tools: toolRunner,
    events,
    liveEvents,
    recordings,
    doNotCall,
    outbound,
    webhooks,
    sandbox: sandbox.carriers && { providers: sandbox.carriers.providers, ring: sandbox.carriers.server.ring, speed: config.SANDBOX_CARRIERS_SPEED },
    onAudioDropped: (seconds) => audioDropped.inc({ stream: 'call' }, seconds),
    onKeysDropped: (keys) => inputDropped.inc({ stream: 'call', kind: 'keys', reason: 'rate' }, keys),
    budgetClock: opts.budgetClock,
    onForward: opts.onCallFrameForwarded,
    onTurnTiming: opts.onCallTurnTiming,
  });
  const { service: callService, finaliser } = calls;
  const batchStore = new BatchStore(db.knex);
  const overload = new OverloadGuard(
    { loopDelayMs: config.OVERLOAD_LOOP_DELAY_MS, dbWaiting: config.OVERLOAD_DB_WAITING ?? config.DATABASE_POOL_MAX, sampleMs: config.OVERLOAD_SAMPLE_MS },
    () => (db.knex.client as { pool?: { numPendingAcquires(): number } }).pool?.numPendingAcquires() ?? 0,
    log.child({ component: 'overload' }),
  );
  const batchLog = log.child({ component: 'batches' });
  const batchEngine = new BatchEngine(
    batchStore,
    callService,
    admission,
    jobs,
    events,
    clock,
    {
      chunk: config.BATCH_DISPATCH_CHUNK,
      capacityRetryMs: config.BATCH_CAPACITY_RETRY_MS,
      wakeDelayMs: config.BATCH_WAKE_DELAY_MS,
      overloaded: () => overload.reason() !== null,
    },
    batchLog,
    destinations,
    doNotCall,
  );
  batchEngine.register();
  finaliser.onFinalised((call, trx) => batchEngine.callEnded(call, trx));
  const batchService = new BatchService(
    batchStore,
    callService,
    batchEngine,
    clock,
    batchLog,
    destinations,
    {
      maxOpenBatches: config.BATCH_MAX_OPEN_PER_WORKSPACE,
      maxWaitingRecipients: config.BATCH_MAX_WAITING_RECIPIENTS_PER_WORKSPACE,
    },
    doNotCall,
  );
  agents.addDeleteGuard((workspaceId, agentId) => batchService.guardAgentDelete(workspaceId, agentId));

  // The developer's reads of usage and limits; the destination policy and the web-session creation
  // counts come from their own rooms.
  const usage = new UsageService(
    db.knex,
    clock,
    {
      planMinutes: config.REALTIME_PLAN_MINUTES,
      minuteSeconds: config.METERING_MINUTE_S,
      prices: { phoneCall: config.CALL_CENTS_PER_MINUTE, webSession: config.REALTIME_CENTS_PER_MINUTE, textSession: config.REALTIME_TEXT_CENTS_PER_MINUTE },
      maxCallDurationS: config.CALL_MAX_DURATION_S,
      webSessionCreation: {
        perHour: { limit: config.REALTIME_SESSIONS_PER_HOUR, windowMs: config.REALTIME_HOUR_WINDOW_MS },
        perDay: { limit: config.REALTIME_SESSIONS_PER_DAY, windowMs: config.REALTIME_DAY_WINDOW_MS },
      },
    },
    {
      destinationPolicy: (workspaceId) => destinations.read(workspaceId),
      webSessionsCreated: (workspaceId, windowMs) => realtime.store.tokensCreatedSince(workspaceId, new Date(clock.now().getTime() - windowMs)),
    },
  );
  const authLimit = new AuthRateLimit(db.knex, { perMinute: config.AUTH_RATE_LIMIT_PER_MINUTE, trustedProxies: config.TRUSTED_PROXIES });
  // A call as its recording's routes see it (recordings know no call).
  const recordedCall = (row: { id: string; recording_enabled: boolean; erased_at: Date | null }) => ({
    id: row.id,
    kind: 'phone_call' as const,
    recordingEnabled: row.recording_enabled,
    erased: row.erased_at !== null,
  });
  // Handlers by operationId; operations missing here answer 501.
  const handlers: Handlers = {
    ...workspaceRoutes(workspaces, authLimit),
    ...agentRoutes(agents),
    ...destinationRoutes(destinations),
    ...doNotCallRoutes(doNotCall),
    ...usageRoutes(usage),
    ...toolRoutes(tools),
    ...agentTests.routes,
    ...testRuns.routes,
    ...sipTrunks.routes,
    ...knowledgeRoutes(knowledge),
    ...webhookRoutes(webhooks),
    ...mcpRoutes(mcp),
    ...realtime.routes,
    ...calls.routes,
    ...batchRoutes(batchService, contract, (workspaceId, batchId, params) => webhooks.batchDeliveries(workspaceId, batchId, params)),
    ...systemRoutes({ db: db.knex, publicBaseUrl, metrics, isShuttingDown: () => draining }),
    ...recordingRoutes(
      recordings,
      {
        owned: async (ws, id) => recordedCall(await callService.owned(ws, id)),
        any: async (id) => recordedCall(await callService.any(id)),
      },
      realtime.recorded,
    ),
    ...erasureRoutes(
      erasure,
      { table: 'calls', noun: 'call', notFound: callNotFound, get: (ws, id) => callService.get(ws, id) },
      { table: 'realtime_conversations', noun: 'web session', notFound: conversationNotFound, get: (ws, id) => realtime.records.get(ws, id) },
    ),
  };
  // A draining instance starts no new conversation: the request did nothing, so the client (or the
  // balancer) sends it again and a ready instance takes it. Everything else is served as usual while
  // the instance drains (carriers' callbacks and media streams and browsers' WebSockets of the
  // conversations already created included), so nothing already begun is lost.
  // An overloaded one (src/system/overload.ts) likewise, until it has room again.
  for (const op of ['createCall', 'createRealtimeSession'] as const) {
    const handler = handlers[op] as (...args: unknown[]) => Promise<unknown>;
    (handlers as Record<string, unknown>)[op] = (...args: unknown[]) => {
      if (draining) throw serviceUnavailable('This instance is shutting down; send the request again: another instance takes it.', 'service_unavailable', 1);
      if (overload.reason() !== null)
        throw serviceUnavailable('This instance is at capacity; send the request again shortly (it did nothing).', 'service_unavailable', 2);
      return handler(...args);
    };
  }
  // Work to finish on shutdown after the HTTP server stops (background workers, open sessions), in order.
  const stopHooks: Array<[string, () => Promise<void>]> = [];
  await listener.start();
  stopHooks.push(['caches', async () => caches.stop()]);
  // Slot leases are renewed until every live session has been drained.
  overload.start();
  stopHooks.push(['overload guard', async () => overload.stop()]);
  slots.start();
  stopHooks.push(['slot heartbeat', () => slots.stop()]);
  // Webhook deliveries in flight finish (each within WEBHOOK_TIMEOUT_MS); pending ones stay in the outbox.
  await webhookDispatcher.start();
  stopHooks.push(['webhook dispatcher', () => webhookDispatcher.stop()]);
  // Calls: cross-instance signals to bridges, then the job queue (dialing, deadlines) once handlers exist.
  liveEvents.start();
  await jobs.start();
  stopHooks.push(['job queue', () => jobs.stop()]);
  stopHooks.push(['LISTEN connection', () => listener.stop()]);
  // Not fatal: a role that may only read and write rows cannot add graphile-worker jobs (row-level
  // security on its private tables, with no policy for that role); the instance serves all the same.
  await retention.schedule().catch((err) => log.warn({ err: (err as Error).message }, 'the recordings retention job could not be scheduled'));
  await eventsRetention.schedule().catch((err) => log.warn({ err: (err as Error).message }, 'the conversation events retention job could not be scheduled'));
  await erasureRetention.schedule().catch((err) => log.warn({ err: (err as Error).message }, 'the transcript retention job could not be scheduled'));
  calls.start();
  await carriers.start();
  stopHooks.push(['carriers', () => carriers.stop()]);

  // Connections kept open for MCP tool calls.
  stopHooks.push(['MCP connections', () => mcp.close()]);
  stopHooks.push(['extraction pool', () => extractor.close()]);
  stopHooks.push(['voice service', () => voice.close()]);
  stopHooks.push(['sandboxes', () => sandbox.close()]);
  stopHooks.push(['auth limiter', async () => authLimit.close()]);
  const app = createApp({
    config,
    log,
    contract,
    api,
    handlers,
    metrics,
    idempotency: new Idempotency(db.knex, clock, contract, { ttlMs: config.IDEMPOTENCY_TTL_MS, lockTimeoutMs: config.IDEMPOTENCY_LOCK_TIMEOUT_MS }),
    auth: {
      apiKey: (t) => workspaces.authenticateApiKey(t),
      dashboardSession: (t) => workspaces.authenticateSession(t),
      adminToken: config.ADMIN_TOKEN,
      metricsToken: config.METRICS_TOKEN,
    },
  });

  const limits = {
    headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS,
    requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT_MS,
    maxConnectionsPerIp: config.HTTP_MAX_CONNECTIONS_PER_IP,
    maxConnections: config.HTTP_MAX_CONNECTIONS,
    isTrustedProxy: trustedProxyMatcher(config.TRUSTED_PROXIES),
  };
  const server = http.createServer(serverOptions(limits), app.callback());
  limitConnections(server, limits, log);
  answerClientErrors(server, log);
  // Every WebSocket endpoint by path, in one place (telephony media streams join here); any other
  // upgrade path is answered 404 and its socket destroyed.
  routeUpgrades(server, [realtime.upgradeRoute, ...calls.upgradeRoutes]);
  listening = server;
  realtime.attach(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.PORT, config.HOST, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${address.port}`;
  log.info({ url, publicBaseUrl: config.publicBaseUrl }, 'service listening');

  let closing: Promise<void> | undefined;
  return {
    url,
    server,
    db,
    secrets,
    workspaces,
    admission,
    destinations,
    doNotCall,
    agents,
    tools,
    sipTrunks,
    mcp,
    knowledge,
    toolRunner,
    outbound,
    webhooks,
    events,
    caches,
    listener,
    voice,
    sandbox,
    realtime,
    calls: { service: callService, store: calls.store, finaliser, jobs: calls.jobs },
    batches: { service: batchService, store: batchStore, engine: batchEngine },
    telephony: { carriers, media: calls.media, signals: calls.signals },
    testRuns,
    jobs,
    recordings,
    erasure,
    liveEvents,
    implemented: Object.keys(handlers),
    get draining() {
      return draining;
    },
    close() {
      closing ??= (async () => {
        draining = true;
        carriers.drain();
        log.info({ calls: calls.media.size, sessions: realtime.gateway.size, drainMs: config.SHUTDOWN_DRAIN_MS }, 'draining: no new calls, sessions or jobs');
        // No new jobs from now on (the running ones finish); the other instances take the queue.
        const jobsStopped = jobs.stop().catch((err) => log.error({ err }, 'job queue did not stop cleanly'));
        // Live conversations run on to their end, or to the drain deadline (then they end with `shutdown`).
        let deadlineTimer: NodeJS.Timeout | undefined;
        const deadline = new Promise<void>((resolve) => (deadlineTimer = setTimeout(resolve, config.SHUTDOWN_DRAIN_MS)));
        await Promise.all([realtime.drain(deadline), calls.drain(deadline), jobsStopped]);
        clearTimeout(deadlineTimer);
        // Every conversation here has ended: its events are written; event streams end (clients resume elsewhere).
        await liveEvents.stop().catch((err) => log.warn({ err }, 'live events did not stop cleanly'));
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        const grace = setTimeout(() => server.closeAllConnections(), config.SHUTDOWN_GRACE_MS);
        await closed;
        clearTimeout(grace);
        for (const [step, hook] of stopHooks) {
          const slow = setTimeout(() => log.warn({ step }, 'a shutdown step is taking longer than SHUTDOWN_GRACE_MS'), config.SHUTDOWN_GRACE_MS);
          await hook().finally(() => clearTimeout(slow));
        }
        await db.close();
        log.info('service stopped');
      })();
      return closing;
    },
  };
}
