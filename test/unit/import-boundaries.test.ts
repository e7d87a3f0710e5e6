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
import { CARRIER_API_URL_VARIABLES } from '../../src/carriers/index.js';

const root = path.resolve(import.meta.dirname, '../..');
const src = path.join(root, 'src');

/** Room of a file under src/ ('' for the files at its top). */
const roomOf = (file: string) => {
  const rel = path.relative(src, file).split(path.sep);
  return rel.length > 1 ? rel[0] : '';
};

/** Every import from the files under `dir` into src/ (type-only ones included): [from file, to file], absolute .ts paths. */
function fileEdges(dir = src): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const rel of fs.readdirSync(dir, { recursive: true }) as string[]) {
    if (!rel.endsWith('.ts') || rel.split(path.sep).includes('node_modules')) continue;
    const file = path.join(dir, rel);
    const { importedFiles } = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const target = path.resolve(path.dirname(file), fileName).replace(/\.js$/, '.ts');
      if (target.startsWith(src + path.sep)) out.push([file, target]);
    }
  }
  return out;
}

const carriersDir = path.join(src, 'carriers');
/** The carrier folder (`provider-a`) a file of src/carriers/ lives in, or null for the carriers' shared files. */
const carrierFolderOf = (file: string) => {
  const rel = path.relative(carriersDir, file).split(path.sep);
  return !rel[0].startsWith('..') && rel.length > 1 ? rel[0] : null;
};

/**
 * Imports of a carrier's own folder from outside src/carriers/ (src/ with the simulators, scripts/,
 * test/); only that carrier's unit tests (test/unit/carriers-<folder>.test.ts) may test its insides.
 */
function carrierInsideImports(): string[] {
  const edges = [src, path.join(root, 'scripts'), path.join(root, 'test')].flatMap((dir) => fileEdges(dir));
  return edges
    .filter(([from, to]) => {
      const folder = carrierFolderOf(to);
      if (!folder || from.startsWith(carriersDir + path.sep)) return false;
      return path.relative(root, from) !== path.join('test', 'unit', `carriers-${folder}.test.ts`);
    })
    .map(([from, to]) => `${path.relative(root, from)} -> ${path.relative(root, to)}`);
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

  it("keeps every carrier's own folder behind the carriers' front door (src/carriers/index.ts)", () => {
    assert.deepEqual(carrierInsideImports(), []);
    // Each registered carrier's folder is there, and the front door imports it.
    const frontDoor = fileEdges(carriersDir).filter(([from]) => from === path.join(carriersDir, 'index.ts'));
    const folders = fs.readdirSync(carriersDir, { withFileTypes: true }).filter((e) => e.isDirectory());
    assert.ok(folders.length >= 2);
    for (const f of folders)
      assert.ok(
        frontDoor.some(([, to]) => carrierFolderOf(to) === f.name),
        `src/carriers/index.ts registers ${f.name}`,
      );
  });

  it('names an HTTP carrier in code outside its own folders only in the two registries', () => {
    // What a new carrier like provider_a touches in src/ and the dashboard (docs/carriers.md):
    // the carriers' registry and the simulators' registry. The sandbox server keeps the named URLs
    // (`providerAUrl`, ...) scripts and tests use; a new carrier needs none. Migrations are history.
    const allowed = ['src/carriers/index.ts', 'src/sandbox/carriers/simulators.ts', 'src/sandbox/carriers/server.ts'];
    const code = (file: string) =>
      fs
        .readFileSync(file, 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, '')
        .replace(/(^|[^:])\/\/.*$/gm, '$1');
    const files = (fs.readdirSync(src, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts')).map((f) => path.join('src', f));
    // The dashboard lists the carriers from the contract (generated/carriers.ts): it names none of them.
    const dashboard = path.join(root, 'apps/dashboard/src');
    files.push(...(fs.readdirSync(dashboard, { recursive: true }) as string[]).filter((f) => /\.tsx?$/.test(f)).map((f) => path.join('apps/dashboard/src', f)));
    for (const [provider] of CARRIER_API_URL_VARIABLES) {
      const folder = provider.replace(/_/g, '-');
      const own = (f: string) =>
        f.startsWith(path.join('src', 'carriers', folder) + path.sep) ||
        f.startsWith(path.join('src', 'sandbox', 'carriers', folder)) ||
        f.startsWith(path.join('src', 'db', 'migrations') + path.sep);
      const camel = provider.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
      const naming = new RegExp(`\\b(${provider}|${camel})\\b`);
      const named = files.filter((f) => !own(f) && naming.test(code(path.join(root, f))));
      assert.deepEqual(
        named.filter((f) => !allowed.includes(f.split(path.sep).join('/'))),
        [],
        `${provider} is named outside its folders and the registries`,
      );
    }
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
    assert.deepEqual(await lint('src/sandbox/carriers/x.ts', "import { c } from '../../carriers/index.js';\nexport const a = c;\n"), []);
    assert.deepEqual(await lint('src/carriers/provider-a/x.ts', "import { s } from './signature.js';\nexport const a = s;\n"), []);
    assert.deepEqual(await lint('src/carriers/index.ts', "import { p } from './provider-a/index.js';\nexport const a = p;\n"), []);
    assert.deepEqual(
      await lint('test/unit/carriers-provider-a.test.ts', "import { s } from '../../src/carriers/provider-a/signature.js';\nexport const a = s;\n"),
      [],
    );
  });

  it("refuses a carrier's own folder imported from outside src/carriers/", async () => {
    const inside = (from: string, specifier: string) => lint(from, `import { s } from '${specifier}';\nexport const a = s;\n`);
    assert.deepEqual(await inside('src/calls/callbacks.ts', '../carriers/provider-a/signature.js'), ['no-restricted-imports']);
    assert.deepEqual(await inside('src/calls/live/media-server.ts', '../../carriers/provider-b/media.js'), ['no-restricted-imports']);
    assert.deepEqual(await inside('src/sandbox/carriers/x.ts', '../../carriers/provider-a/signature.js'), ['no-restricted-imports']);
    assert.deepEqual(await inside('src/service.ts', './carriers/provider-b/rest.js'), ['no-restricted-imports']);
    assert.deepEqual(await inside('scripts/bench/x.ts', '../../src/carriers/provider-a/rest.js'), ['no-restricted-imports']);
    assert.deepEqual(await inside('test/integration/x.test.ts', '../../src/carriers/provider-b/signature.js'), ['no-restricted-imports']);
  });
});
