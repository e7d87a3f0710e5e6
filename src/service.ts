/**
 * Assembles the running service from configuration: database, contract, domain services, HTTP server.
 * main.ts runs it as a process; tests start it in-process on a random port.
 */
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import type { Config } from './config.js';
import { openDatabase, type Database } from './db/database.js';
import { Contract } from './http/contract.js';
import type { Handlers } from './http/handler-types.js';
import { createApp } from './app.js';
import { systemClock, type Clock } from './lib/clock.js';
import { loadSecretBox, type SecretBox } from './crypto/secrets.js';
import { WorkspaceStore } from './workspaces/store.js';
import { WorkspaceService } from './workspaces/service.js';
import { workspaceRoutes } from './workspaces/routes.js';
import { AuthRateLimit } from './workspaces/auth-rate-limit.js';
import { AdmissionStore } from './workspaces/admission-store.js';
import { WorkspaceAdmission } from './workspaces/admission.js';
import { SlotKeeper } from './workspaces/slots.js';
import { systemRoutes } from './system/routes.js';
import type { OutboundPolicy } from './net/outbound-guard.js';
import { AgentStore } from './agents/store.js';
import { AgentService } from './agents/service.js';
import { agentRoutes } from './agents/routes.js';
import { ToolStore } from './tools/store.js';
import { ToolService } from './tools/service.js';
import { toolRoutes } from './tools/routes.js';
import { ToolRunner } from './conversation/tool-runner.js';
import { KnowledgeStore } from './knowledge/store.js';
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
import { createVoiceService, type VoiceServiceHandle } from './voice/index.js';
import { createRealtime, type Realtime } from './realtime/index.js';
import { routeUpgrades } from './http/upgrades.js';

export interface RunningService {
  url: string;
  server: http.Server;
  db: Database;
  secrets: SecretBox;
  workspaces: WorkspaceService;
  /** Billing checks, metering and the concurrency slots web sessions and phone calls share. */
  admission: WorkspaceAdmission;
  agents: AgentService;
  tools: ToolService;
  /** MCP servers; toolsForAgent/callTool serve the ToolRunner. */
  mcp: McpService;
  knowledge: KnowledgeService;
  /** The tools an agent can call mid-call (HTTP, MCP, search_knowledge), for the call and session bridges. */
  toolRunner: ToolRunner;
  outbound: OutboundPolicy;
  webhooks: WebhookService;
  /** Raises call.completed and batch.completed (recorded durably, delivered in the background). */
  events: EventPublisher;
  /** The voice service (Gemini Live adapter; the in-process sandbox when VOICE_SERVICE_URL is unset). */
  voice: VoiceServiceHandle;
  /** Realtime web sessions: POST /realtime/sessions and the /ws/{user_id} WebSocket. */
  realtime: Realtime;
  /** operationIds that have a handler; the rest answer 501. */
  implemented: string[];
  /** Stop accepting, let in-flight requests finish (up to SHUTDOWN_GRACE_MS), close the database. */
  close(): Promise<void>;
}

