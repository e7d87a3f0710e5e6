/**
 * The Koa app. The order of the pipeline, outermost first:
 * HEAD as GET -> request id -> operation match -> log + metrics -> response contract check -> error envelope -> CORS ->
 * body (parsed by what the matched operation declares) -> contract router.
 */
import Koa from 'koa';
import { koaBody } from 'koa-body';
import type { Logger } from 'pino';
import type { OpenAPIBackend } from 'openapi-backend';
import type { Registry } from 'prom-client';
import { requestId } from './http/request-id.js';
import { headAsGet } from './http/head.js';
import { observe } from './http/observability.js';
import { responseCheck } from './http/response-check.js';
import { errorEnvelope } from './http/envelope.js';
import { corsPolicy } from './http/cors.js';
import { contractRouter } from './http/router.js';
import { matchOperation } from './http/route-match.js';
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
  // Every answer, errors included: browsers never guess a content type other than the one sent.
  app.use(async (ctx, next) => {
    try {
      await next();
    } finally {
      ctx.set('X-Content-Type-Options', 'nosniff');
    }
  });
  app.use(headAsGet()).use(requestId()).use(matchOperation(parts.api, contract)).use(observe(log, parts.metrics));
  // Off (as in production) it would only pass every request on: one layer fewer.
  if (config.contractCheck !== 'off') app.use(responseCheck(contract, config.contractCheck, log, config.CONTRACT_COVERAGE_DIR));
  app
    .use(errorEnvelope(contract, log, config.BODY_LIMIT_BYTES))
    .use(corsPolicy(config.CORS_ORIGINS))
    .use(
      parseBodyByOperation(
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
    )
    .use(
      contractRouter({
        contract,
        api: parts.api,
        handlers: parts.handlers,
        security: securityHandlers(parts.auth),
        log,
        disabled: disabledOperations(contract, config),
        idempotency: parts.idempotency,
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
