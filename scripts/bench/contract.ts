/**
 * The cost of the contract layer: `GET /api/v1/keys` through the full stack (request id, logging,
 * metrics, error envelope, CORS, openapi-backend routing, security handler, validation, handler)
 * against a bare Koa handler doing the same queries (session lookup + key list) on the same database.
 * Goal (issues 25 and 37): the full stack keeps at least 80% of the bare handler's throughput.
 *
 * Both run as production runs them: the service compiled by tsc (`npm run build`) started by `npm
 * start`'s command (scripts/production-start.ts), and the bare handler (contract/bare.mjs) under the same
 * node flags (the young generation's size: the same runtime for both), each a plain node process of its own.
 * Each run loads the bare handler, then the full stack, and prints each side's requests per second and
 * CPU time per request (read from /proc for the whole process, and for its main thread alone), and the
 * two ratios. The CPU per request is the steadier figure on a busy machine: other work sways requests
 * per second far more. Before the runs, each process's CPU with no request at all (timers, polls) is
 * printed, since it is part of what the full stack's figure counts.
 *
 * BENCH_RUNS (default 1) runs that many rounds and prints a summary; BENCH_SECONDS (default 10) is the
 * length of each load phase. BENCH_CPU_PROF=<dir> / BENCH_HEAP_PROF=<dir> write a profile of each
 * measured phase of each process (contract/profile-hook.mjs); BENCH_GC=1 adds each side's garbage
 * collections per 1,000 requests (scavenges, and their milliseconds). BENCH_CONTRACT_BASELINE=<checkout>
 * also runs another checkout's compiled service (its `dist/`, built beforehand) on the same database
 * as a third side, measured after the full stack in each run: before and after a change, side by side.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import { benchDatabase, load, table, type LoadResult } from './lib.js';
import { build } from '../build.js';
import { productionStart } from '../production-start.js';

const root = path.resolve(import.meta.dirname, '../..');
const GOAL = 0.8;

interface Server {
  name: string;
  url: string;
  pid: number;
  /** Resolves with the profile's file when profiling, else null at once. */
  profile(run: number): { stop(): Promise<string | null> } | Promise<{ stop(): Promise<string | null> }>;
  /** The process's collections so far (BENCH_GC), else null. */
  gc(): Promise<GcTotals | null>;
  stop(): Promise<void>;
}

interface GcTotals {
  scavenges: number;
  scavengeMs: number;
  others: number;
  otherMs: number;
}

interface Measured extends LoadResult {
  cpuUsPerRequest: number;
  mainThreadUsPerRequest: number;
  /** The part of the CPU time spent in the kernel (system calls: sockets), whole process. */
  systemUsPerRequest: number;
  /** Read- and write-family system calls of the whole process, per request (/proc/<pid>/io). */
  syscallsPerRequest: { reads: number; writes: number };
  /** Transactions the database committed per request (each statement outside a transaction is one). */
  dbTransactionsPerRequest: number;
  /** Per 1,000 requests (BENCH_GC). */
  gc?: { scavenges: number; scavengeMs: number; otherMs: number };
}

export async function run(): Promise<void> {
  const db = await benchDatabase();
  const runs = Math.max(1, Number(process.env.BENCH_RUNS ?? 1));
  const seconds = Number(process.env.BENCH_SECONDS ?? 10);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-bench-'));
  const servers: Server[] = [];
  let counters: Counters | undefined;
  try {
    await build();
    const fullEnv = {
      DATABASE_URL: db.url,
      SECRETS_KEY: randomBytes(32).toString('hex'),
      DATA_DIR: dataDir,
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      CONTRACT_CHECK: 'off',
    };
    const serviceUrl = (line: string) => /^Voice agent service on (\S+)/.exec(line)?.[1];
    const production = productionStart();
    const full = await serverProcess('full', [...production.nodeFlags, production.script], fullEnv, serviceUrl);
    servers.push(full);
    const token = await signUp(full.url);
    const bare = await serverProcess('bare', [...production.nodeFlags, 'scripts/bench/contract/bare.mjs'], { DATABASE_URL: db.url, POOL_MAX: '20' }, (line) =>
      line.startsWith('{') ? (JSON.parse(line) as { url: string }).url : undefined,
    );
    servers.push(bare);
    const baselineRoot = process.env.BENCH_CONTRACT_BASELINE ? path.resolve(process.env.BENCH_CONTRACT_BASELINE) : undefined;
    const baseline = baselineRoot
      ? await serverProcess(
          'baseline',
          [...productionStart(baselineRoot).nodeFlags, 'dist/src/main.js'],
          { ...fullEnv, DATA_DIR: fs.mkdirSync(path.join(dataDir, 'baseline'), { recursive: true })! },
          serviceUrl,
          baselineRoot,
        )
      : undefined;
    if (baseline) servers.push(baseline);
    const headers = { Authorization: `Bearer ${token}` };

    const sides = baseline ? [bare, full, baseline] : [bare, full];
    const idle = await Promise.all(sides.map(idleCpu));
    console.log(
      `\nCPU with no request (3 s, all at once): ${sides.map((s, i) => `${s.name} ${idle[i].toFixed(1)}%`).join(', ')} of a core (timers and polls; counted in the service's CPU per request below).`,
    );
    for (const server of sides) await load(`${server.url}/api/v1/keys`, { headers, seconds: 2 }); // warm-up

    counters = await databaseCounters(db.url);
    const results: Array<{ bare: Measured; full: Measured }> = [];
    const baselineResults: Array<{ bare: Measured; full: Measured }> = [];
    console.log(
      `\nGET /api/v1/keys, 20 connections, ${seconds} s a side, tsc build under plain node (flags: ${production.nodeFlags.join(' ') || 'none'}), each server a process of its own`,
    );
    for (let i = 1; i <= runs; i++) {
      const bareResult = await measure(bare, headers, seconds, i, counters);
      const fullResult = await measure(full, headers, seconds, i, counters);
      results.push({ bare: bareResult, full: fullResult });
      report(i, runs, bareResult, fullResult);
      if (baseline) {
        const baselineResult = await measure(baseline, headers, seconds, i, counters);
        baselineResults.push({ bare: bareResult, full: baselineResult });
        report(i, runs, bareResult, baselineResult, `baseline (${baselineRoot})`);
      }
    }
    if (runs > 1) summary(results);
    if (runs > 1 && baseline) summary(baselineResults, `baseline (${baselineRoot})`);
  } finally {
    await counters?.close();
    await Promise.all(servers.map((s) => s.stop()));
    fs.rmSync(dataDir, { recursive: true, force: true });
    await db.drop();
  }
}

