/** Health, readiness, metrics and the contract documents. */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Knex } from 'knex';
import type { Registry } from 'prom-client';
import type { Handlers } from '../http/handler-types.js';
import { generatedDir } from '../http/contract.js';
import { serviceUnavailable } from '../http/errors.js';

export interface SystemDeps {
  db: Knex;
  metrics: Registry;
  openapi: unknown;
  isShuttingDown(): boolean;
}

export function systemRoutes(deps: SystemDeps): Handlers {
  const asyncapi = JSON.parse(readFileSync(path.join(generatedDir, 'asyncapi.json'), 'utf8')) as Record<string, unknown>;
  const docsHtml = readFileSync(path.join(generatedDir, 'docs.html'), 'utf8');
  const asyncDocsHtml = readFileSync(path.join(generatedDir, 'docs-asyncapi.html'), 'utf8');
  return {
    getHealth: async () => ({ status: 200, body: { status: 'ok' } }),
    getReadiness: async () => {
      let database: 'ok' | 'failing' = 'ok';
      try {
        await deps.db.raw('select 1');
      } catch {
        database = 'failing';
      }
      const ready = database === 'ok' && !deps.isShuttingDown();
      if (!ready) throw serviceUnavailable(deps.isShuttingDown() ? 'Not ready: shutting down.' : `Not ready: database ${database}.`, 'not_ready');
      return { status: 200, body: { status: 'ok', checks: { database } } };
    },
    getMetrics: async () => ({ status: 200, body: await deps.metrics.metrics(), type: deps.metrics.contentType }),
    getOpenApiDocument: async () => ({ status: 200, body: deps.openapi as never }),
    getAsyncApiDocument: async () => ({ status: 200, body: asyncapi as never }),
    getApiReference: async () => ({ status: 200, body: docsHtml, type: 'text/html; charset=utf-8' }),
    getAsyncApiReference: async () => ({ status: 200, body: asyncDocsHtml, type: 'text/html; charset=utf-8' }),
  };
}
