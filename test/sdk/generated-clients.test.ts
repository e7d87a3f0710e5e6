/**
 * The contract as client teams use it: SDKs generated from what the service serves at /openapi.json
 * (generated/openapi.json) and /asyncapi.json, with each generator's default options.
 *  - openapi-typescript (+ openapi-fetch), @hey-api/openapi-ts (its fetch client) and orval (its fetch
 *    client) each generate a client; so do oazapfts, swagger-typescript-api and Kubb (types, zod
 *    schemas and its fetch client), and openapi-zod-client its zod schemas; @asyncapi/modelina
 *    generates the AsyncAPI message payloads in TypeScript, Python, Java, Go and C#;
 *  - no generated file has `Record<string, never>` (an object type nothing can be assigned to);
 *  - all of it, with one realistic program per OpenAPI generator (test/sdk/programs/) and, per
 *    generator, the values the service sends and takes assigned to its types (programs/typed-values.ts:
 *    nullable value sets keep `null`, "any JSON value" takes any, variables take scalars), compiles in
 *    one `tsc --strict` run;
 *  - the zod schemas of Kubb and openapi-zod-client accept every example of the document;
 *  - Modelina names every model (no `AnonymousSchema_N`) in every language, uses a dynamic type
 *    (`Any`, `Object`, `interface{}`, `dynamic`) only where the document says "any JSON value" (or for
 *    the open objects' other properties, or a union of scalars in a language without unions), and its
 *    Java and Python compile where `javac` and `python3` are on the machine;
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
import {
  ConstrainedAnyModel,
  ConstrainedArrayModel,
  ConstrainedBooleanModel,
  ConstrainedDictionaryModel,
  ConstrainedFloatModel,
  ConstrainedIntegerModel,
  ConstrainedObjectModel,
  ConstrainedReferenceModel,
  ConstrainedStringModel,
  ConstrainedUnionModel,
  CSharpFileGenerator,
  GoFileGenerator,
  JavaFileGenerator,
  PythonFileGenerator,
  TypeScriptFileGenerator,
  type ConstrainedMetaModel,
  type OutputModel,
} from '@asyncapi/modelina';
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
/** Generators whose output is compiled and checked, without a program run against the service. */
const TYPE_GENERATORS = ['oazapfts', 'openapi-zod-client', 'swagger-typescript-api', 'kubb'] as const;
/**
 * How typed-values.ts reaches a component's type in each generator's output: the import line, and
 * the type expression for a component name.
 */
