/**
 * `npm run lint`: the contract must lint clean.
 *  - Spectral with the default OAS and AsyncAPI rulesets plus our rules (.spectral.yaml): no error and
 *    no warning, on the sources and on the served documents (rules turned off say why there)
 *  - redocly lint with its recommended-strict ruleset (redocly.yaml, no exceptions), on the OpenAPI
 *    source and every served document
 *  - the AsyncAPI parser (AsyncAPI 3.0 validity)
 *  - ESLint over the code (eslint.config.js: typescript-eslint, the domains' import boundary)
 *  - Prettier (.prettierrc.json; `npx prettier --write .` formats)
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { Parser, fromFile } from '@asyncapi/parser';

const root = path.resolve(import.meta.dirname, '..');
const bin = (name: string) => path.join(root, 'node_modules/.bin', name);
const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
let failed = false;

function step(name: string, cmd: string, args: string[]): void {
  try {
    const out = execFileSync(cmd, args, { cwd: root, env, stdio: 'pipe' }).toString();
    console.log(`✔ ${name}${out.includes('warning') ? `\n${out.trim()}` : ''}`);
  } catch (err) {
    const e = err as { stdout?: Buffer; stderr?: Buffer };
    console.log(`✖ ${name}\n${e.stdout?.toString() ?? ''}${e.stderr?.toString() ?? ''}`);
    failed = true;
  }
}

step('spectral: openapi (bundle)', bin('spectral'), ['lint', 'generated/openapi.json', '--ruleset', '.spectral.yaml', '--fail-severity', 'warn']);
step('spectral: asyncapi', bin('spectral'), ['lint', 'asyncapi/asyncapi.yaml', '--ruleset', '.spectral.yaml', '--fail-severity', 'warn']);
step('redocly lint', bin('redocly'), ['lint', 'openapi/openapi.yaml', '--format', 'summary']);
// What is served (/openapi.json, /asyncapi.json) is linted too: bundling must not break what the sources got right.
step('spectral: asyncapi (served bundle)', bin('spectral'), ['lint', 'generated/asyncapi.json', '--ruleset', '.spectral.yaml', '--fail-severity', 'warn']);
step('redocly lint (served bundle)', bin('redocly'), ['lint', 'generated/openapi.json', '--format', 'summary']);
step('spectral: openapi (internal bundle)', bin('spectral'), [
  'lint',
  'generated/openapi-internal.json',
  '--ruleset',
  '.spectral.yaml',
  '--fail-severity',
  'warn',
]);
step('redocly lint (internal bundle)', bin('redocly'), ['lint', 'generated/openapi-internal.json', '--format', 'summary']);
step('redocly lint (asyncapi served bundle)', bin('redocly'), ['lint', 'generated/asyncapi.json', '--format', 'summary']);

step('eslint', bin('eslint'), ['.', '--max-warnings', '0']);
step('prettier', bin('prettier'), ['--check', '--log-level', 'warn', '.']);

for (const file of ['asyncapi/asyncapi.yaml', 'generated/asyncapi.json']) {
  const diagnostics = await fromFile(new Parser(), path.join(root, file)).validate();
  const errors = diagnostics.filter((d) => d.severity === 0);
  if (errors.length) {
    failed = true;
    console.log(`✖ asyncapi parser: ${file}\n${errors.map((d) => `  ${d.path.join('.')}: ${d.message}`).join('\n')}`);
  } else {
    console.log(`✔ asyncapi parser: ${file}`);
  }
}
process.exit(failed ? 1 : 0);
