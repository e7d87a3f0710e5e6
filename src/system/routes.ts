/** Health, readiness, metrics, the contract documents, the browser SDK (client library and widget) and the dashboard. */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Knex } from 'knex';
import type { Registry } from 'prom-client';
import type { Handlers } from '../contract/handlers.js';
import { asyncapiDocument, generatedDir, internalOpenapiDocument, openapiDocument, rootDir } from '../contract/documents.js';
import { serviceUnavailable } from '../errors/api-error.js';
import { dashboardPolicy, referencePolicy } from './page-policies.js';

export interface SystemDeps {
  db: Knex;
  /** The service's public URL (its origin is the one the dashboard may connect to), known once it listens. */
  publicBaseUrl(): string;
  metrics: Registry;
  isShuttingDown(): boolean;
}

/** Built by `npm run build:sdk` (and by npm start and npm test when missing or stale). */
const CLIENT_LIBRARY = path.join(rootDir, 'packages/client/dist/voice-agent-client.js');
const WIDGET = path.join(rootDir, 'packages/widget/dist/voice-agent-widget.js');
const DASHBOARD = path.join(rootDir, 'apps/dashboard');

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

/** A built file: cached briefly, then revalidated by ETag. */
function serveBuilt(bundle: Bundle, ifNoneMatch: string | undefined, type: string, extraHeaders: Record<string, string> = {}) {
  const headers = { ETag: bundle.etag, 'Cache-Control': 'public, max-age=300', 'X-Content-Type-Options': 'nosniff', ...extraHeaders };
  return notModified(ifNoneMatch, bundle.etag)
    ? { status: 304 as const, body: undefined, headers }
    : { status: 200 as const, body: bundle.source, type, headers };
}

/** A bundle of the browser SDK: any origin may load it. */
const serveSdkBundle = (bundle: Bundle, ifNoneMatch: string | undefined) =>
  serveBuilt(bundle, ifNoneMatch, 'text/javascript; charset=utf-8', {
    'Access-Control-Allow-Origin': '*',
    'Cross-Origin-Resource-Policy': 'cross-origin',
  });

/** A rendered API reference and its headers: its own inline scripts only, never framed. */
function loadReference(file: string) {
  const body = readFileSync(path.join(generatedDir, file), 'utf8');
  const headers = { 'Content-Security-Policy': referencePolicy(body), 'X-Frame-Options': 'DENY' };
  return async () => ({ status: 200 as const, body, type: 'text/html; charset=utf-8', headers });
}

export function systemRoutes(deps: SystemDeps): Handlers {
  const client = loadBundle(CLIENT_LIBRARY);
  const widget = loadBundle(WIDGET);
  const dashboardScript = loadBundle(path.join(DASHBOARD, 'dist/app.js'));
  const dashboardStyles = loadBundle(path.join(DASHBOARD, 'dist/app.css'));
  const dashboardHtml = readFileSync(path.join(DASHBOARD, 'index.html'), 'utf8');
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
    getOpenApiDocument: async () => ({ status: 200, body: openapiDocument() as never }),
    getInternalOpenApiDocument: async () => ({ status: 200, body: internalOpenapiDocument() as never }),
    getInternalApiReference: loadReference('docs-internal.html'),
    getAsyncApiDocument: async () => ({ status: 200, body: asyncapiDocument() as never }),
    getApiReference: loadReference('docs.html'),
    getAsyncApiReference: loadReference('docs-asyncapi.html'),
    getClientLibrary: async (req) => serveSdkBundle(client, req.headers['if-none-match']),
    getWidget: async (req) => serveSdkBundle(widget, req.headers['if-none-match']),
    getDashboard: async () => ({
      status: 200,
      body: dashboardHtml,
      type: 'text/html; charset=utf-8',
      headers: {
        'Content-Security-Policy': dashboardPolicy(deps.publicBaseUrl()),
        'Cache-Control': 'no-cache',
        'X-Frame-Options': 'DENY',
        'Referrer-Policy': 'no-referrer',
      },
    }),
    getDashboardScript: async (req) => serveBuilt(dashboardScript, req.headers['if-none-match'], 'text/javascript; charset=utf-8'),
    getDashboardStyles: async (req) => serveBuilt(dashboardStyles, req.headers['if-none-match'], 'text/css; charset=utf-8'),
  };
}