export async function startService(
  config: Config,
  log: Logger,
  opts: { clock?: Clock; /** Benchmarks: realtime frame receipt-to-forward time. */ onFrameForwarded?: (ns: bigint) => void } = {},
): Promise<RunningService> {
  const clock = opts.clock ?? systemClock;
  const contract = Contract.load();
  const api = await contract.backend();
  const secrets = loadSecretBox({ secretsKey: config.SECRETS_KEY, dataDir: config.dataDir, production: config.NODE_ENV === 'production' });
  const db = await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.dataDir, embeddedPort: config.EMBEDDED_PG_PORT, log });

  const metrics = new Registry();
  collectDefaultMetrics({ register: metrics });
  let shuttingDown = false;

  const outbound: OutboundPolicy = { production: config.NODE_ENV === 'production', allowList: config.OUTBOUND_ALLOW_LIST };

  // Domain services, each built from what it needs. Later domains add theirs below, in dependency order.
  const workspaces = new WorkspaceService(new WorkspaceStore(db.knex), clock, { sessionTtlMs: config.SESSION_TTL_MS, keyLastUsedResolutionMs: config.KEY_LAST_USED_RESOLUTION_MS }, log);
  const admissionStore = new AdmissionStore(db.knex);
  const slots = new SlotKeeper(admissionStore, { instanceId: `inst_${randomBytes(6).toString('hex')}`, heartbeatMs: config.REALTIME_LEASE_HEARTBEAT_MS, expiryMs: config.REALTIME_LEASE_EXPIRY_MS }, log);
  const admission = new WorkspaceAdmission(admissionStore, slots, clock, { planMinutes: config.REALTIME_PLAN_MINUTES });
  const agents = new AgentService(new AgentStore(db.knex), secrets);
  const tools = new ToolService(new ToolStore(db.knex), agents, secrets, outbound);
  const knowledge = new KnowledgeService(new KnowledgeStore(db.knex), agents);
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
  );
  const toolRunner = new ToolRunner(tools, knowledge, mcp);
  const webhookStore = new WebhookStore(db.knex);
  const webhooks = new WebhookService(webhookStore, secrets, outbound, clock, { secretOverlapMs: config.WEBHOOK_SECRET_OVERLAP_MS }, log);
  const webhookDispatcher = new WebhookDispatcher(
    webhookStore,
    (workspaceId, known) => webhooks.signingSecrets(workspaceId, known),
    outbound,
    clock,
    { timeoutMs: config.WEBHOOK_TIMEOUT_MS, concurrency: config.WEBHOOK_CONCURRENCY, pollIntervalMs: config.WEBHOOK_POLL_INTERVAL_MS, retentionMs: config.WEBHOOK_DELIVERY_RETENTION_MS },
    log,
    db.url,
  );
  const events = new EventPublisher(webhookStore, () => webhookDispatcher.kick());
  const voice = await createVoiceService(config, log);
  const realtime = createRealtime({
    config, knex: db.knex, clock, log, contract, agents, voice, admission, tools: toolRunner, events,
    deliveries: (workspaceId, conversationId, params) => webhooks.callDeliveries(workspaceId, conversationId, params),
    onForward: opts.onFrameForwarded,
  });

  const authLimit = new AuthRateLimit(db.knex, { perMinute: config.AUTH_RATE_LIMIT_PER_MINUTE, trustedProxies: config.TRUSTED_PROXIES });
  // Handlers by operationId; operations missing here answer 501.
  const handlers: Handlers = {
    ...workspaceRoutes(workspaces, authLimit),
    ...agentRoutes(agents),
    ...toolRoutes(tools),
    ...knowledgeRoutes(knowledge, contract),
    ...webhookRoutes(webhooks),
    ...mcpRoutes(mcp),
    ...realtime.routes,
    ...systemRoutes({ db: db.knex, metrics, openapi: contract.document, isShuttingDown: () => shuttingDown }),
  };
  // Work to finish on shutdown after the HTTP server stops (background workers, open sessions), in order.
  const stopHooks: Array<() => Promise<void>> = [];
  // Slot leases are renewed until every live session has been drained.
  slots.start();
  stopHooks.push(async () => slots.stop());
  // Webhook deliveries in flight finish (each within WEBHOOK_TIMEOUT_MS); pending ones stay in the outbox.
  await webhookDispatcher.start();
  stopHooks.push(() => webhookDispatcher.stop());
  // Connections kept open for MCP tool calls.
  stopHooks.push(() => mcp.close());
  stopHooks.push(() => voice.close());
  stopHooks.push(async () => authLimit.close());
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
    },
  });

  const server = http.createServer(app.callback());
  // Every WebSocket endpoint by path, in one place (telephony media streams join here); any other
  // upgrade path is answered 404 and its socket destroyed.
  routeUpgrades(server, [realtime.upgradeRoute]);
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
    agents,
    tools,
    mcp,
    knowledge,
    toolRunner,
    outbound,
    webhooks,
    events,
    voice,
    realtime,
    implemented: Object.keys(handlers),
    close() {
      closing ??= (async () => {
        shuttingDown = true;
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        const grace = setTimeout(() => server.closeAllConnections(), config.SHUTDOWN_GRACE_MS);
        // Upgraded sockets keep the server open: live sessions close (1001) and are finalised first.
        await realtime.drain();
        await closed;
        clearTimeout(grace);
        for (const hook of stopHooks) await hook();
        await db.close();
        log.info('service stopped');
      })();
      return closing;
    },
  };
}
