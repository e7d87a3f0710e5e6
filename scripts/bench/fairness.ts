/**
 * Fair dispatch (issue 21): `npm run bench -- fairness`. The service runs in this process
 * (startBenchService, its in-process sandbox carriers) with its default job settings.
 *
 * One workspace ("other") places calls with `POST /api/v1/calls`, one at a time, to numbers ending in
 * 0002 (busy after the sandbox's ring); per call the time from the request sent to the dial request
 * received by the sandbox carrier (its call record's `createdAt`): what a developer waits before the
 * phone rings. Measured twice in the same run:
 * - alone: nothing else in the service;
 * - beside: a neighbour workspace with no free concurrency slot (its limit is 0) has
 *   BENCH_FAIRNESS_BATCHES (500) batches of one recipient waiting for one (created first, their first
 *   dispatch rounds run), and they keep waiting (and being looked at) while the calls are measured.
 * BENCH_FAIRNESS_CALLS (40) calls per phase after BENCH_FAIRNESS_WARMUP (5). Goal: beside within 100 ms
 * of alone at p99. Knobs passed through to the service when set: JOBS_CONCURRENCY,
 * JOBS_POLL_INTERVAL_MS, BATCH_CAPACITY_RETRY_MS, DATABASE_POOL_MAX.
 */
import { randomBytes } from 'node:crypto';
import { api, benchDatabase, percentile, startBenchService, table } from './lib.js';
import { loadConfig } from '../../src/config.js';
import type { RunningService } from '../../src/service.js';

const ADMIN = 'bench-operator-token-0123456789';
const PASS_THROUGH = ['JOBS_CONCURRENCY', 'JOBS_POLL_INTERVAL_MS', 'BATCH_CAPACITY_RETRY_MS', 'DATABASE_POOL_MAX'];
const num = (name: string, dflt: number) => Number(process.env[name] ?? dflt);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const r1 = (n: number) => (Number.isFinite(n) ? Math.round(n * 10) / 10 : '-');

const AREA_CODES = [415, 212, 312, 617, 206, 303, 404, 512, 602, 702, 801, 919];
let serial = 0;
/** A distinct valid North American number ending in `suffix`. */
const nextNumber = (suffix: string) => {
  const k = serial++;
  return `+1${AREA_CODES[Math.floor(k / 800) % AREA_CODES.length]}${200 + (k % 800)}${suffix}`;
};

interface Workspace {
  key: string;
  id: string;
  agentId: string;
}

async function workspace(base: string, name: string, limit: number): Promise<Workspace> {
  const signup = await api(base, 'POST', '/api/v1/auth/signup', null, {
    email: `bench-fairness-${name}-${Date.now()}@example.com`,
    password: 'correct-horse-battery',
    workspace_name: name,
  });
  const key = (await api(base, 'POST', '/api/v1/keys', signup.session_token, { name: 'bench' })).key as string;
  await api(base, 'PATCH', `/admin/v1/workspaces/${signup.workspace.id}`, ADMIN, {
    plan: 'enterprise',
    concurrent_session_limit: limit,
    credit_balance_cents: 1_000_000_000,
  });
  await api(base, 'PATCH', `/admin/v1/workspaces/${signup.workspace.id}/destination-policy`, ADMIN, { daily_call_cap: null });
  const agent = await api(base, 'POST', '/api/v1/agents', key, {
    name: 'Bench',
    instruction: 'You are the receptionist of Acme Dental.',
    first_message: 'Hello! This is Acme Dental.',
    provider_a_config: { account_sid: `AC${randomBytes(16).toString('hex')}`, auth_token: randomBytes(16).toString('hex'), phone_number: '+14155550100' },
  });
  return { key, id: signup.workspace.id, agentId: agent.agent_id };
}

/** One call: ms from the request sent to the carrier's receipt of the dial request. */
async function toDialing(service: RunningService, ws: Workspace): Promise<number> {
  const to = nextNumber('0002');
  const carrier = service.sandbox.carriers!.server;
  const t0 = Date.now();
  const dialed = carrier.waitForCall((c) => c.to === to, 60_000);
  await api(service.url, 'POST', '/api/v1/calls', ws.key, { agent_id: ws.agentId, to_number: to });
  const record = await dialed;
  return record.createdAt - t0;
}

async function phase(service: RunningService, ws: Workspace, warmup: number, n: number): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await toDialing(service, ws);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    out.push(await toDialing(service, ws));
    await sleep(20);
  }
  return out;
}

function row(name: string, values: number[]) {
  const s = [...values].sort((a, b) => a - b);
  return { phase: name, calls: s.length, p50_ms: r1(percentile(s, 50)), p99_ms: r1(percentile(s, 99)), max_ms: r1(s[s.length - 1]) };
}

async function pendingRounds(service: RunningService): Promise<number> {
  const { rows } = await service.db.knex.raw(
    `select count(*)::int as n from graphile_worker.jobs where task_identifier = 'batch_dispatch' and run_at <= now()`,
  );
  return rows[0].n;
}

export async function run(): Promise<void> {
  const batches = num('BENCH_FAIRNESS_BATCHES', 500);
  const calls = num('BENCH_FAIRNESS_CALLS', 40);
  const warmup = num('BENCH_FAIRNESS_WARMUP', 5);
  const env: Record<string, string> = {
    ADMIN_TOKEN: ADMIN,
    SANDBOX_CARRIERS_RING_MS: '20',
    BATCH_MAX_OPEN_PER_WORKSPACE: String(batches + 10),
    BATCH_MAX_WAITING_RECIPIENTS_PER_WORKSPACE: String(batches + 10),
  };
  for (const k of PASS_THROUGH) if (process.env[k]) env[k] = process.env[k]!;
  const effective = loadConfig({ DATABASE_URL: 'postgres://x/y', ...env });
  console.log(
    `service: JOBS_CONCURRENCY ${effective.JOBS_CONCURRENCY}, JOBS_POLL_INTERVAL_MS ${effective.JOBS_POLL_INTERVAL_MS}, ` +
      `BATCH_CAPACITY_RETRY_MS ${effective.BATCH_CAPACITY_RETRY_MS}, DATABASE_POOL_MAX ${effective.DATABASE_POOL_MAX}; ${batches} neighbour batches, ${calls} calls per phase`,
  );
  const db = await benchDatabase();
  const service = await startBenchService(db.url, env);
  try {
    const base = service.url;
    const other = await workspace(base, 'Other', 50);
    // No free slot ever: every round of the neighbour's batches comes up short, and they keep waiting.
    const neighbour = await workspace(base, 'Neighbour', 0);
    const alone = await phase(service, other, warmup, calls);

    const t0 = Date.now();
    for (let i = 0; i < batches; i++) {
      await api(base, 'POST', '/api/v1/batches', neighbour.key, {
        agent_id: neighbour.agentId,
        name: `Waiting ${i}`,
        recipients: [{ to_number: nextNumber('0002') }],
      });
    }
    while ((await pendingRounds(service)) > 0) await sleep(50);
    console.log(`neighbour: ${batches} batches created and first rounds run in ${Date.now() - t0} ms; none has a slot to wait for`);
    const beside = await phase(service, other, warmup, calls);
    const rows = [row('alone', alone), row(`beside ${batches} waiting batches`, beside)];
    table(rows);
    const diff = Number(rows[1].p99_ms) - Number(rows[0].p99_ms);
    console.log(`p99 beside - alone: ${r1(diff)} ms (goal: <= 100 ms)`);
  } finally {
    await service.close();
    await db.drop();
  }
}
