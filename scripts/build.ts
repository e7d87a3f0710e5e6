/**
 * `npm run build` (and `npm start`'s prestart): what production runs, compiled. The API reference and
 * the browser bundles when missing or stale, then the service compiled by tsc (tsconfig.build.json,
 * incremental: an unchanged tree rebuilds in seconds) into dist/, with the files it reads beside its
 * modules (the sandbox's audio). `npm start` runs `node <flags> dist/src/main.js` (package.json); no TypeScript loader at run time.
 * `--out-dir DIR` compiles elsewhere (the test of the compiled service).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { buildDocs } from './build-docs.js';
import { buildSdk } from './build-sdk.js';

const root = path.resolve(import.meta.dirname, '..');

/** Files under src/ that the code reads at run time (not compiled): copied to the same place under the output. */
function copyAssets(outDir: string): void {
  for (const rel of fs.readdirSync(path.join(root, 'src'), { recursive: true }) as string[]) {
    const from = path.join(root, 'src', rel);
    if (fs.statSync(from).isDirectory() || rel.endsWith('.ts')) continue;
    const to = path.join(outDir, 'src', rel);
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.copyFileSync(from, to);
  }
}

export async function build(outDir = path.join(root, 'dist')): Promise<void> {
  buildDocs({ onlyStale: true });
  await buildSdk({ onlyStale: true, quiet: true });
  execFileSync(
    process.execPath,
    [
      path.join(root, 'node_modules/typescript/bin/tsc'),
      '-p',
      path.join(root, 'tsconfig.build.json'),
      '--outDir',
      outDir,
      '--tsBuildInfoFile',
      path.join(outDir, '.tsbuildinfo'),
    ],
    { cwd: root, stdio: 'inherit' },
  );
  copyAssets(outDir);
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const i = process.argv.indexOf('--out-dir');
  await build(i > 0 ? path.resolve(process.argv[i + 1]!) : undefined);
}
