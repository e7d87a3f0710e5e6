/**
 * The Koa app: one middleware, the front door (src/http/front-door.ts), which takes a request through
 * HEAD as GET -> request id -> operation match -> CORS -> body (parsed by what the matched operation
 * declares) -> contract router, renders failures as the error envelope, checks the answer against the
 * contract (when on) and logs and counts it.
 */
import Koa from 'koa';
import { koaBody } from 'koa-body';
import type { Logger } from 'pino';
import type { OpenAPIBackend } from 'openapi-backend';
import type { Registry } from 'prom-client';
import { contractRouter } from './http/router.js';
import { frontDoor } from './http/front-door.js';
import { parseBodyByOperation } from './http/body-parsing.js';
import { securityHandlers, type Authenticators } from './http/security.js';
import type { Contract } from './http/contract.js';
import type { Handlers } from './contract/handlers.js';
import type { Idempotency } from './http/idempotency.js';
import type { Config } from './config.js';

export interface AppParts {
  config: Config;
  log: Logger;
  contract: Contract;
  api: OpenAPIBackend;
  handlers: Handlers;
  auth: Authenticators;
  metrics: Registry;
  /** Idempotency-Key handling for the operations that declare the header. */
  idempotency?: Idempotency;
}

export function createApp(parts: AppParts): Koa {
  const { config, log, contract } = parts;
  const app = new Koa({ proxy: false });
  app.silent = true;
  app.use(
    frontDoor({
      contract,
      api: parts.api,
      log,
      metrics: parts.metrics,
      contractCheck: config.contractCheck,
      coverageDir: config.CONTRACT_COVERAGE_DIR,
      bodyLimitBytes: config.BODY_LIMIT_BYTES,
      corsOrigins: config.CORS_ORIGINS,
      parseBody: parseBodyByOperation(
        koaBody({
          jsonLimit: config.BODY_LIMIT_BYTES,
          formLimit: config.BODY_LIMIT_BYTES,
          textLimit: config.BODY_LIMIT_BYTES,
          includeUnparsed: true,
          jsonStrict: true,
          onError: (err, ctx) => {
            // An operation that checks its body at a step of its own raises this there (deferred-body.ts).
            if (ctx.state.operation?.validateInHandler) {
              ctx.state.bodyError = err;
              return;
            }
            throw err;
          },
        }),
        (token) => (token.startsWith('ds_') ? parts.auth.dashboardSession(token) : parts.auth.apiKey(token)).then(Boolean),
      ),
      route: contractRouter({
        contract,
        api: parts.api,
        handlers: parts.handlers,
        security: securityHandlers(parts.auth),
        log,
        disabled: disabledOperations(contract, config),
        idempotency: parts.idempotency,
      }),
    }),
  );
  return app;
}

/** Operator routes need ADMIN_TOKEN; metrics need METRICS_TOKEN or ADMIN_TOKEN. */
function disabledOperations(contract: Contract, config: Config): Set<string> {
  const disabled = new Set<string>();
  for (const [operationId, info] of contract.operations) {
    if (!config.ADMIN_TOKEN && info.tags.includes('Operator')) disabled.add(operationId);
  }
  if (!config.ADMIN_TOKEN && !config.METRICS_TOKEN) disabled.add('getMetrics');
  return disabled;
}