async function signUp(url: string): Promise<string> {
  const signup = await fetch(`${url}/api/v1/auth/signup`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ email: 'bench@example.com', password: 'long-enough-pw', workspace_name: 'Bench' }),
  }).then((r) => r.json() as Promise<{ session_token: string }>);
  for (let i = 0; i < 5; i++) {
    const created = await fetch(`${url}/api/v1/keys`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${signup.session_token}` },
      body: JSON.stringify({ name: `key ${i}` }),
    });
    if (created.status !== 201) throw new Error(`creating a key answered ${created.status}: ${await created.text()}`);
  }
  return signup.session_token;
}

/** CPU time (user + system, in microseconds) of a process's threads: all of them, and its main thread alone. /proc counts in USER_HZ (100 a second on Linux). */
function processCpuUs(pid: number): { all: number; main: number; system: number } {
  const fieldsOf = (stat: string) => stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const process = fieldsOf(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  const mainThread = fieldsOf(fs.readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8'));
  const ticks = (fields: string[]) => (Number(fields[11]) + Number(fields[12])) * 10_000;
  return { all: ticks(process), main: ticks(mainThread), system: Number(process[12]) * 10_000 };
}

/** Read- and write-family system calls a process has made so far (all its threads). */
function processSyscalls(pid: number): { reads: number; writes: number } {
  const io = fs.readFileSync(`/proc/${pid}/io`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)`, 'm').exec(io)?.[1] ?? NaN);
  return { reads: field('syscr'), writes: field('syscw') };
}

interface Counters {
  /** Transactions committed in the benchmark's database so far (pg_stat_database, read fresh). */
  transactions(): Promise<number>;
  close(): Promise<void>;
}

async function databaseCounters(url: string): Promise<Counters> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return {
    async transactions() {
      // The statistics snapshot is per transaction; clear it so each read sees the counters of now.
      await client.query('select pg_stat_clear_snapshot()');
      const { rows } = await client.query<{ n: string }>('select xact_commit as n from pg_stat_database where datname = current_database()');
      return Number(rows[0].n);
    },
    close: () => client.end(),
  };
}

/** Percent of a core a process uses with no request to serve. */
async function idleCpu(server: Server): Promise<number> {
  const before = processCpuUs(server.pid).all;
  await sleep(3000);
  return (processCpuUs(server.pid).all - before) / 30_000;
}

async function measure(server: Server, headers: Record<string, string>, seconds: number, run: number, db: Counters): Promise<Measured> {
  const profile = await server.profile(run);
  const gcBefore = await server.gc();
  const xactsBefore = await db.transactions();
  const ioBefore = processSyscalls(server.pid);
  const before = processCpuUs(server.pid);
  const result = await load(`${server.url}/api/v1/keys`, { headers, seconds });
  const after = processCpuUs(server.pid);
  const ioAfter = processSyscalls(server.pid);
  const xactsAfter = await db.transactions();
  const file = await profile.stop();
  if (file) console.log(`Profile of the ${server.name} side, run ${run}: ${file}`);
  const gcAfter = await server.gc();
  const requests = result.requestsPerSec * seconds;
  const perK = (x: number) => (1000 * x) / requests;
  return {
    ...result,
    cpuUsPerRequest: (after.all - before.all) / requests,
    mainThreadUsPerRequest: (after.main - before.main) / requests,
    systemUsPerRequest: (after.system - before.system) / requests,
    syscallsPerRequest: { reads: (ioAfter.reads - ioBefore.reads) / requests, writes: (ioAfter.writes - ioBefore.writes) / requests },
    // The first read's query and the second's snapshot clear are transactions of this database too.
    dbTransactionsPerRequest: (xactsAfter - xactsBefore - 2) / requests,
    gc:
      gcBefore && gcAfter
        ? {
            scavenges: perK(gcAfter.scavenges - gcBefore.scavenges),
            scavengeMs: perK(gcAfter.scavengeMs - gcBefore.scavengeMs),
            otherMs: perK(gcAfter.otherMs - gcBefore.otherMs),
          }
        : undefined,
  };
}

