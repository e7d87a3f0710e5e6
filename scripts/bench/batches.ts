/**
 * Batches (outbound call campaigns): `npm run bench -- batches`. The service runs in this process
 * (startBenchService, its in-process sandbox carriers), one workspace with a provider_a phone agent
 * and its concurrency limit raised through the operator API.
 *
 * 1. create: the time to answer `POST /api/v1/batches` with BENCH_BATCH_CREATE_RECIPIENTS (10,000)
 *    recipients (one variable each), scheduled an hour ahead so nothing dials, over real HTTP from
 *    this process (request sent to response read), BENCH_BATCH_CREATE_REPS times after a warm-up;
 *    also with an `Idempotency-Key` (a new key each time: the first request's path). Baselines in the
 *    same run, interleaved with it: the same body POSTed to a bare node:http endpoint that parses the
 *    JSON and answers 201 (transport and parse), and the same rows inserted with knex, one multi-row
 *    insert per 2,000 rows in one transaction, into a scratch table `like batch_recipients including
 *    all` (its indexes and checks, not its foreign key). Goal: p99 < 1 s.
 * 2. rate: calls started per second with batch concurrency 50 and 200 (BENCH_BATCH_CONCURRENCY):
 *    BENCH_BATCH_RECIPIENTS (1,000) recipients whose numbers end in 0002, so the sandbox carrier
 *    answers each dial busy after its ring (SANDBOX_CARRIERS_RING_MS, 20 ms here): every recipient is
 *    one short call, and the batch keeps refilling its concurrency as they end. "Started" = the dial
 *    request received by the sandbox carrier (its call record's createdAt, read every 10 ms). Figures
 *    from the batch's POST: first call, all N started, and the steady rate between the 10th and 90th
 *    percentile of start times; the peak of calls live at the carrier at once. Baselines in the same
 *    run, the same N busy numbers placed with `POST /api/v1/calls` by a client in its own process
 *    (scripts/bench/batches/client.ts): "paced" keeps at most C calls live as the batch does (the next
 *    call when a call's `call.completed` webhook arrives), "requests" keeps C requests in flight
 *    whatever the calls do (accepted calls then wait for their dial job; past the workspace's limit
 *    the API answers 429 and the client tries again after BENCH_CLIENT_RETRY_MS). Per phase also:
 *    this process's CPU per call, the service's SQL statements per call (through its knex), and where
 *    a call's time went (its row -> dial claim -> finalisation claim -> terminal row, p50).
 *    Goal: >= 50 calls/s.
 * 3. lag: BENCH_BATCH_LAG_BATCHES (50) batches of one busy recipient, scheduled at random times
 *    BENCH_BATCH_LAG_MIN_S..BENCH_BATCH_LAG_MAX_S (2..10) s ahead; per batch the delay from
 *    `scheduled_at` to its call's row (`calls.created_at`, the dispatch transaction's start), its dial
 *    claim (`dial_attempted_at`) and the carrier's receipt; p50/p99/max and early starts. Baseline: a
 *    JobQueue of this process on the same database (same JOBS_CONCURRENCY and JOBS_POLL_INTERVAL_MS)
 *    runs a trivial task scheduled at the same times: the job queue's own lag. Goal: p99 < 1 s.
 *
 * Knobs: BENCH_BATCH_PARTS (create,rate,lag), BENCH_BATCH_RATE_MODES (batch,paced,requests), the sizes
 * above, BENCH_BATCH_WORKSPACE_LIMIT (500), BENCH_CLIENT_RETRY_MS (the client's wait after a 429, 20), and
 * the service's own settings passed through when set: JOBS_CONCURRENCY, JOBS_POLL_INTERVAL_MS,
 * BATCH_DISPATCH_CHUNK, DATABASE_POOL_MAX, SANDBOX_CARRIERS_RING_MS (default here 20),
 * SANDBOX_CARRIERS_SPEED, CALL_RING_TIMEOUT_S, WEBHOOK_CONCURRENCY. At speed 1 a sandbox dial spends
 * 100 ms queued and 200 ms initiated before it rings, so a busy call lasts about 320 ms at the carrier
 * and a slot of the batch at least that plus the service's own turn-around.
 */
