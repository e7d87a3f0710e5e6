/**
 * Builds the browser packages into the single ES modules the service serves under /sdk/ and the
 * dashboard's script and style sheet under /dashboard/ (esbuild, minified), type-checks them and writes
 * the client library's declarations (tsc), and prints each bundle's size. The widget bundles the client library from its source (packages/widget/tsconfig.json
 * maps `@voice-agent/client` to it). `--if-missing` rebuilds only a bundle older than its sources
 * (npm start's prestart, npm test).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const root = path.resolve(import.meta.dirname, '..');

interface SdkBundle {
  dir: string;
  entry: string;
  out: string;
  /** Declarations tsc writes (the project emits them); absent: tsc only type-checks. */
  types?: string;
  /** Other packages whose sources are bundled in. */
  bundles?: string[];
  /** Other files the build writes (the style sheet of a bundle that imports CSS). */
  alsoWrites?: string[];
  gzipBudget: number;
}

export const SDK_BUNDLES: readonly SdkBundle[] = [
  { dir: 'packages/client', entry: 'src/index.ts', out: 'dist/voice-agent-client.js', types: 'dist/types/index.d.ts', gzipBudget: 15 * 1024 },
  { dir: 'packages/widget', entry: 'src/index.ts', out: 'dist/voice-agent-widget.js', bundles: ['packages/client'], gzipBudget: 30 * 1024 },
  // The dashboard's types come from generated/openapi.d.ts: a contract change rebuilds it.
  { dir: 'apps/dashboard', entry: 'src/main.tsx', out: 'dist/app.js', alsoWrites: ['dist/app.css'], bundles: ['generated'], gzipBudget: 40 * 1024 },
];

function newestSource(b: SdkBundle): number {
  const files = [path.join(root, 'scripts/build-sdk.ts')];
  for (const dir of [b.dir, ...(b.bundles ?? [])].map((d) => path.join(root, d))) {
    const src = fs.existsSync(path.join(dir, 'src')) ? path.join(dir, 'src') : dir;
    for (const f of ['package.json', 'tsconfig.json', 'index.html']) if (fs.existsSync(path.join(dir, f))) files.push(path.join(dir, f));
    files.push(...(fs.readdirSync(src, { recursive: true }) as string[]).map((f) => path.join(src, f)));
  }
  return Math.max(...files.map((f) => fs.statSync(f).mtimeMs));
}

const kB = (n: number) => `${(n / 1024).toFixed(1)} kB`;

export async function buildSdk(opts: { onlyStale?: boolean; quiet?: boolean } = {}): Promise<void> {
  for (const b of SDK_BUNDLES) {
    const dir = path.join(root, b.dir);
    const out = path.join(dir, b.out);
    const outputs = [out, ...[b.types, ...(b.alsoWrites ?? [])].filter((f): f is string => !!f).map((f) => path.join(dir, f))];
    const built = outputs.every((f) => fs.existsSync(f)) ? Math.min(...outputs.map((f) => fs.statSync(f).mtimeMs)) : 0;
    if (opts.onlyStale && built >= newestSource(b)) continue;
    await build({
      entryPoints: [path.join(dir, b.entry)],
      outfile: out,
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: ['es2020'],
      minify: true,
      legalComments: 'none',
      logLevel: 'warning',
    });
    execFileSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', dir], { cwd: root, stdio: 'inherit' });
    const code = fs.readFileSync(out);
    const gz = gzipSync(code, { level: 9 }).length;
    const over = gz > b.gzipBudget ? ` (over the ${kB(b.gzipBudget)} goal)` : '';
    if (!opts.quiet) console.log(`${path.relative(root, out)}: ${kB(code.length)}, ${kB(gz)} gzipped${over}`);
    for (const extra of b.alsoWrites ?? []) {
      const file = fs.readFileSync(path.join(dir, extra));
      if (!opts.quiet) console.log(`${path.relative(root, path.join(dir, extra))}: ${kB(file.length)}, ${kB(gzipSync(file, { level: 9 }).length)} gzipped`);
    }
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  await buildSdk({ onlyStale: process.argv.includes('--if-missing') });
}
