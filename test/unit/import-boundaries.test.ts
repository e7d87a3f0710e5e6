/**
 * The rooms of src/ and the direction of their imports (lint/rooms.js): the whole import graph, read
 * with the TypeScript compiler's own import scanner, runs one way (no room imports a room above it,
 * no two rooms import each other, only the assembly imports the simulators), and ESLint refuses an
 * import that would break it.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { ESLint } from 'eslint';
import { ASSEMBLY, ROOMS, STARTED_ONLY, forbiddenFor, layerOf } from '../../lint/rooms.js';

const root = path.resolve(import.meta.dirname, '../..');
const src = path.join(root, 'src');

/** Room of a file under src/ ('' for the files at its top). */
const roomOf = (file: string) => {
  const rel = path.relative(src, file).split(path.sep);
  return rel.length > 1 ? rel[0] : '';
};

/** Every import edge between rooms: [from file, from room, to room]. */
function edges(): Array<[string, string, string]> {
  const out: Array<[string, string, string]> = [];
  for (const rel of fs.readdirSync(src, { recursive: true }) as string[]) {
    if (!rel.endsWith('.ts')) continue;
    const file = path.join(src, rel);
    const { importedFiles } = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const target = path.resolve(path.dirname(file), fileName);
      if (!target.startsWith(src + path.sep)) continue;
      const from = roomOf(file);
      const to = roomOf(target);
      if (from !== to) out.push([path.relative(root, file), from, to]);
    }
  }
  return out;
}

describe('the import graph of src/', () => {
  const graph = edges();

  it('knows every room', () => {
    const rooms = new Set(graph.flatMap(([, from, to]) => [from, to]).filter(Boolean));
    assert.deepEqual(
      [...rooms].filter((r) => !ROOMS.includes(r) && !r.endsWith('.ts')),
      [],
      'a new folder of src/ belongs in a layer of lint/rooms.js',
    );
  });

  it('runs down the layers: no room imports a room above it or a simulator', () => {
    const wrong = graph.filter(([, from, to]) => ROOMS.includes(from) && forbiddenFor(from).includes(to));
    assert.deepEqual(
      wrong.map(([file, , to]) => `${file} -> ${to}`),
      [],
    );
  });

  it('has no two rooms that import each other, directly or round about', () => {
    const next = new Map<string, Set<string>>();
    for (const [, from, to] of graph) if (ROOMS.includes(from) && ROOMS.includes(to)) next.set(from, (next.get(from) ?? new Set()).add(to));
    const reaches = (a: string, b: string, seen = new Set<string>()): boolean =>
      [...(next.get(a) ?? [])].some((n) => n === b || (!seen.has(n) && (seen.add(n), reaches(n, b, seen))));
    const cycles = ROOMS.filter((r) => reaches(r, r));
    assert.deepEqual(cycles, []);
  });

  it('lets only the assembly start the simulators', () => {
    const importers = graph.filter(([, , to]) => STARTED_ONLY.includes(to)).map(([file, from]) => (from ? file : path.basename(file)));
    assert.deepEqual(
      importers.filter((f) => !ASSEMBLY.includes(f)),
      [],
    );
  });

  it('layers every room exactly once', () => {
    for (const room of ROOMS) assert.notEqual(layerOf(room), -1);
    assert.equal(new Set(ROOMS).size, ROOMS.length);
  });
});

describe('ESLint keeps the rooms', () => {
  const eslint = new ESLint({ cwd: root });
  const lint = async (filePath: string, text: string) => (await eslint.lintText(text, { filePath }))[0].messages.map((m) => m.ruleId);

  it('refuses a carrier that imports a call, the database or a web framework', async () => {
    assert.deepEqual(await lint('src/carriers/x.ts', "import { CallStore } from '../calls/store.js';\nexport const a = CallStore;\n"), [
      'no-restricted-imports',
    ]);
    assert.deepEqual(await lint('src/carriers/provider-a/x.ts', "import knex from 'knex';\nexport const a = knex;\n"), ['no-restricted-imports']);
    assert.deepEqual(await lint('src/carriers/x.ts', "import { a } from '../agents/service.js';\nexport const b = a;\n"), ['no-restricted-imports']);
  });

  it('refuses a domain that imports the simulators, a room above it, or the HTTP layer outside its routes', async () => {
    assert.deepEqual(await lint('src/calls/x.ts', "import { s } from '../sandbox/index.js';\nexport const a = s;\n"), ['no-restricted-imports']);
    assert.deepEqual(await lint('src/calls/live/x.ts', "import { b } from '../../batches/engine.js';\nexport const a = b;\n"), ['no-restricted-imports']);
    assert.deepEqual(await lint('src/http/x.ts', "import { w } from '../workspaces/service.js';\nexport const a = w;\n"), ['no-restricted-imports']);
    assert.deepEqual(await lint('src/calls/service.ts', "import { r } from '../http/router.js';\nexport const a = r;\n"), ['no-restricted-imports']);
  });

  it('allows imports that run down', async () => {
    assert.deepEqual(await lint('src/calls/x.ts', "import { c } from '../carriers/carrier.js';\nexport const a = c;\n"), []);
    assert.deepEqual(await lint('src/calls/routes.ts', "import { r } from '../http/router.js';\nexport const a = r;\n"), []);
    assert.deepEqual(await lint('src/sandbox/carriers/x.ts', "import { s } from '../../carriers/provider-a/signature.js';\nexport const a = s;\n"), []);
  });
});