import http from 'node:http';
import path from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import knexFactory, { type Knex } from 'knex';
import { cpuProfiler } from './cpu-profile.js';
import { benchDatabase, forkChild, percentile, startBenchService, table, type BenchChild } from './lib.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { JobQueue, jobKind } from '../../src/jobs/queue.js';
import { newId } from '../../src/lib/ids.js';
import type { RunningService } from '../../src/service.js';
import type { SandboxCallRecord } from '../../src/sandbox/carriers/server.js';

const ADMIN = 'bench-operator-token-0123456789';
const PASS_THROUGH = [
  'JOBS_CONCURRENCY',
  'JOBS_POLL_INTERVAL_MS',
  'BATCH_DISPATCH_CHUNK',
  'DATABASE_POOL_MAX',
  'SANDBOX_CARRIERS_RING_MS',
  'SANDBOX_CARRIERS_SPEED',
  'CALL_RING_TIMEOUT_S',
  'WEBHOOK_CONCURRENCY',
];
const LIVE = ['queued', 'initiated', 'ringing', 'in_progress'];

const num = (name: string, dflt: number) => Number(process.env[name] ?? dflt);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const r1 = (n: number) => (Number.isFinite(n) ? Math.round(n * 10) / 10 : '-');

interface Ctx {
  service: RunningService;
  /** The benchmark's own connections (its polling and the insert baseline stay off the service's pool and count). */
  knex: Knex;
  /** SQL statements the service has sent through its knex so far (graphile-worker's own pool not included). */
  queries: () => number;
  base: string;
  key: string;
  agentId: string;
  workspaceId: string;
}

async function api(
  base: string,
  method: string,
  p: string,
  token: string | null,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Record<string, any>> {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text.slice(0, 300)}`);
  return text ? (JSON.parse(text) as Record<string, any>) : {};
}

/**
 * Distinct numbers per use, each a valid North American number the destination policy takes:
 * `+1 <area code> <exchange 200-999> <suffix>` (suffix 0002: busy in the sandbox), 24,000 per run.
 */
const AREA_CODES = [
  415, 212, 312, 617, 206, 303, 404, 512, 602, 702, 801, 919, 213, 310, 408, 510, 650, 707, 916, 925, 202, 305, 313, 503, 612, 704, 713, 720, 786, 971,
];
let serial = 0;
const numbers = (n: number, suffix: string) =>
  Array.from({ length: n }, () => {
    const k = serial++;
    return `+1${AREA_CODES[Math.floor(k / 800) % AREA_CODES.length]}${200 + (k % 800)}${suffix}`;
  });

function stats(values: number[]) {
  const s = [...values].sort((a, b) => a - b);
  return { p50: percentile(s, 50), p99: percentile(s, 99), max: s[s.length - 1] ?? NaN, min: s[0] ?? NaN };
}

// 1. Create

/** A bare endpoint: reads the body, parses it, answers 201 with a small JSON. */
async function trivialEndpoint(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { recipients: unknown[] };
      res.writeHead(201, { 'Content-Type': 'application/json' }).end(JSON.stringify({ total: body.recipients.length }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/batches`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

async function timedPost(url: string, body: string, headers: Record<string, string>): Promise<{ ms: number; status: number; text: string }> {
  const t0 = performance.now();
  const res = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body });
  const text = await res.text();
  return { ms: performance.now() - t0, status: res.status, text };
}

