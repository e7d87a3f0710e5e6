/**
 * The rooms of src/ and the direction of their imports (lint/rooms.js): the whole import graph, read
 * with the TypeScript compiler's own import scanner, runs one way (no room imports a room above it,
 * no two rooms import each other, only the assembly imports the simulators), and ESLint refuses an
 * import that would break it. Within and across rooms, no file imports itself round about (type-only
 * imports included: a loop closed by types still ties the files' changes together).
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

/** Every import between files of src/ (type-only ones included): [from file, to file], absolute .ts paths. */
function fileEdges(): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const rel of fs.readdirSync(src, { recursive: true }) as string[]) {
    if (!rel.endsWith('.ts')) continue;
    const file = path.join(src, rel);
    const { importedFiles } = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const target = path.resolve(path.dirname(file), fileName).replace(/\.js$/, '.ts');
      if (target.startsWith(src + path.sep)) out.push([file, target]);
    }
  }
  return out;
}

/** Every import edge between rooms: [from file, from room, to room]. */
function edges(): Array<[string, string, string]> {
  return fileEdges()
    .map(([file, target]): [string, string, string] => [path.relative(root, file), roomOf(file), roomOf(target)])
    .filter(([, from, to]) => from !== to);
}

/** The groups of files that import one another round about (strongly connected, Tarjan's algorithm), each sorted. */
function importLoops(pairs: Array<[string, string]>): string[][] {
  const next = new Map<string, string[]>();
  for (const [a, b] of pairs) next.set(a, [...(next.get(a) ?? []), b]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const loops: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const group: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      group.push(w);
    } while (w !== v);
    if (group.length > 1 || (next.get(v) ?? []).includes(v)) loops.push(group.sort());
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return loops;
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

  it('has no files that import each other, directly or round about, type-only imports included', () => {
    const loops = importLoops(fileEdges()).map((group) => group.map((f) => path.relative(src, f)).join(' <-> '));
    assert.deepEqual(loops, [], 'move what the files share into a small file of its own');
  });

  it('finds an import loop, one closed by a type-only import included', () => {
    const [a, b, c, d] = ['a.ts', 'b.ts', 'c.ts', 'd.ts'];
    assert.deepEqual(
      importLoops([
        [a, b],
        [b, c],
        [c, a],
        [c, d],
      ]),
      [[a, b, c]],
    );
    assert.deepEqual(
      importLoops([
        [a, b],
        [b, c],
      ]),
      [],
    );
    assert.deepEqual(importLoops([[a, a]]), [[a]]);
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
