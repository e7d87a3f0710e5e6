/**
 * The Koa app. The order of the pipeline, outermost first:
 * request id -> log + metrics -> response contract check -> error envelope -> CORS -> body -> contract router.
 */
import Koa from 'koa';
import { koaBody } from 'koa-body';
import type { Logger } from 'pino';
import type { OpenAPIBackend } from 'openapi-backend';
import type { Registry } from 'prom-client';
import { requestId } from './http/request-id.js';
import { observe } from './http/observability.js';
import { responseCheck } from './http/response-check.js';
import { errorEnvelope } from './http/envelope.js';
import { corsPolicy } from './http/cors.js';
import { contractRouter } from './http/router.js';
import { deferBodyErrors } from './http/deferred-body.js';
import { largeBodies } from './http/upload-body.js';
import { securityHandlers, type Authenticators } from './http/security.js';
import type { Contract } from './http/contract.js';
import type { Handlers } from './http/handler-types.js';
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
  const deferBody = deferBodyErrors(contract);
  app.silent = true;
  app
    .use(requestId())
    .use(observe(log, parts.metrics))
    .use(responseCheck(contract, config.contractCheck, log, config.CONTRACT_COVERAGE_DIR))
    .use(errorEnvelope(contract, log, config.BODY_LIMIT_BYTES))
    .use(corsPolicy(config.CORS_ORIGINS))
    // Documents and batches get their own parsers (larger limits, multipart); every other route this one.
    .use(
      largeBodies(koaBody({
        jsonLimit: config.BODY_LIMIT_BYTES,
        formLimit: config.BODY_LIMIT_BYTES,
        textLimit: config.BODY_LIMIT_BYTES,
        includeUnparsed: true,
        jsonStrict: true,
        onError: (err, ctx) => {
          if (deferBody(ctx)) {
            ctx.state.bodyError = err;
            return;
          }
          // An operation that takes no body ignores whatever was sent, readable or not.
          const operationId = contract.operationFor(ctx.method, ctx.path);
          if (operationId && contract.operations.get(operationId)?.requestContentTypes.length === 0) return;
          throw err;
        },
      }), (token) => (token.startsWith('ds_') ? parts.auth.dashboardSession(token) : parts.auth.apiKey(token)).then(Boolean)),
    )
    .use(contractRouter({ contract, api: parts.api, handlers: parts.handlers, security: securityHandlers(parts.auth), log, disabled: disabledOperations(contract, config), idempotency: parts.idempotency }));
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