const TYPE_ACCESS: Record<(typeof GENERATORS)[number] | (typeof TYPE_GENERATORS)[number], { file: string; imports: string; type: (n: string) => string }> = {
  'openapi-fetch': { file: 'typed-values.ts', imports: "import type { components } from './schema.js';", type: (n) => `components['schemas']['${n}']` },
  'hey-api': { file: 'typed-values.ts', imports: "import type * as api from './client/types.gen.js';", type: (n) => `api.${n}` },
  orval: { file: 'typed-values.ts', imports: "import type * as api from './api.js';", type: (n) => `api.${n}` },
  oazapfts: { file: 'typed-values.ts', imports: "import type * as api from './api.js';", type: (n) => `api.${n}` },
  'openapi-zod-client': {
    file: 'typed-values.ts',
    imports: "import type { z } from 'zod/v3';\nimport type { schemas } from './api.js';",
    type: (n) => `z.infer<typeof schemas.${n}>`,
  },
  'swagger-typescript-api': { file: 'typed-values.ts', imports: "import type * as api from './api.js';", type: (n) => `api.${n}` },
  kubb: { file: 'typed-values.ts', imports: "import type * as api from './types/index.js';", type: (n) => `api.${n}` },
};
const TYPED_COMPONENTS = ['ToolCallRecord', 'Call', 'WebhookDelivery', 'CallCreateRequest', 'BatchRecipientInput', 'ErrorBody'];
const MODELINA_LANGUAGES = ['python', 'java', 'go', 'csharp'] as const;
/** A dynamic type in each language's rendering of a property type. */
const DYNAMIC: Record<(typeof MODELINA_LANGUAGES)[number] | 'typescript', RegExp> = {
  typescript: /\b(any|unknown)\b/,
  python: /\bAny\b/,
  java: /\bObject\b/,
  go: /interface\{\}|\bany\b/,
  csharp: /\bdynamic\b|\bobject\b/,
};
const modelina: Partial<Record<(typeof MODELINA_LANGUAGES)[number] | 'typescript', OutputModel[]>> = {};

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
  for (const g of TYPE_GENERATORS) fs.mkdirSync(path.join(dir, g), { recursive: true });
  // Kubb's documented set-up: its OpenAPI reader, TypeScript types, zod schemas and its fetch client.
  fs.writeFileSync(
    path.join(dir, 'kubb.config.mjs'),
    [
      "import { defineConfig } from '@kubb/core';",
      "import { pluginOas } from '@kubb/plugin-oas';",
      "import { pluginTs } from '@kubb/plugin-ts';",
      "import { pluginZod } from '@kubb/plugin-zod';",
      "import { pluginClient } from '@kubb/plugin-client';",
      `export default defineConfig({ input: { path: ${JSON.stringify(OPENAPI)} }, output: { path: './kubb', clean: true, format: false },`,
      "  plugins: [pluginOas(), pluginTs(), pluginZod(), pluginClient({ client: 'fetch' })] });",
      '',
    ].join('\n'),
  );
  const asyncapi = JSON.parse(fs.readFileSync(ASYNCAPI, 'utf8'));
  const typescriptModels = new TypeScriptFileGenerator({ modelType: 'interface', enumType: 'union', rawPropertyNames: true });
  const zodClient = path.join(dir, 'openapi-zod-client/api.ts');
  await Promise.all([
    run(bin('openapi-typescript'), [OPENAPI, '-o', path.join(dir, 'openapi-fetch/schema.d.ts')], { cwd: dir, env }),
    run(bin('openapi-ts'), ['-i', OPENAPI, '-o', path.join(dir, 'hey-api/client'), '-c', '@hey-api/client-fetch'], { cwd: dir, env }),
    run(bin('orval'), ['--config', path.join(dir, 'orval/orval.config.cjs')], { cwd: dir, env }),
    run(bin('oazapfts'), [OPENAPI, path.join(dir, 'oazapfts/api.ts')], { cwd: dir, env }),
    // Its schemas-only template: the default template's client is Zodios, which needs zod 3 installed
    // beside the project's zod 4; the schemas are the same in every template.
    run(
      bin('openapi-zod-client'),
      [OPENAPI, '-o', zodClient, '-t', path.join(root, 'node_modules/openapi-zod-client/src/templates/schemas-only.hbs'), '--export-schemas'],
      {
        cwd: dir,
        env,
      },
    ),
    run(bin('swagger-typescript-api'), ['generate', '-p', OPENAPI, '-o', path.join(dir, 'swagger-typescript-api'), '-n', 'api.ts'], { cwd: dir, env }),
    run(bin('kubb'), ['generate', '--config', path.join(dir, 'kubb.config.mjs')], { cwd: dir, env }),
    typescriptModels.generateToFiles(asyncapi, path.join(dir, 'modelina'), { exportType: 'named' }, true).then((m) => (modelina.typescript = m)),
    new PythonFileGenerator().generateToFiles(asyncapi, path.join(dir, 'modelina-python'), { packageName: 'voice' }, true).then((m) => (modelina.python = m)),
    new JavaFileGenerator()
      .generateToFiles(asyncapi, path.join(dir, 'modelina-java/com/example/voice'), { packageName: 'com.example.voice' }, true)
      .then((m) => (modelina.java = m)),
    new GoFileGenerator().generateToFiles(asyncapi, path.join(dir, 'modelina-go'), { packageName: 'voice' }, true).then((m) => (modelina.go = m)),
    new CSharpFileGenerator()
      .generateToFiles(asyncapi, path.join(dir, 'modelina-csharp'), { namespace: 'Voice.Agent' }, true)
      .then((m) => (modelina.csharp = m)),
  ]);
  // openapi-zod-client 1.18 writes zod 3 code; zod 4, the project's, ships zod 3 as `zod/v3`.
  fs.writeFileSync(zodClient, fs.readFileSync(zodClient, 'utf8').replace(/from "zod";/g, 'from "zod/v3";'));
  for (const g of GENERATORS) fs.copyFileSync(path.join(programs, `${g}.ts`), path.join(dir, g, 'program.ts'));
  const typedValues = fs.readFileSync(path.join(programs, 'typed-values.ts'), 'utf8');
  for (const [g, access] of Object.entries(TYPE_ACCESS)) {
    const types = TYPED_COMPONENTS.map((n) => `type ${n} = ${access.type(n)};`).join('\n');
    fs.writeFileSync(
      path.join(dir, g, access.file),
      typedValues.replace("import type * as api from './api.js';", access.imports).replace(/^\/\/ types:[\s\S]*?^\/\/ end types$/m, types),
    );
  }
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
          // DOM.Iterable: orval 8's fetch client copies a response's headers with `headers.entries()`.
          lib: ['ES2022', 'DOM', 'DOM.Iterable'],
          types: ['node'],
          skipLibCheck: true,
          // Kubb's files import each other as `./x.ts`.
          allowImportingTsExtensions: true,
        },
        include: [...GENERATORS.map((g) => `${g}/**/*.ts`), ...TYPE_GENERATORS.map((g) => `${g}/**/*.ts`), 'kubb/**/*.ts', 'modelina/**/*.ts'],
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
    .filter((f) => f.endsWith('.ts') && !f.endsWith('program.ts') && !f.endsWith('fetcher.ts') && !f.endsWith('typed-values.ts'))
    .map((f) => path.join(sub, f));
}

