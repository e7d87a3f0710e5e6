/**
 * The contract as client teams use it: SDKs generated from what the service serves at /openapi.json
 * (generated/openapi.json) and /asyncapi.json, with each generator's default options.
 *  - openapi-typescript (+ openapi-fetch), @hey-api/openapi-ts (its fetch client) and orval (its fetch
 *    client) each generate a client; @asyncapi/modelina generates the AsyncAPI message payloads;
 *  - no generated file has `Record<string, never>` (an object type nothing can be assigned to);
 *  - all of it, with one realistic program per OpenAPI generator (test/sdk/programs/), compiles in one
 *    `tsc --strict` run;
 *  - each program runs against a live service and does what a client team does: signs up, creates a
 *    key, an agent with a provider config and a partial voicemail config, pages through agents,
 *    registers a webhook, uploads a document as a file, tests a tool with arguments, places a call
 *    in which the agent calls that tool and reads the call's tool-call arguments, and creates a
 *    realtime session.
 * Everything is generated into a temporary directory (docs/generating-a-client.md has the same
 * commands). `npm run sdk:check` runs this file alone.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { TypeScriptFileGenerator } from '@asyncapi/modelina';
import { startTestService, type TestService } from '../helpers/service.js';
import { startHttpPeer, type HttpPeer } from '../helpers/http-peer.js';
import { FAST_CALLS, sandboxNumber } from '../helpers/calls.js';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');
const OPENAPI = path.join(root, 'generated/openapi.json');
const ASYNCAPI = path.join(root, 'generated/asyncapi.json');
const bin = (name: string) => path.join(root, 'node_modules/.bin', name);
const programs = path.join(import.meta.dirname, 'programs');
const GENERATORS = ['openapi-fetch', 'hey-api', 'orval'] as const;

/** openapi-typescript always declares the document's root `$defs` (OpenAPI has none there) as an empty record; it types no schema. */
const ROOT_DEFS = 'export type $defs = Record<string, never>;';

let dir: string;
let t: TestService;
let peer: HttpPeer;

async function generate(): Promise<void> {
  const env = { ...process.env, NODE_OPTIONS: '' };
  for (const g of GENERATORS) fs.mkdirSync(path.join(dir, g), { recursive: true });
  fs.copyFileSync(path.join(programs, 'orval-fetcher.ts'), path.join(dir, 'orval/fetcher.ts'));
  fs.writeFileSync(
    path.join(dir, 'orval/orval.config.cjs'),
    `module.exports = ${JSON.stringify({
      api: {
        input: { target: OPENAPI },
        output: {
          target: path.join(dir, 'orval/api.ts'),
          client: 'fetch',
          mode: 'single',
          override: { mutator: { path: path.join(dir, 'orval/fetcher.ts'), name: 'customFetch' } },
        },
      },
    })};\n`,
  );
  const modelina = new TypeScriptFileGenerator({ modelType: 'interface', enumType: 'union', rawPropertyNames: true });
  await Promise.all([
    run(bin('openapi-typescript'), [OPENAPI, '-o', path.join(dir, 'openapi-fetch/schema.d.ts')], { cwd: dir, env }),
    run(bin('openapi-ts'), ['-i', OPENAPI, '-o', path.join(dir, 'hey-api/client'), '-c', '@hey-api/client-fetch'], { cwd: dir, env }),
    run(bin('orval'), ['--config', path.join(dir, 'orval/orval.config.cjs')], { cwd: dir, env }),
    modelina.generateToFiles(JSON.parse(fs.readFileSync(ASYNCAPI, 'utf8')), path.join(dir, 'modelina'), { exportType: 'named' }, true),
  ]);
  for (const g of GENERATORS) fs.copyFileSync(path.join(programs, `${g}.ts`), path.join(dir, g, 'program.ts'));
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sdk-check-'));
  // The generated code and the programs resolve openapi-fetch, tsx and @types/node from the project.
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  fs.writeFileSync(path.join(dir, 'package.json'), '{ "private": true, "type": "module" }\n');
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify(
      {
        compilerOptions: {
          strict: true,
          noEmit: true,
          target: 'ES2022',
          module: 'ESNext',
          moduleResolution: 'Bundler',
          lib: ['ES2022', 'DOM'],
          types: ['node'],
          skipLibCheck: true,
        },
        include: [...GENERATORS.map((g) => `${g}/**/*.ts`), 'modelina/**/*.ts'],
      },
      null,
      2,
    ),
  );
  [t, peer] = await Promise.all([
    startTestService(FAST_CALLS),
    startHttpPeer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ order: 'A-42', status: 'shipped yesterday' }));
    }),
    generate(),
  ]);
});

