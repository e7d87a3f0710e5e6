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

/** A callee of the sandbox carrier who keeps the conversation going for a measured phase, then stays on the line. */
export const TALKING_CALLEE = [
  { waitForAgent: true, startWithinMs: 3000 },
  { say: 'Hello, this is Sam calling about my appointment.' },
  { waitForAgent: true, startWithinMs: 3000 },
  { say: 'Can you move it to Tuesday afternoon please?' },
  { waitForAgent: true, startWithinMs: 3000 },
  { say: 'And do you take my insurance card?' },
  { waitForAgent: true, startWithinMs: 3000 },
  { say: 'Thank you, that is all I needed to know.' },
  { pause: 300_000 },
];

/** Distinct numbers a person answers at the sandbox carrier (the last four digits 0001-0004 would pick another outcome). */
export function answeringNumbers(): () => string {
  let serial = 0;
  return () => {
    const n = serial++;
    // Exchanges 200-999: 1xx exchanges exist nowhere, and the destination policy refuses them.
    return `+1415${200 + Math.floor(n / 5000)}${5000 + (n % 5000)}`;
  };
}

/** A JSON request to the service (or a sandbox) with an optional bearer token; throws on any status from 300 up. */
export async function api(base: string, method: string, p: string, token: string | null, body?: unknown): Promise<Record<string, any>> {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text.slice(0, 300)}`);
  return text ? (JSON.parse(text) as Record<string, any>) : {};
}

/** A workspace signed up on the enterprise plan with credit for any run, and an API key of it. */
export async function benchWorkspace(
  base: string,
  adminToken: string,
  o: { name: string; concurrentSessions: number; noDailyCap?: boolean },
): Promise<{ key: string; workspaceId: string }> {
  const signup = await api(base, 'POST', '/api/v1/auth/signup', null, {
    email: `bench-${o.name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${Date.now()}@example.com`,
    password: 'correct-horse-battery',
    workspace_name: o.name,
  });
  const key = (await api(base, 'POST', '/api/v1/keys', signup.session_token, { name: 'bench' })).key as string;
  const workspaceId = signup.workspace.id as string;
  await api(base, 'PATCH', `/admin/v1/workspaces/${workspaceId}`, adminToken, {
    plan: 'enterprise',
    concurrent_session_limit: o.concurrentSessions,
    credit_balance_cents: 1_000_000_000,
  });
  if (o.noDailyCap) await api(base, 'PATCH', `/admin/v1/workspaces/${workspaceId}/destination-policy`, adminToken, { daily_call_cap: null });
  return { key, workspaceId };
}

/**
 * `n` calls of `agentId` placed through the API to the sandbox carrier (`carrier`, which plays `script`
 * as each callee), in groups of 25 at `perSecond` (a deployment's calls do not all start in one
 * instant). An instance at capacity refuses new calls (503, src/system/overload.ts): counted in
 * `refused`, not a failure.
 */
export async function placeCalls(o: {
  base: string;
  key: string;
  agentId: string;
  n: number;
  perSecond: number;
  carrier: BenchChild;
  script: unknown[];
  number: () => string;
}): Promise<{ ids: string[]; refused: number }> {
  const ids: string[] = [];
  let refused = 0;
  for (let i = 0; i < o.n; i += 25) {
    const groupStart = Date.now();
    const group = await Promise.all(
      Array.from({ length: Math.min(25, o.n - i) }, async () => {
        const to = o.number();
        o.carrier.proc.send({ cmd: 'script', to, script: o.script });
        try {
          return (await api(o.base, 'POST', '/api/v1/calls', o.key, { agent_id: o.agentId, to_number: to })).call_id as string;
        } catch (err) {
          if (!/: 503 /.test((err as Error).message)) throw err;
          refused += 1;
          return null;
        }
      }),
    );
    ids.push(...group.filter((id): id is string => id !== null));
    await new Promise((r) => setTimeout(r, Math.max(0, groupStart + (25 / o.perSecond) * 1000 - Date.now())));
  }
  return { ids, refused };
}

/**
 * The environment of a service process whose peers run apart (the sandbox carriers' process `carrier`,
 * the voice service at `voiceUrl`) on the database at `databaseUrl`, with the silence timeout off (a
 * benchmark's callers pause as they please).
 */
export function peerEnv(o: { databaseUrl: string; voiceUrl: string; carrier: BenchChild; adminToken: string }): Record<string, string> {
  return {
    VOICE_SERVICE_URL: o.voiceUrl,
    DATABASE_URL: o.databaseUrl,
    ADMIN_TOKEN: o.adminToken,
    PROVIDER_A_API_URL: o.carrier.info.providerAUrl,
    PROVIDER_B_API_URL: o.carrier.info.providerBUrl,
    CALL_SILENCE_TIMEOUT_MS: '0',
  };
}