async function create(c: Ctx): Promise<void> {
  const n = num('BENCH_BATCH_CREATE_RECIPIENTS', 10_000);
  const reps = num('BENCH_BATCH_CREATE_REPS', 10);
  const knex = c.knex;
  await knex.raw('create table bench_scratch_recipients (like batch_recipients including all)');
  const trivial = await trivialEndpoint();
  const recipients = numbers(n, '5000').map((to_number, j) => ({ to_number, variables: { name: `Customer ${j}` } }));
  let rep = 0;
  const body = () =>
    JSON.stringify({ agent_id: c.agentId, name: `Bench create ${rep++}`, recipients, scheduled_at: new Date(Date.now() + 3600_000).toISOString() });
  const auth = { Authorization: `Bearer ${c.key}` };

  const service = async (idempotent: boolean) => {
    const r = await timedPost(`${c.base}/api/v1/batches`, body(), idempotent ? { ...auth, 'Idempotency-Key': randomUUID() } : auth);
    if (r.status !== 201) throw new Error(`POST /api/v1/batches: ${r.status} ${r.text.slice(0, 300)}`);
    const total = (JSON.parse(r.text) as { total: number }).total;
    if (total !== n) throw new Error(`batch total ${total}, expected ${n}`);
    return r.ms;
  };
  const bare = async () => {
    const r = await timedPost(trivial.url, body(), auth);
    if (r.status !== 201) throw new Error(`trivial endpoint: ${r.status}`);
    return r.ms;
  };
  const insert = async () => {
    const batchId = newId('batch');
    const at = new Date(Date.now() + 3600_000);
    const t0 = performance.now();
    const rows = recipients.map((r, position) => ({
      id: newId('batchRecipient'),
      batch_id: batchId,
      position,
      to_number: r.to_number,
      variables: JSON.stringify(r.variables),
      first_message: null,
      timezone: null,
      status: 'scheduled',
      next_attempt_at: at,
    }));
    await knex.transaction(async (trx) => {
      for (let i = 0; i < rows.length; i += 2000) await trx('bench_scratch_recipients').insert(rows.slice(i, i + 2000));
    });
    return performance.now() - t0;
  };

  const size = Buffer.byteLength(body());
  const cases: Array<[string, () => Promise<number>, number[]]> = [
    ['POST /api/v1/batches', () => service(false), []],
    ['POST /api/v1/batches + Idempotency-Key', () => service(true), []],
    ['baseline: same body to a bare endpoint (parse, 201)', bare, []],
    ['baseline: knex insert of the rows (2,000 per statement, 1 transaction)', insert, []],
  ];
  try {
    for (const [, fn] of cases) await fn(); // warm-up
    for (let i = 0; i < reps; i++) for (const [, fn, out] of cases) out.push(await fn());
  } finally {
    await trivial.close();
  }
  table(
    cases.map(([name, , out]) => {
      const s = stats(out);
      return {
        case: name,
        recipients: n,
        'body KB': Math.round(size / 1024),
        reps: out.length,
        'p50 ms': r1(s.p50),
        'p99 ms': r1(s.p99),
        'max ms': r1(s.max),
        'min ms': r1(s.min),
      };
    }),
  );
  console.log(
    `create: ${n.toLocaleString()} recipients, ${(size / 1024).toFixed(0)} KB body, ${reps} reps after a warm-up, interleaved; the client is in the service's process and times request sent to response read. ` +
      `With ${reps} samples p99 is the max. Goal: p99 < 1 s.`,
  );
}

// 2. Rate

/**
 * The sandbox carrier's call records, read every 10 ms (it keeps only its last 1,000): each new one
 * goes to the phase that placed a call to its number.
 */
function carrierWatch(service: RunningService) {
  const sandbox = service.sandbox.carriers?.server;
  if (!sandbox) throw new Error('the bench needs the in-process sandbox carriers');
  const seen = new Set<string>();
  const phases: Array<{ nums: Set<string>; records: SandboxCallRecord[] }> = [];
  const take = () => {
    const all = sandbox.calls();
    // Newest last: walk back to the first record already seen.
    let i = all.length - 1;
    while (i >= 0 && !seen.has(all[i].callSid)) i--;
    for (const r of all.slice(i + 1)) {
      seen.add(r.callSid);
      for (const p of phases) if (p.nums.has(r.to)) p.records.push(r);
    }
  };
  const timer = setInterval(take, 10);
  return {
    /** The records of calls to these numbers, from now on (a live array). */
    track(nums: Set<string>): SandboxCallRecord[] {
      const p = { nums, records: [] as SandboxCallRecord[] };
      phases.push(p);
      return p.records;
    },
    take,
    stop: () => clearInterval(timer),
  };
}

type Watch = ReturnType<typeof carrierWatch>;

