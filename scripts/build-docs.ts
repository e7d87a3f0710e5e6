/**
 * Renders the offline references (Redoc, scripts inlined, nothing loaded from a CDN) from the bundles:
 * generated/docs.html from openapi.json (served at /docs), generated/docs-internal.html from
 * openapi-internal.json (/docs/internal: operator, carrier callbacks, system routes as well) and
 * generated/docs-asyncapi.html from asyncapi.json (served at /docs/asyncapi: webhooks, the realtime
 * WebSocket, carrier media streams).
 * `--if-missing` rebuilds only a page older than its bundle (npm start's prestart, npm test).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const generated = path.join(root, 'generated');

export const DOC_PAGES = [
  { source: 'openapi.json', page: 'docs.html', title: 'Voice Agent Calling Service API' },
  { source: 'openapi-internal.json', page: 'docs-internal.html', title: 'Voice Agent Calling Service API (internal)' },
  { source: 'asyncapi.json', page: 'docs-asyncapi.html', title: 'Voice Agent Calling Service: webhooks and WebSockets' },
] as const;

function render(source: string, out: string, title: string): void {
  execFileSync(path.join(root, 'node_modules/.bin/redocly'), ['build-docs', source, '--inlineBundle', '--title', title, '-o', out], {
    cwd: root,
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    stdio: 'pipe',
  });
}

export function buildDocs(opts: { onlyStale?: boolean } = {}): void {
  for (const { source, page, title } of DOC_PAGES) {
    const input = path.join(generated, source);
    const out = path.join(generated, page);
    const fresh = fs.existsSync(out) && fs.statSync(out).mtimeMs >= fs.statSync(input).mtimeMs;
    if (!(opts.onlyStale && fresh)) render(input, out, title);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  buildDocs({ onlyStale: process.argv.includes('--if-missing') });
}
