/**
 * Assembles the running service from configuration: database, contract, domain services, HTTP server.
 * main.ts runs it as a process; tests start it in-process on a random port.
 */
import http from 'node:http';
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
import { systemRoutes } from './system/routes.js';
import type { OutboundPolicy } from './net/outbound-guard.js';

export interface RunningService {
  url: string;
  server: http.Server;
  db: Database;
  secrets: SecretBox;
  workspaces: WorkspaceService;
  outbound: OutboundPolicy;
  /** operationIds that have a handler; the rest answer 501. */
  implemented: string[];
  /** Stop accepting, let in-flight requests finish (up to SHUTDOWN_GRACE_MS), close the database. */
  close(): Promise<void>;
}

export async function startService(config: Config, log: Logger, opts: { clock?: Clock } = {}): Promise<RunningService> {
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

  // Handlers by operationId; operations missing here answer 501.
  const handlers: Handlers = {
    ...workspaceRoutes(workspaces),
    ...systemRoutes({ db: db.knex, metrics, openapi: contract.document, isShuttingDown: () => shuttingDown }),
  };
  // Work to finish on shutdown after the HTTP server stops (background workers, open sessions), in order.
  const stopHooks: Array<() => Promise<void>> = [];
  const app = createApp({
    config,
    log,
    contract,
    api,
    handlers,
    metrics,
    auth: {
      apiKey: (t) => workspaces.authenticateApiKey(t),
      dashboardSession: (t) => workspaces.authenticateSession(t),
      adminToken: config.ADMIN_TOKEN,
    },
  });

  const server = http.createServer(app.callback());
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
    outbound,
    implemented: Object.keys(handlers),
    close() {
      closing ??= (async () => {
        shuttingDown = true;
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        const grace = setTimeout(() => server.closeAllConnections(), config.SHUTDOWN_GRACE_MS);
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
