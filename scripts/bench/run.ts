/**
 * `npm run bench [-- name ...]`: runs every benchmark in scripts/bench/ (each module exports `run()`),
 * or the named ones, and prints their figures with the machine they ran on. Record results in
 * BENCHMARKS.md.
 */
import fs from 'node:fs';
import path from 'node:path';
import { machine, stopBenchDatabaseServer } from './lib.js';

const dir = import.meta.dirname;
const wanted = process.argv.slice(2);
const names = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith('.ts') && !['run.ts', 'lib.ts'].includes(f))
  .map((f) => f.replace(/\.ts$/, ''))
  .filter((n) => wanted.length === 0 || wanted.includes(n))
  .sort();

console.log(`Benchmarks on ${machine()}: ${names.join(', ')}`);
let failed = false;
for (const name of names) {
  const mod = (await import(path.join(dir, `${name}.ts`))) as { run?: () => Promise<void> };
  if (typeof mod.run !== 'function') continue;
  console.log(`\n=== ${name} ===`);
  try {
    await mod.run();
  } catch (err) {
    failed = true;
    console.error(`${name} failed:`, err);
  }
}
await stopBenchDatabaseServer();
process.exit(failed ? 1 : 0);
