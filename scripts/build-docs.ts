/** Renders generated/docs.html (the offline API reference) from generated/openapi.json. */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
export function buildDocs(openapiJson = path.join(root, 'generated/openapi.json'), out = path.join(root, 'generated/docs.html')): void {
  execFileSync(path.join(root, 'node_modules/.bin/redocly'), ['build-docs', openapiJson, '--inlineBundle', '--title', 'Voice Agent Calling Service API', '-o', out], {
    cwd: root,
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    stdio: 'pipe',
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const out = path.join(root, 'generated/docs.html');
  const openapi = path.join(root, 'generated/openapi.json');
  const fresh = fs.existsSync(out) && fs.statSync(out).mtimeMs >= fs.statSync(openapi).mtimeMs;
  if (!(process.argv.includes('--if-missing') && fresh)) buildDocs();
}