describe('SDKs generated from the served documents', () => {
  it('every generator wrote its client, and the payload models', () => {
    assert.ok(fs.existsSync(path.join(dir, 'openapi-fetch/schema.d.ts')));
    assert.ok(fs.existsSync(path.join(dir, 'hey-api/client/sdk.gen.ts')));
    assert.ok(fs.existsSync(path.join(dir, 'orval/api.ts')));
    assert.ok(fs.existsSync(path.join(dir, 'oazapfts/api.ts')));
    assert.match(fs.readFileSync(path.join(dir, 'openapi-zod-client/api.ts'), 'utf8'), /export const schemas = \{/);
    assert.ok(fs.existsSync(path.join(dir, 'swagger-typescript-api/api.ts')));
    for (const sub of ['types', 'zod', 'clients']) assert.ok(fs.existsSync(path.join(dir, 'kubb', sub)), `kubb wrote ${sub}/`);
    const models = fs.readdirSync(path.join(dir, 'modelina'));
    for (const m of ['CallCompletedEvent.ts', 'BatchCompletedEvent.ts', 'RealtimeClientMessage.ts', 'RealtimeSessionStarted.ts'])
      assert.ok(models.includes(m), `modelina wrote ${m}: ${models.join(', ')}`);
    for (const lang of MODELINA_LANGUAGES)
      for (const m of ['CallCompletedEvent', 'ToolCallRecord', 'RealtimeSessionStarted'])
        assert.ok(
          modelina[lang]?.some((o) => o.modelName === m),
          `modelina wrote ${m} in ${lang}`,
        );
  });

  it('no generated type is Record<string, never>', () => {
    const found: string[] = [];
    for (const sub of [...GENERATORS, ...TYPE_GENERATORS, 'kubb', 'modelina']) {
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

  it('the zod schemas of Kubb and openapi-zod-client accept every example of the document', async () => {
    const script = path.join(dir, 'parse-examples.ts');
    fs.writeFileSync(
      script,
      [
        "import fs from 'node:fs';",
        "import * as kubb from './kubb/zod/index.ts';",
        "import { schemas } from './openapi-zod-client/api.ts';",
        `const doc = JSON.parse(fs.readFileSync(${JSON.stringify(OPENAPI)}, 'utf8'));`,
        'const examples: Array<[string, unknown, string]> = [];',
        'for (const [name, schema] of Object.entries<any>(doc.components.schemas))',
        "  for (const ex of [...(schema.examples ?? []), ...(schema.example === undefined ? [] : [schema.example])]) examples.push([name, ex, 'component']);",
        'for (const [p, item] of Object.entries<any>(doc.paths)) for (const [m, op] of Object.entries<any>(item)) for (const [status, r] of Object.entries<any>(op?.responses ?? {})) {',
        "  const media = r.content?.['application/json']; const ref = media?.schema?.$ref as string | undefined;",
        "  if (!ref?.startsWith('#/components/schemas/')) continue;",
        "  const name = ref.split('/').pop()!;",
        '  for (const ex of [...(media.example === undefined ? [] : [media.example]), ...Object.values<any>(media.examples ?? {}).map((e) => e.value)]) examples.push([name, ex, `${m.toUpperCase()} ${p} ${status}`]);',
        '}',
        'const problems: string[] = [];',
        'let parsed = 0;',
        'for (const [name, ex, where] of examples) {',
        '  const k = (kubb as any)[`${name[0].toLowerCase()}${name.slice(1)}Schema`];',
        '  const z = (schemas as any)[name];',
        "  for (const [gen, schema] of [['kubb', k], ['openapi-zod-client', z]] as const) {",
        '    if (!schema) continue;',
        '    const r = schema.safeParse(ex);',
        '    parsed += 1;',
        '    if (!r.success) problems.push(`${gen} ${name} (${where}): ${JSON.stringify(r.error.issues).slice(0, 300)}`);',
        '  }',
        '}',
        'console.log(JSON.stringify({ parsed, problems }));',
        '',
      ].join('\n'),
    );
    const res = await run(process.execPath, ['--import', 'tsx', script], { cwd: dir, env: { ...process.env, NODE_OPTIONS: '' } });
    const { parsed, problems } = JSON.parse(res.stdout.trim().split('\n').pop()!) as { parsed: number; problems: string[] };
    assert.ok(parsed > 100, `parsed ${parsed} examples`);
    assert.deepEqual(problems, []);
  });

  it('Modelina names every model and is dynamic only where the document says any JSON value', () => {
    const anonymous: string[] = [];
    const dynamic: string[] = [];
    for (const [lang, models] of Object.entries(modelina) as Array<[keyof typeof DYNAMIC, OutputModel[]]>) {
      for (const m of models) {
        if (/anonymous/i.test(m.modelName)) anonymous.push(`${lang}: ${m.modelName}`);
        if (!(m.model instanceof ConstrainedObjectModel)) continue;
        for (const [name, p] of Object.entries(m.model.properties)) {
          if (DYNAMIC[lang].test(p.property.type) && !dynamicAllowed(p.property, lang)) dynamic.push(`${lang}: ${m.modelName}.${name}: ${p.property.type}`);
        }
      }
    }
    assert.deepEqual(anonymous, [], 'models named after the document');
    assert.deepEqual(dynamic, [], 'dynamic types only where the document is not precise');
  });

  it('the Java and Python models compile', async (ctx) => {
    const javac = await run('javac', ['-version']).then(
      () => true,
      () => false,
    );
    if (javac) {
      const sources = fs.readdirSync(path.join(dir, 'modelina-java/com/example/voice')).map((f) => path.join(dir, 'modelina-java/com/example/voice', f));
      const res = await run('javac', ['-d', path.join(dir, 'java-classes'), ...sources]).catch((e: { stdout?: string; stderr?: string }) => e);
      assert.equal(`${res.stdout ?? ''}${res.stderr ?? ''}`.trim(), '');
    } else ctx.diagnostic('no javac on this machine: the Java models were checked as text only');
    const python = fs.readdirSync(path.join(dir, 'modelina-python')).map((f) => path.join(dir, 'modelina-python', f));
    const res = await run('python3', ['-m', 'py_compile', ...python]).catch((e: { stdout?: string; stderr?: string; code?: string }) => e);
    if ((res as { code?: string }).code === 'ENOENT') ctx.diagnostic('no python3 on this machine: the Python models were checked as text only');
    else assert.equal(`${res.stdout ?? ''}${res.stderr ?? ''}`.trim(), '');
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

const SCALARS = [ConstrainedStringModel, ConstrainedFloatModel, ConstrainedIntegerModel, ConstrainedBooleanModel];

/**
 * Whether a dynamic type is what the document says: "any JSON value" (a schema with no type), the
 * other properties of an open object (Modelina's `additionalProperties` member), or a union of JSON
 * scalars (`VariableValue`) in a language with no union types.
 */
function dynamicAllowed(model: ConstrainedMetaModel, lang: keyof typeof DYNAMIC): boolean {
  if (model instanceof ConstrainedReferenceModel) return dynamicAllowed(model.ref, lang);
  if (model instanceof ConstrainedDictionaryModel) return dynamicAllowed(model.value, lang);
  if (model instanceof ConstrainedArrayModel) return dynamicAllowed(model.valueModel, lang);
  if (model instanceof ConstrainedUnionModel) return ['java', 'go', 'csharp'].includes(lang) && model.union.every((u) => SCALARS.some((S) => u instanceof S));
  if (model instanceof ConstrainedAnyModel) {
    const input = model.originalInput as unknown;
    if (input === true || (Array.isArray(input) && input.every((x) => x === true))) return true;
    const schema = (input && typeof input === 'object' ? ((input as { originalInput?: unknown }).originalInput ?? input) : input) as Record<string, unknown>;
    return !['type', '$ref', 'anyOf', 'oneOf', 'allOf', 'enum', 'const', 'properties', 'items'].some((k) => k in schema);
  }
  return !DYNAMIC[lang].test(model.type);
}
