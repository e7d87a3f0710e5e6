/** Runs the service as a real process (`src/main.ts`), the way `npm start` does. */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '../..');

export interface ServiceProcess {
  child: ChildProcess;
  url: string;
  output: () => string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

function exited(child: ChildProcess): Promise<number | null> {
  return child.exitCode !== null ? Promise.resolve(child.exitCode) : new Promise((r) => child.once('exit', (code) => r(code)));
}

/** Starts the service; resolves once it listens, rejects (with its output) if it exits first. */
export function startProcess(env: Record<string, string>): Promise<ServiceProcess> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !['DATABASE_URL', 'TEST_DATABASE_SERVER_URL', 'NODE_TEST_CONTEXT'].includes(k)));
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: root,
    env: { ...clean, NODE_ENV: 'development', LOG_LEVEL: 'info', HOST: '127.0.0.1', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return new Promise((resolve, reject) => {
    const onData = () => {
      const m = /Voice agent service on (http:\/\/\S+)/.exec(out);
      if (!m) return;
      child.stdout!.off('data', onData);
      resolve({
        child,
        url: m[1],
        output: () => out,
        async stop(signal = 'SIGTERM') {
          child.kill(signal);
          return exited(child);
        },
      });
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`service exited with ${code} before listening:\n${out}`)));
  });
}