after(async () => {
  await Promise.all([t?.close(), peer?.close()]);
  if (dir && !process.env.SDK_CHECK_KEEP) fs.rmSync(dir, { recursive: true, force: true });
});

function generatedFiles(sub: string): string[] {
  return (fs.readdirSync(path.join(dir, sub), { recursive: true }) as string[])
    .filter((f) => f.endsWith('.ts') && !f.endsWith('program.ts') && !f.endsWith('fetcher.ts'))
    .map((f) => path.join(sub, f));
}

describe('SDKs generated from the served documents', () => {
  it('every generator wrote its client, and the payload models', () => {
    assert.ok(fs.existsSync(path.join(dir, 'openapi-fetch/schema.d.ts')));
    assert.ok(fs.existsSync(path.join(dir, 'hey-api/client/sdk.gen.ts')));
    assert.ok(fs.existsSync(path.join(dir, 'orval/api.ts')));
    const models = fs.readdirSync(path.join(dir, 'modelina'));
    for (const m of ['CallCompletedEvent.ts', 'BatchCompletedEvent.ts', 'RealtimeClientMessage.ts', 'RealtimeSessionStarted.ts'])
      assert.ok(models.includes(m), `modelina wrote ${m}: ${models.join(', ')}`);
  });

  it('no generated type is Record<string, never>', () => {
    const found: string[] = [];
    for (const sub of [...GENERATORS, 'modelina']) {
      for (const f of generatedFiles(sub)) {
        fs.readFileSync(path.join(dir, f), 'utf8')
          .split('\n')
          .forEach((line, i) => {
            if (line.includes('Record<string, never>') && line.trim() !== ROOT_DEFS) found.push(`${f}:${i + 1}: ${line.trim()}`);
          });
      }
    }
    assert.deepEqual(found, []);
  });

  it('the generated code and the programs compile with tsc --strict', async () => {
    const res = await run(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', path.join(dir, 'tsconfig.json'), '--strict'], {
      cwd: dir,
    }).catch((e: { stdout?: string; stderr?: string }) => e);
    assert.equal(`${res.stdout ?? ''}${res.stderr ?? ''}`.trim(), '');
  });

  it('each program runs against the service and sees what it asked for', async () => {
    const sandbox = t.service.sandbox.carriers!.server;
    const outputs = await Promise.all(
      GENERATORS.map(async (g) => {
        const to = sandboxNumber();
        sandbox.setScript(to, [
          { waitForAgent: true },
          { say: 'Please run check_order for A-42.' },
          { waitForAgent: true },
          { say: 'Great, goodbye.' },
          { waitForAgent: true },
          { hangup: true },
        ]);
        const env = { ...process.env, NODE_OPTIONS: '', BASE_URL: t.url, TOOL_URL: peer.url, TO_NUMBER: to };
        const res = await run(process.execPath, ['--import', 'tsx', path.join(dir, g, 'program.ts')], { cwd: dir, env, timeout: 60_000 }).catch(
          (e: { stdout?: string; stderr?: string; message: string }) => {
            throw new Error(`${g} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
          },
        );
        return JSON.parse(res.stdout.trim().split('\n').pop()!) as Record<string, any>;
      }),
    );
    for (const [i, out] of outputs.entries()) {
      const g = GENERATORS[i];
      assert.equal(out.generator, g);
      assert.match(out.key_prefix, /^ek_/, g);
      assert.equal(out.tool_test_ok, true, g);
      assert.deepEqual(out.voicemail, { enabled: true, message: null, detection_timeout_seconds: null, retry_on_voicemail: true }, g);
      assert.deepEqual([out.agents, out.pages], [3, 2], `${g}: three agents on two pages of two`);
      assert.match(out.webhook_id, /^whk_/, g);
      assert.deepEqual(out.document, { name: 'Opening hours', content_type: 'text/plain', status: 'ready' }, g);
      assert.equal(out.call_status, 'completed', g);
      assert.equal(out.listed_call, true, g);
      assert.deepEqual(out.tool_call_arguments, { order_id: 'A-42' }, g);
      assert.equal(out.order_id, 'A-42', g);
      assert.equal(out.realtime_token, true, g);
    }
  });
});
