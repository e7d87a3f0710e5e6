/** Health, readiness, metrics, the contract documents and the browser SDK (client library and widget). */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
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

/** Built by `npm run build:sdk` (and by npm start and npm test when missing or stale). */
const CLIENT_LIBRARY = path.resolve(generatedDir, '../packages/client/dist/voice-agent-client.js');
const WIDGET = path.resolve(generatedDir, '../packages/widget/dist/voice-agent-widget.js');

interface Bundle {
  source: string;
  etag: string;
}

function loadBundle(file: string): Bundle {
  if (!existsSync(file)) throw new Error(`${file} is missing: run npm run build:sdk`);
  const source = readFileSync(file, 'utf8');
  return { source, etag: `"${createHash('sha256').update(source).digest('hex').slice(0, 32)}"` };
}

/** Whether an If-None-Match header names this ETag (weak comparison, as for GET). */
function notModified(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t.replace(/^W\//, '') === etag;
  });
}

/** A bundle of the browser SDK: any origin may load it, cached briefly, then revalidated by ETag. */
function serveBundle(bundle: Bundle, ifNoneMatch: string | undefined) {
  const headers = {
    ETag: bundle.etag,
    'Cache-Control': 'public, max-age=300',
    'Access-Control-Allow-Origin': '*',
    'Cross-Origin-Resource-Policy': 'cross-origin',
    'X-Content-Type-Options': 'nosniff',
  };
  return notModified(ifNoneMatch, bundle.etag)
    ? { status: 304 as const, body: undefined, headers }
    : { status: 200 as const, body: bundle.source, type: 'text/javascript; charset=utf-8', headers };
}

export function systemRoutes(deps: SystemDeps): Handlers {
  const asyncapi = JSON.parse(readFileSync(path.join(generatedDir, 'asyncapi.json'), 'utf8')) as Record<string, unknown>;
  const docsHtml = readFileSync(path.join(generatedDir, 'docs.html'), 'utf8');
  const asyncDocsHtml = readFileSync(path.join(generatedDir, 'docs-asyncapi.html'), 'utf8');
  const client = loadBundle(CLIENT_LIBRARY);
  const widget = loadBundle(WIDGET);
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
    getClientLibrary: async (req) => serveBundle(client, req.headers['if-none-match']),
    getWidget: async (req) => serveBundle(widget, req.headers['if-none-match']),
  };
}