const percent = (x: number) => `${(100 * x).toFixed(1)}%`;

function report(run: number, runs: number, bare: Measured, full: Measured, stack = 'full stack (contract layer)'): void {
  const row = (stack: string, r: Measured) => ({
    stack,
    'req/s': Math.round(r.requestsPerSec),
    'p50 ms': r.p50,
    'p99 ms': r.p99,
    'CPU us/request': Math.round(r.cpuUsPerRequest),
    'main thread us/request': Math.round(r.mainThreadUsPerRequest),
    'of it kernel us/request': Math.round(r.systemUsPerRequest),
    'syscalls r+w /request': `${r.syscallsPerRequest.reads.toFixed(2)}+${r.syscallsPerRequest.writes.toFixed(2)}`,
    'db xacts /request': Number(r.dbTransactionsPerRequest.toFixed(2)),
    ...(r.gc && {
      'scavenges /1000 req': Number(r.gc.scavenges.toFixed(1)),
      'scavenge ms /1000 req': Number(r.gc.scavengeMs.toFixed(1)),
      'other GC ms /1000 req': Number(r.gc.otherMs.toFixed(1)),
    }),
    errors: r.errors + r.non2xx,
  });
  console.log(`\nRun ${run} of ${runs}`);
  table([row('bare Koa handler (same queries)', bare), row(stack, full)]);
  console.log(
    `Run ${run}, ${stack}: throughput ratio (full / bare) ${percent(full.requestsPerSec / bare.requestsPerSec)}; CPU per request ratio (bare / full) ${percent(bare.cpuUsPerRequest / full.cpuUsPerRequest)} (goal: >= 80%).`,
  );
}

function summary(results: Array<{ bare: Measured; full: Measured }>, stack = 'full stack'): void {
  const throughput = results.map((r) => r.full.requestsPerSec / r.bare.requestsPerSec);
  const cpu = results.map((r) => r.bare.cpuUsPerRequest / r.full.cpuUsPerRequest);
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  const met = (xs: number[]) => xs.filter((x) => x >= GOAL).length;
  console.log(`\nSummary of ${results.length} runs, ${stack} against the bare handler`);
  console.log(
    `Throughput: ratio >= 80% in ${met(throughput)} of ${results.length} runs (${throughput.map(percent).join(', ')}; median ${percent(median(throughput))}).`,
  );
  console.log(`CPU per request: ratio >= 80% in ${met(cpu)} of ${results.length} runs (${cpu.map(percent).join(', ')}; median ${percent(median(cpu))}).`);
}

/**
 * Starts `node <args>` (no TypeScript loader) and resolves with its URL, read from its output by `url`.
 * When profiling or counting collections, the process loads contract/profile-hook.mjs and is driven over IPC.
 */
async function serverProcess(
  name: string,
  args: string[],
  env: Record<string, string>,
  url: (line: string) => string | undefined,
  cwd = root,
): Promise<Server> {
  const profiling = Boolean(process.env.BENCH_CPU_PROF || process.env.BENCH_HEAP_PROF);
  const counting = Boolean(process.env.BENCH_GC);
  const hooked = profiling || counting;
  const execArgs = hooked ? ['--import', path.join(root, 'scripts/bench/contract/profile-hook.mjs')] : [];
  const child = spawn(process.execPath, [...execArgs, ...args], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', ...(hooked ? (['ipc'] as const) : [])],
  });
  let output = '';
  const found = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      for (const line of output.split('\n')) {
        const u = url(line);
        if (u) return resolve(u);
      }
    });
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    child.once('exit', (code) => reject(new Error(`${args.at(-1)} exited with ${code} before listening: ${output.slice(-2000)}`)));
  });
  const ask = (msg: Record<string, unknown>, key: string) =>
    new Promise<unknown>((resolve) => {
      const on = (m: Record<string, unknown>) => {
        if (key in m) {
          child.off('message', on);
          resolve(m[key]);
        }
      };
      child.on('message', on);
      child.send(msg);
    });
  return {
    name,
    url: found,
    pid: child.pid!,
    profile: async (run) => {
      if (!profiling) return { stop: async () => null };
      await ask({ cmd: 'profile-start', name: `contract-${name}-run${run}` }, 'profiling');
      return { stop: async () => (await ask({ cmd: 'profile-stop' }, 'profile')) as string | null };
    },
    gc: async () => (counting ? ((await ask({ cmd: 'gc' }, 'gc')) as GcTotals) : null),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
