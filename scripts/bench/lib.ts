/**
 * Shared pieces of the benchmarks: a database of their own, the real service on a random port, and an
 * HTTP load generator (autocannon) in a separate process so it does not share the server's event loop.
 */
import { execFile, fork, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startService, type RunningService } from '../../src/service.js';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../src/db/embedded.js';

export { cpuProfiler } from './cpu-profile.js';

const root = path.resolve(import.meta.dirname, '../..');
let embedded: EmbeddedDatabase | undefined;

/** The PostgreSQL server benchmarks use: DATABASE_URL's, or an embedded one in .bench-data. */
async function serverUrl(): Promise<string> {
  if (process.env.DATABASE_URL) return process.env.DATABASE_URL;
  embedded ??= await startEmbeddedPostgres({ dataDir: path.join(root, '.bench-data'), port: 54349, log: createLogger('warn') });
  return embedded.serverUrl;
}

export async function benchDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const server = await serverUrl();
  const name = `vas_bench_${randomBytes(4).toString('hex')}`;
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: server });
    await c.connect();
    await c.query(sql).finally(() => c.end());
  };
  await admin(`create database "${name}"`);
  const url = new URL(server);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`drop database if exists "${name}" with (force)`) };
}

export async function stopBenchDatabaseServer(): Promise<void> {
  await embedded?.stop();
  embedded = undefined;
}

/** The service as production runs it (no per-response contract check, info logs off). */
export async function startBenchService(databaseUrl: string, env: Record<string, string> = {}): Promise<RunningService> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-bench-'));
  const config = loadConfig({ DATABASE_URL: databaseUrl, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', CONTRACT_CHECK: 'off', ...env });
  return startService(config, createLogger('silent'));
}

export interface LoadResult {
  requestsPerSec: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

/** Runs autocannon against a URL for `seconds` with `connections` concurrent keep-alive connections. */
export function load(
  url: string,
  opts: { headers?: Record<string, string>; method?: string; body?: string; connections?: number; seconds?: number },
): Promise<LoadResult> {
  const args = [
    path.join(root, 'node_modules/autocannon/autocannon.js'),
    '--json',
    '-c',
    String(opts.connections ?? 20),
    '-d',
    String(opts.seconds ?? 10),
    '-m',
    opts.method ?? 'GET',
  ];
  for (const [k, v] of Object.entries(opts.headers ?? {})) args.push('-H', `${k}=${v}`);
  if (opts.body) args.push('-b', opts.body);
  args.push(url);
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { maxBuffer: 16 * 1024 * 1024 }, (err, stdout) => {
      if (err) return reject(err);
      const r = JSON.parse(stdout);
      resolve({ requestsPerSec: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors, non2xx: r.non2xx });
    });
  });
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export function machine(): string {
  return `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}`;
}

export function table(rows: Array<Record<string, string | number>>): void {
  console.table(rows);
}

/** A benchmark process forked with IPC: its `{ready: true, ...}` message, and request/answer over IPC. */
export interface BenchChild {
  proc: ChildProcess;
  info: Record<string, string>;
  /** Sends `msg` and resolves with the value under `key` of the first answer carrying it. */
  ask<T>(msg: Record<string, unknown>, key: string): Promise<T>;
}

export async function forkChild(file: string, args: string[], env: Record<string, string>, execArgv: string[] = []): Promise<BenchChild> {
  const proc = fork(file, args, { execArgv: ['--import', 'tsx', ...execArgv], env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const info = await new Promise<Record<string, string>>((resolve, reject) => {
    proc.once('exit', (code) => reject(new Error(`${path.basename(file)} ${args.join(' ')} exited with ${code}`)));
    proc.on('message', (m: Record<string, string> & { ready?: boolean }) => m.ready && resolve(m));
  });
  return {
    proc,
    info,
    ask: <T>(msg: Record<string, unknown>, key: string) =>
      new Promise<T>((resolve) => {
        const on = (m: Record<string, unknown>) => {
          if (key in m) {
            proc.off('message', on);
            resolve(m[key] as T);
          }
        };
        proc.on('message', on);
        proc.send(msg);
      }),
  };
}
