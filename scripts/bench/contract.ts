/**
 * The cost of the contract layer: `GET /api/v1/keys` through the full stack (request id, logging,
 * metrics, error envelope, CORS, body parsing, openapi-backend routing, security handler, validation,
 * handler) against a bare Koa handler doing the same queries (session lookup + key list) on the same
 * database, in the same run. Goal (issue 25): the full stack keeps at least 80% of the bare handler's
 * throughput. Two parts: both servers in this process (TypeScript through tsx; `BENCH_CPU_PROF` and
 * `BENCH_HEAP_PROF` profile them), then as production runs them: the tsc build and the bare handler
 * each in a plain node process of its own (`BENCH_CONTRACT_PRODUCTION=0` skips this part). Each part
 * prints requests per second and each side's CPU time per request.
 */
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { benchDatabase, cpuProfiler, load, startBenchService, table, type LoadResult } from './lib.js';
import { bareKeysApp } from './contract/bare.mjs';
import { build } from '../build.js';

const root = path.resolve(import.meta.dirname, '../..');

export async function run(): Promise<void> {
  const db = await benchDatabase();
  // One key for the database's sealed secrets, shared by the in-process service and the production part's process.
  const secretsKey = randomBytes(32).toString('hex');
  const service = await startBenchService(db.url, { SECRETS_KEY: secretsKey });
  let closed = false;
  try {
    const signup = await fetch(`${service.url}/api/v1/auth/signup`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ email: 'bench@example.com', password: 'long-enough-pw', workspace_name: 'Bench' }),
    }).then((r) => r.json() as Promise<{ session_token: string }>);
    const token = signup.session_token;
    for (let i = 0; i < 5; i++) {
      await fetch(`${service.url}/api/v1/keys`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
        body: JSON.stringify({ name: `key ${i}` }),
      });
    }

    // The bare handler: the same two queries, JSON out, nothing else.
    const bare = bareKeysApp(service.db.knex);
    const bareServer = http.createServer(bare.callback());
    await new Promise<void>((r) => bareServer.listen(0, '127.0.0.1', () => r()));
    const bareUrl = `http://127.0.0.1:${(bareServer.address() as AddressInfo).port}`;

    const headers = { Authorization: `Bearer ${token}` };
    const seconds = Number(process.env.BENCH_SECONDS ?? 10);
    await load(`${bareUrl}/api/v1/keys`, { headers, seconds: 2 }); // warm-up
    await load(`${service.url}/api/v1/keys`, { headers, seconds: 2 });
    // BENCH_CPU_PROF=<dir>: a CPU profile of each side's measured phase (this process serves both).
    // Both servers run in this process: its CPU time over a phase, per request served, is each side's
    // cost per request, which other work on the machine sways far less than requests per second.
    const profiled = async (name: string, url: string) => {
      const profiler = cpuProfiler(name);
      await profiler.start();
      const cpu = process.cpuUsage();
      const result = await load(url, { headers, seconds });
      const used = process.cpuUsage(cpu);
      const file = await profiler.stop();
      if (file) console.log(`CPU profile of the ${name} phase: ${file}`);
      return { ...result, cpuUsPerRequest: (used.user + used.system) / (result.requestsPerSec * seconds) };
    };
    const bareResult = await profiled('contract-bare', `${bareUrl}/api/v1/keys`);
    const full = await profiled('contract-full', `${service.url}/api/v1/keys`);
    bareServer.close();
    report(`Contract layer, both servers in this process (TypeScript through tsx): GET /api/v1/keys, 20 connections, ${seconds}s each`, bareResult, full);

    // The in-process service stops first: its timers and jobs would run beside the processes measured next.
    await service.close();
    closed = true;
    // BENCH_CONTRACT_PRODUCTION=0 skips it.
    if (process.env.BENCH_CONTRACT_PRODUCTION !== '0') await productionRun(db.url, secretsKey, headers, seconds);
  } finally {
    if (!closed) await service.close();
    await db.drop();
  }
}

type Measured = LoadResult & { cpuUsPerRequest: number };

function report(title: string, bare: Measured, full: Measured): void {
  console.log(`\n${title}`);
  const row = (stack: string, r: Measured) => ({
    stack,
    'req/s': Math.round(r.requestsPerSec),
    'p50 ms': r.p50,
    'p99 ms': r.p99,
    'CPU us/request': Math.round(r.cpuUsPerRequest),
    errors: r.errors + r.non2xx,
  });
  table([row('bare Koa handler (same queries)', bare), row('full stack (contract layer)', full)]);
  const ratio = full.requestsPerSec / bare.requestsPerSec;
  console.log(`Full stack keeps ${(ratio * 100).toFixed(1)}% of the bare handler's throughput (goal: >= 80%, issue 25).`);
  console.log(
    `CPU per request, bare / full stack: ${((100 * bare.cpuUsPerRequest) / full.cpuUsPerRequest).toFixed(1)}% (the throughput share the full stack would keep where CPU is the limit).`,
  );
}

/** CPU time (user + system, all threads) a process has used, in microseconds; /proc counts in USER_HZ (100 a second on Linux). */
function processCpuUs(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** Starts `node <args>` (no TypeScript loader) and resolves with its URL, read from its output by `url`. */
async function serverProcess(args: string[], env: Record<string, string>, url: (line: string) => string | undefined) {
  const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const found = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      for (const line of output.split('\n')) {
        const u = url(line);
        if (u) return resolve(u);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.once('exit', (code) => reject(new Error(`${args[0]} exited with ${code} before listening: ${output.slice(-2000)}`)));
  });
  return {
    url: found,
    pid: child.pid!,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/**
 * The same comparison as production runs it: the service compiled by tsc (`npm run build`) and the bare
 * handler, each in a process of its own under plain node, and each process's own CPU per request
 * (tsx, which the in-process part runs under, wraps every function of the service it loads).
 */
async function productionRun(databaseUrl: string, secretsKey: string, headers: Record<string, string>, seconds: number): Promise<void> {
  await build();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-bench-'));
  const full = await serverProcess(
    ['dist/src/main.js'],
    { DATABASE_URL: databaseUrl, SECRETS_KEY: secretsKey, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', CONTRACT_CHECK: 'off' },
    (line) => /^Voice agent service on (\S+)/.exec(line)?.[1],
  );
  let bare: Awaited<ReturnType<typeof serverProcess>> | undefined;
  try {
    bare = await serverProcess(['scripts/bench/contract/bare.mjs'], { DATABASE_URL: databaseUrl, POOL_MAX: '20' }, (line) =>
      line.startsWith('{') ? (JSON.parse(line) as { url: string }).url : undefined,
    );
    const measure = async (server: { url: string; pid: number }): Promise<Measured> => {
      await load(`${server.url}/api/v1/keys`, { headers, seconds: 2 }); // warm-up
      const before = processCpuUs(server.pid);
      const result = await load(`${server.url}/api/v1/keys`, { headers, seconds });
      return { ...result, cpuUsPerRequest: (processCpuUs(server.pid) - before) / (result.requestsPerSec * seconds) };
    };
    const bareResult = await measure(bare);
    const fullResult = await measure(full);
    report(
      `Contract layer as production runs it (tsc build, plain node, each server a process of its own): GET /api/v1/keys, 20 connections, ${seconds}s each`,
      bareResult,
      fullResult,
    );
  } finally {
    await Promise.all([full.stop(), bare?.stop()]);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}