async function waitUntil(cond: () => Promise<boolean> | boolean, timeoutMs: number, what: string, everyMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

async function liveCalls(c: Ctx): Promise<number> {
  const [row] = await c.knex('calls').whereIn('status', LIVE).count<{ count: string }[]>('* as count');
  return Number(row.count);
}

/** Start-time figures of one phase: from t0 (epoch ms) to the carrier's receipts. */
function startFigures(records: SandboxCallRecord[], t0: number, n: number) {
  const starts = records.map((r) => r.createdAt).sort((a, b) => a - b);
  const i10 = Math.floor(0.1 * n);
  const i90 = Math.max(i10 + 1, Math.ceil(0.9 * n) - 1);
  const steady = starts.length > i90 ? ((i90 - i10) / (starts[i90] - starts[i10])) * 1000 : NaN;
  // Peak of calls live at the carrier at once.
  const events: Array<[number, number]> = [];
  for (const r of records) events.push([r.createdAt, 1], [r.endedAt ?? Infinity, -1]);
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let live = 0;
  let peak = 0;
  for (const [, d] of events) peak = Math.max(peak, (live += d));
  const durations = records
    .filter((r) => r.endedAt !== null)
    .map((r) => r.endedAt! - r.createdAt)
    .sort((a, b) => a - b);
  return {
    carrierMs: percentile(durations, 50),
    started: starts.length,
    firstMs: starts[0] - t0,
    allS: (starts[starts.length - 1] - t0) / 1000,
    overall: starts.length / ((starts[starts.length - 1] - t0) / 1000),
    steady,
    peak,
  };
}

async function ratePhase(c: Ctx, watch: Watch, client: BenchChild, mode: 'batch' | 'paced' | 'requests', concurrency: number, n: number) {
  const nums = numbers(n, '0002');
  const records = watch.track(new Set(nums));
  const timeout = Math.max(120_000, n * 200);
  const profiler = cpuProfiler(`batches-${mode}-${concurrency}`);
  await profiler.start();
  const cpu0 = process.cpuUsage();
  const q0 = c.queries();
  const t0 = Date.now();
  let createMs = NaN;
  let clientInfo = '';
  if (mode === 'batch') {
    const p0 = performance.now();
    const batch = await api(c.base, 'POST', '/api/v1/batches', c.key, {
      agent_id: c.agentId,
      name: `Bench rate ${concurrency}`,
      concurrency,
      recipients: nums.map((to_number) => ({ to_number })),
    });
    createMs = performance.now() - p0;
    await waitUntil(() => records.length >= n, timeout, `${n} calls of the batch`);
    await waitUntil(
      async () => (await c.knex('batches').where({ id: batch.batch_id }).first('status')).status === 'completed',
      timeout,
      'the batch to complete',
      50,
    );
  } else {
    const asked = client.ask<{ placed: number; retried429: number; retried503: number; errors: number; lost: number; ms: number; error?: string }>(
      { cmd: 'run', mode, base: c.base, key: c.key, agentId: c.agentId, numbers: nums, concurrency },
      'done',
    );
    const done = await Promise.race([asked, sleep(timeout).then(() => Promise.reject(new Error(`the ${mode} client did not finish in ${timeout} ms`)))]);
    clientInfo = `${done.placed} placed, ${done.retried429} 429s and ${done.retried503} 503s retried, ${done.errors} errors, ${done.lost} call.completed not received${done.error ? ` (the client failed: ${done.error})` : ''}`;
    await waitUntil(() => records.length >= done.placed, timeout, `${done.placed} calls at the carrier`);
  }
  await waitUntil(async () => (await liveCalls(c)) === 0, timeout, 'every call to end', 50);
  const cpu = process.cpuUsage(cpu0);
  const queries = c.queries() - q0;
  const profile = await profiler.stop();
  if (profile) console.log(`CPU profile: ${profile}`);
  watch.take();
  const f = startFigures(records, t0, n);
  // Where a call's time went, from its rows: written -> dial claimed -> finalisation claimed -> terminal row.
  const ms = (a: string, b: string) => `percentile_cont(0.5) within group (order by extract(epoch from ${b} - ${a}) * 1000)`;
  const [parts] = (
    await c.knex.raw(
      `select ${ms('created_at', 'dial_attempted_at')} as queued, ${ms('dial_attempted_at', 'finalising_at')} as dialed, ${ms('finalising_at', 'updated_at')} as finalised
         from calls where to_number = any(?)`,
      [nums],
    )
  ).rows as Array<Record<string, number>>;
  return {
    mode,
    concurrency,
    createMs,
    clientInfo,
    serviceCpuMsPerCall: (cpu.user + cpu.system) / 1000 / f.started,
    queriesPerCall: queries / f.started,
    parts,
    ...f,
  };
}

const LABELS = {
  batch: 'batch (POST /api/v1/batches)',
  paced: 'baseline: client, <= C calls live (next on call.completed)',
  requests: 'baseline: client, C requests in flight',
};
const SHORT = { batch: 'batch', paced: 'baseline: paced client', requests: 'baseline: C requests in flight' };

async function rate(c: Ctx, client: BenchChild, watch: Watch): Promise<void> {
  const n = num('BENCH_BATCH_RECIPIENTS', 1000);
  const levels = (process.env.BENCH_BATCH_CONCURRENCY ?? '50,200').split(',').map(Number);
  const modes = (process.env.BENCH_BATCH_RATE_MODES ?? 'batch,paced,requests').split(',') as Array<'batch' | 'paced' | 'requests'>;
  const rows: Array<Record<string, string | number>> = [];
  const breakdown: Array<Record<string, string | number>> = [];
  for (const concurrency of levels) {
    for (const mode of modes) {
      const r = await ratePhase(c, watch, client, mode, concurrency, n);
      const label = LABELS[mode];
      rows.push({
        C: concurrency,
        case: label,
        calls: r.started,
        'steady calls/s (10-90%)': r1(r.steady),
        'overall calls/s': r1(r.overall),
        'first call ms': Math.round(r.firstMs),
        'all started s': r1(r.allS),
        'peak live at carrier': r.peak,
        'carrier ms/call p50': Math.round(r.carrierMs),
        'service CPU ms/call': r1(r.serviceCpuMsPerCall),
        'SQL/call': r1(r.queriesPerCall),
      });
      breakdown.push({
        C: concurrency,
        case: SHORT[mode],
        'slot cycle ms (C / steady rate)': mode === 'requests' ? '-' : Math.round((concurrency / r.steady) * 1000),
        'call row -> dial claimed p50 ms': r1(r.parts.queued),
        'dial claimed -> finalisation claimed p50 ms': r1(r.parts.dialed),
        'finalisation claimed -> terminal p50 ms': r1(r.parts.finalised),
      });
      console.log(
        JSON.stringify({ ...rows.at(-1), ...breakdown.at(-1), ...(mode === 'batch' ? { 'create ms': Math.round(r.createMs) } : { client: r.clientInfo }) }),
      );
      await sleep(1000);
    }
  }
  table(rows);
  table(breakdown);
  console.log(
    `rate: ${n} busy recipients per phase (each one short call), timed from the batch's POST (or the client's first request) to the carrier's receipt of each dial; ` +
      `"slot cycle" is how long each of C slots took per call at the steady rate (a client that did not keep C calls live has no such cycle); ` +
      `a call waits from its row to its dial claim for the call_dial job, from the claim to the carrier's busy callback claiming its finalisation (about 320 ms of it at the carrier), then for the terminal transaction. ` +
      `"service CPU" is this process's (service, sandbox carriers, the benchmark's light polling) user+system time per call over the phase, the baseline client's own process not included; "SQL/call" counts the statements the service sent through knex until every call had ended (graphile-worker's own job fetching and completion not included). Goal: >= 50 calls/s.`,
  );
}

// 3. Lag

async function lag(c: Ctx, watch: Watch, env: Record<string, string>): Promise<void> {
  const count = num('BENCH_BATCH_LAG_BATCHES', 50);
  const minS = num('BENCH_BATCH_LAG_MIN_S', 2);
  const maxS = num('BENCH_BATCH_LAG_MAX_S', 10);
  const config = loadConfig({ DATABASE_URL: c.service.db.url, ...env });
  const baselineLags: number[] = [];
  const queue = new JobQueue(
    c.knex,
    { connectionString: c.service.db.url, concurrency: config.JOBS_CONCURRENCY, pollIntervalMs: config.JOBS_POLL_INTERVAL_MS },
    createLogger('silent'),
  );
  const timer = jobKind<{ at: string; n: number }>({
    name: 'bench_timer',
    parse: (raw) => (typeof raw.at === 'string' && typeof raw.n === 'number' ? { at: raw.at, n: raw.n } : null),
    key: (p) => `bench_timer:${p.n}`,
  });
  queue.register(timer, async (payload) => {
    baselineLags.push(Date.now() - Date.parse(payload.at));
  });
  await queue.start();
  const batches: Array<{ id: string; at: number; to: string }> = [];
  const lagNumbers = numbers(count, '0002');
  const records = watch.track(new Set(lagNumbers));
  try {
    for (let i = 0; i < count; i++) {
      const at = new Date(Date.now() + (minS + Math.random() * (maxS - minS)) * 1000);
      const to = lagNumbers[i];
      const b = await api(c.base, 'POST', '/api/v1/batches', c.key, {
        agent_id: c.agentId,
        name: `Bench lag ${i}`,
        recipients: [{ to_number: to }],
        scheduled_at: at.toISOString(),
      });
      await queue.add(timer, { at: at.toISOString(), n: i }, { runAt: at });
      batches.push({ id: b.batch_id, at: at.getTime(), to });
    }
    const last = Math.max(...batches.map((b) => b.at));
    await sleep(Math.max(0, last - Date.now()));
    await waitUntil(
      async () => {
        const [row] = await c
          .knex('batches')
          .whereIn(
            'id',
            batches.map((b) => b.id),
          )
          .where('status', 'completed')
          .count<{ count: string }[]>('* as count');
        return Number(row.count) === count && baselineLags.length === count;
      },
      60_000,
      'the scheduled batches to complete',
      50,
    );
  } finally {
    await queue.stop();
  }
  const rows: Array<{ id: string; created: number; dialed: number }> = (
    await c.knex.raw(
      `select b.id, extract(epoch from min(c.created_at) - b.scheduled_at) * 1000 as created, extract(epoch from min(c.dial_attempted_at) - b.scheduled_at) * 1000 as dialed
         from batches b join calls c on c.batch_id = b.id where b.id = any(?) group by b.id, b.scheduled_at`,
      [batches.map((b) => b.id)],
    )
  ).rows.map((r: Record<string, string>) => ({ id: r.id, created: Number(r.created), dialed: Number(r.dialed) }));
  watch.take();
  const byNumber = new Map(records.map((r) => [r.to, r.createdAt]));
  const carrier = batches.map((b) => (byNumber.get(b.to) ?? NaN) - b.at);
  const line = (name: string, v: number[]) => {
    const s = stats(v);
    return {
      measure: name,
      n: v.length,
      'p50 ms': r1(s.p50),
      'p99 ms': r1(s.p99),
      'max ms': r1(s.max),
      'min ms': r1(s.min),
      early: v.filter((x) => x < 0).length,
    };
  };
  table([
    line(
      'batch: scheduled_at -> call row (calls.created_at)',
      rows.map((r) => r.created),
    ),
    line(
      'batch: scheduled_at -> dial claimed (dial_attempted_at)',
      rows.map((r) => r.dialed),
    ),
    line('batch: scheduled_at -> carrier received the dial', carrier.filter(Number.isFinite)),
    line('baseline: job queue, trivial task at the same times', baselineLags),
  ]);
  console.log(
    `lag: ${count} one-recipient batches scheduled ${minS}-${maxS} s ahead, each with a trivial job of a separate JobQueue at the same instant ` +
      `(JOBS_CONCURRENCY ${config.JOBS_CONCURRENCY}, JOBS_POLL_INTERVAL_MS ${config.JOBS_POLL_INTERVAL_MS}: a future job is found by polling). ` +
      `calls.created_at is the dispatch transaction's start, taken before the round reads the clock, so a few ms "early" there is not an early dial. Goal: p99 < 1 s, no early start.`,
  );
}

export async function run(): Promise<void> {
  const parts = new Set((process.env.BENCH_BATCH_PARTS ?? 'create,rate,lag').split(','));
  // The create part leaves a dozen batches of 10,000 recipients waiting: more than a workspace's default cap.
  const env: Record<string, string> = { ADMIN_TOKEN: ADMIN, SANDBOX_CARRIERS_RING_MS: '20', BATCH_MAX_WAITING_RECIPIENTS_PER_WORKSPACE: '10000000' };
  for (const k of PASS_THROUGH) if (process.env[k]) env[k] = process.env[k]!;
  const effective = loadConfig({ DATABASE_URL: 'postgres://x/y', ...env });
  console.log(
    `service: JOBS_CONCURRENCY ${effective.JOBS_CONCURRENCY}, JOBS_POLL_INTERVAL_MS ${effective.JOBS_POLL_INTERVAL_MS}, BATCH_DISPATCH_CHUNK ${effective.BATCH_DISPATCH_CHUNK}, ` +
      `DATABASE_POOL_MAX ${effective.DATABASE_POOL_MAX}, SANDBOX_CARRIERS_RING_MS ${effective.SANDBOX_CARRIERS_RING_MS}, SANDBOX_CARRIERS_SPEED ${effective.SANDBOX_CARRIERS_SPEED}, CALL_RING_TIMEOUT_S ${effective.CALL_RING_TIMEOUT_S}, ` +
      `WEBHOOK_CONCURRENCY ${effective.WEBHOOK_CONCURRENCY}; provider_a sandbox in-process`,
  );
  const db = await benchDatabase();
  const service = await startBenchService(db.url, env);
  let client: BenchChild | undefined;
  const watch = carrierWatch(service);
  const knex = knexFactory({ client: 'pg', connection: db.url, pool: { min: 0, max: 2 } });
  let queries = 0;
  // BENCH_SQL_PROFILE=1 prints the statements the service sent, most frequent first (to find what a call costs).
  const profile = process.env.BENCH_SQL_PROFILE ? new Map<string, number>() : null;
  service.db.knex.on('query', (q: { sql: string }) => {
    queries++;
    if (profile) {
      const text = q.sql.replace(/\s+/g, ' ').slice(0, 140);
      profile.set(text, (profile.get(text) ?? 0) + 1);
    }
  });
  try {
    const base = service.url;
    const signup = await api(base, 'POST', '/api/v1/auth/signup', null, {
      email: `bench-batches-${Date.now()}@example.com`,
      password: 'correct-horse-battery',
      workspace_name: 'Bench',
    });
    const key = (await api(base, 'POST', '/api/v1/keys', signup.session_token, { name: 'bench' })).key as string;
    const limit = num('BENCH_BATCH_WORKSPACE_LIMIT', 500);
    await api(base, 'PATCH', `/admin/v1/workspaces/${signup.workspace.id}`, ADMIN, {
      plan: 'enterprise',
      concurrent_session_limit: limit,
      credit_balance_cents: 1_000_000_000,
    });
    // The bench places thousands of calls: more than the default daily cap.
    await api(base, 'PATCH', `/admin/v1/workspaces/${signup.workspace.id}/destination-policy`, ADMIN, { daily_call_cap: null });
    const agent = await api(base, 'POST', '/api/v1/agents', key, {
      name: 'Bench',
      instruction: 'You are the receptionist of Acme Dental.',
      first_message: 'Hello! This is Acme Dental. How can I help you today?',
      provider_a_config: { account_sid: `AC${randomBytes(16).toString('hex')}`, auth_token: randomBytes(16).toString('hex'), phone_number: '+14155550100' },
    });
    const c: Ctx = { service, knex, queries: () => queries, base, key, agentId: agent.agent_id, workspaceId: signup.workspace.id };
    console.log(`workspace concurrent_session_limit ${limit}`);
    if (parts.has('create')) await create(c);
    if (parts.has('rate')) {
      client = await forkChild(path.join(import.meta.dirname, 'batches/client.ts'), [], {});
      await rate(c, client, watch);
    }
    if (parts.has('lag')) await lag(c, watch, env);
  } finally {
    watch.stop();
    if (client) {
      const exited = new Promise((r) => client!.proc.once('exit', r));
      client.proc.send({ cmd: 'exit' });
      await Promise.race([exited, sleep(5000)]);
      if (client.proc.exitCode === null) client.proc.kill('SIGKILL');
    }
    await knex.destroy();
    await service.close();
    await db.drop();
    if (profile) for (const [text, n] of [...profile].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(String(n).padStart(8), text);
  }
}
