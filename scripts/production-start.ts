/**
 * How production starts the service: `npm start`'s command in package.json (`node <flags> <script>`),
 * read here so that what measures or tests "the service as production runs it" (the contract
 * benchmark, the compiled-service test) runs exactly that command, node's flags included.
 */
import fs from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');

/** `checkout`: another checkout's (the contract benchmark's baseline). */
export function productionStart(checkout = root): { nodeFlags: string[]; script: string } {
  const pkg = JSON.parse(fs.readFileSync(path.join(checkout, 'package.json'), 'utf8')) as { scripts: { start: string } };
  const [command, ...args] = pkg.scripts.start.trim().split(/\s+/);
  const script = args.pop();
  if (command !== 'node' || !script || args.some((a) => !a.startsWith('--'))) {
    throw new Error(`package.json's start script must read 'node [--flag ...] <script>', not '${pkg.scripts.start}'`);
  }
  return { nodeFlags: args, script };
}
