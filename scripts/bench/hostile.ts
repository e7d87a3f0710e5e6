/**
 * Hostile requests beside a neighbour (issue 32): `npm run bench -- hostile`.
 *
 * The service runs in this process (startBenchService; `OUTBOUND_ALLOW_LIST=127.0.0.1` so tools and
 * inbound setup can call a receiver here), its peers as processes of their own, as deployed: the
 * sandbox carriers and the sandbox voice service (`npm run sandbox`, scripts/sandbox.ts). A
 * neighbour workspace's client runs in a process of its own (hostile/neighbour.ts): one request at a
 * time, every BENCH_HOSTILE_PACE_MS (100), alternating create call and get call. Its request latency
 * is measured alone for BENCH_HOSTILE_WINDOW_MS (3000), then beside each hostile request of the issue
 * sent by another workspace, over the hostile request's whole run and at least the same window. Per
 * phase: the neighbour's requests, p50 and p99, the difference of p99 from alone (goal: at most 100
 * ms), non-2xx answers, and the hostile request's status and duration. Hostile requests that fixes
 * now refuse are still sent: their row shows what the refusal costs the neighbour.
 * Everything the hostile client sends is built before its phase, and realtime frames are built and
 * sent by a process of their own (hostile/realtime-client.ts), and the carrier that plays the key
 * flood is the carriers' process, so what the loop spends on it is the service's own.
 * On a busy machine the neighbour's p99 (the slowest of about 30 requests) is mostly the machine's:
 * each row also has what the service's own loop spent over the phase, less exposed to the load:
 * `loop_cpu_ms`, the CPU time of the service's loop thread (the window's length at least, so compare
 * with alone's), and `block_ms`, its longest block by work (test/helpers/loop-watch.ts); and beside
 * them `process_cpu_ms` (the service's whole process: the collector's helper threads and the kernel's
 * work for its sockets too), `gc_ms` (the collector's pauses of the loop) and `client_cpu_ms` (the
 * hostile realtime client's process, which shares the machine's cores with the service).
 * BENCH_HOSTILE_ONLY=<text>,... runs only the hostile requests whose name contains one of them;
 * BENCH_CPU_PROF=<dir> writes a CPU profile of the service's process over each (cpu-profile.ts).
 */
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { PerformanceObserver } from 'node:perf_hooks';
import { benchDatabase, cpuProfiler, forkChild, percentile, startBenchService, table, type BenchChild } from './lib.js';
import { openSse } from '../../test/helpers/sse.js';
import { cpuMs, loopWatch } from '../../test/helpers/loop-watch.js';
import type { RunningService } from '../../src/service.js';

const ADMIN = 'bench-operator-token-0123456789';
const num = (name: string, dflt: number) => Number(process.env[name] ?? dflt);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const r1 = (n: number) => (Number.isFinite(n) ? Math.round(n * 10) / 10 : '-');
const hex = (n: number) => randomBytes(n).toString('hex');

interface Answer {
  status: number;
  body: Record<string, any>;
}

async function api(base: string, method: string, p: string, token: string | null, body?: unknown): Promise<Answer> {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, any>;
  try {
    json = text ? (JSON.parse(text) as Record<string, any>) : {};
  } catch {
    json = { text: text.slice(0, 200) };
  }
  return { status: res.status, body: json };
}

async function ok(base: string, method: string, p: string, token: string | null, body?: unknown): Promise<Record<string, any>> {
  const r = await api(base, method, p, token, body);
  if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
  return r.body;
}

let serial = 0;
/** A distinct valid San Francisco number ending in `suffix` (the sandbox carrier's outcome). */
const number = (suffix: string) => `+1415${200 + (serial++ % 800)}${suffix}`;

interface Workspace {
  key: string;
  id: string;
}

async function workspace(base: string, name: string): Promise<Workspace> {
  const signup = await ok(base, 'POST', '/api/v1/auth/signup', null, {
    email: `bench-hostile-${name}-${Date.now()}@example.com`,
    password: 'correct-horse-battery',
    workspace_name: name,
  });
  const key = (await ok(base, 'POST', '/api/v1/keys', signup.session_token, { name: 'bench' })).key as string;
  await ok(base, 'PATCH', `/admin/v1/workspaces/${signup.workspace.id}`, ADMIN, {
    plan: 'enterprise',
    concurrent_session_limit: 50,
    credit_balance_cents: 1_000_000_000,
  });
  await ok(base, 'PATCH', `/admin/v1/workspaces/${signup.workspace.id}/destination-policy`, ADMIN, { daily_call_cap: null });
  return { key, id: signup.workspace.id };
}

const providerA = (phone = number('5000')) => ({ provider_a_config: { account_sid: `AC${hex(16)}`, auth_token: hex(16), phone_number: phone } });

async function agent(base: string, ws: Workspace, body: Record<string, unknown> = {}): Promise<string> {
  const a = await ok(base, 'POST', '/api/v1/agents', ws.key, {
    name: 'Bench',
    instruction: 'You are the receptionist of Acme Dental.',
    first_message: 'Hello! This is Acme Dental.',
    ...providerA(),
    ...body,
  });
  return a.agent_id as string;
}

/** A local receiver for tools and inbound setup: answers each request with `answer(path)`. */
async function receiver(answer: (path: string) => string) {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'Content-Type': 'application/json' }).end(answer(req.url ?? '/')));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Waits for a call to end (or `limitMs`); its last status. */
async function callEnd(base: string, key: string, callId: string, limitMs = 60_000): Promise<string> {
  const until = Date.now() + limitMs;
  for (;;) {
    const r = await api(base, 'GET', `/api/v1/calls/${callId}`, key);
    const status = String(r.body.status ?? r.status);
    if (['completed', 'failed', 'busy', 'no_answer', 'canceled', 'voicemail'].includes(status) || Date.now() > until) return status;
    await sleep(250);
  }
}

/** One hostile request: `prepare` builds what it sends (not measured), `send` is measured. */
interface Hostile {
  name: string;
  prepare?: () => Promise<void>;
  send: () => Promise<string>;
}

function hostileRequests(service: RunningService, carriers: BenchChild, ws: Workspace, hooks: { url: string }, client: BenchChild): Hostile[] {
  const base = service.url;
  const state: Record<string, any> = {};
  const manyProperties = {
    type: 'object',
    properties: Object.fromEntries(
      Array.from({ length: 1500 }, (_, i) => [`field_${i}`, { type: 'string', description: `The value of field number ${i} of the form.` }]),
    ),
  };
  const levels = 21;
  const branching = {
    type: 'object',
    properties: { x: { $ref: '#/$defs/l0' } },
    $defs: Object.fromEntries(
      Array.from({ length: levels + 1 }, (_, i) => [
        `l${i}`,
        i === levels ? { enum: ['ok'] } : { anyOf: [{ $ref: `#/$defs/l${i + 1}` }, { $ref: `#/$defs/l${i + 1}` }] },
      ]),
    ),
  };
  const status = (r: Answer) => `${r.status}${r.body.error?.code ? ` ${r.body.error.code}` : ''}`;
  return [
    {
      name: 'tool schema of 1,500 properties: create',
      prepare: async () => {
        state.bigTool = JSON.stringify({ name: `big_${hex(4)}`, description: 'A big tool.', url: `${hooks.url}/tool`, parameters: manyProperties });
      },
      send: async () => {
        const r = await api(base, 'POST', '/api/v1/tools', ws.key, state.bigTool);
        state.bigToolId = r.body.tool_id;
        return status(r);
      },
    },
    {
      name: 'tool schema of 1,500 properties: test',
      send: async () =>
        state.bigToolId ? status(await api(base, 'POST', `/api/v1/tools/${state.bigToolId}/test`, ws.key, { arguments: { field_0: 'a' } })) : 'not created',
    },
    {
      name: `$ref-branching tool schema (${levels} levels): test`,
      prepare: async () => {
        const r = await api(base, 'POST', '/api/v1/tools', ws.key, {
          name: `branch_${hex(4)}`,
          description: 'Branches.',
          url: `${hooks.url}/tool`,
          parameters: branching,
        });
        state.branchToolId = r.body.tool_id;
        state.branchCreate = status(r);
      },
      send: async () =>
        state.branchToolId
          ? status(await api(base, 'POST', `/api/v1/tools/${state.branchToolId}/test`, ws.key, { arguments: { x: 'not ok' } }))
          : `create ${state.branchCreate}`,
    },
    {
      name: 'placeholder bomb: call (10,000 {{a}} x 2,000 chars)',
      prepare: async () => {
        state.bombAgent = await agent(base, ws, { instruction: '{{a}}'.repeat(10_000) });
      },
      send: async () =>
        status(await api(base, 'POST', '/api/v1/calls', ws.key, { agent_id: state.bombAgent, to_number: number('0002'), variables: { a: 'x'.repeat(2000) } })),
    },
    {
      name: 'placeholder bomb: batch of 10 recipients',
      send: async () =>
        status(
          await api(base, 'POST', '/api/v1/batches', ws.key, {
            agent_id: state.bombAgent,
            name: 'Bomb',
            recipients: Array.from({ length: 10 }, () => ({ to_number: number('0002'), variables: { a: 'x'.repeat(2000) } })),
          }),
        ),
    },
    {
      name: 'key flood: 20,000 # on a carrier media stream',
      prepare: async () => {
        state.keyAgent = await agent(base, ws);
        state.keyTo = number('6702');
        carriers.proc.send({
          cmd: 'script',
          to: state.keyTo,
          script: [{ waitForAgent: true }, { pressDigits: '#'.repeat(20_000), gapMs: 0 }, { waitForAgent: true, maxMs: 5_000 }, { hangup: true }],
        });
      },
      send: async () => {
        const r = await api(base, 'POST', '/api/v1/calls', ws.key, { agent_id: state.keyAgent, to_number: state.keyTo });
        if (r.status !== 201) return status(r);
        state.finishedCall = r.body.call_id;
        return `call ${await callEnd(base, ws.key, r.body.call_id, 30_000)}`;
      },
    },
    {
      name: 'realtime text flood: 3,000 typed messages',
      prepare: async () => {
        state.textAgent = await agent(base, ws);
        await build(client, { kind: 'text', count: 3000 });
      },
      send: () => realtimeFlood(base, ws, client, state.textAgent, 'text'),
    },
    {
      name: 'realtime image flood: 40 images of 2.9 MB',
      prepare: async () => {
        state.camAgent ??= await agent(base, ws);
        await build(client, { kind: 'image', count: 40 });
      },
      send: () => realtimeFlood(base, ws, client, state.camAgent, 'camera'),
    },
    {
      // The largest image a frame holds (2 MiB and 1,000 bytes, a frame of 2.80 MB): each one read in
      // full and refused, what every 2.9 MB image cost before frames were limited to 2,800,300 bytes.
      name: 'realtime image flood: 40 images of 2 MiB + 1,000 bytes (within the frame limit)',
      prepare: async () => {
        state.camAgent ??= await agent(base, ws);
        await build(client, { kind: 'image', count: 40, bytes: 2 * 1024 * 1024 + 1000 });
      },
      send: () => realtimeFlood(base, ws, client, state.camAgent, 'camera'),
    },
    {
      name: 'webhook events array of 0.9 MB',
      prepare: async () => {
        state.eventsBody = JSON.stringify({ url: `${hooks.url}/hook`, events: Array.from({ length: 56_000 }, () => 'call.completed') });
      },
      send: async () => status(await api(base, 'POST', '/api/v1/webhooks', ws.key, state.eventsBody)),
    },
    {
      name: 'array of 80,000 integers (webhook events)',
      prepare: async () => {
        state.intsBody = JSON.stringify({ url: `${hooks.url}/hook`, events: Array.from({ length: 80_000 }, (_, i) => i) });
      },
      send: async () => status(await api(base, 'POST', '/api/v1/webhooks', ws.key, state.intsBody)),
    },
    {
      name: 'live event stream resumed past the end',
      send: async () => {
        if (!state.finishedCall) return 'no finished call';
        const url = `${base}/api/v1/calls/${state.finishedCall}/events`;
        const [past, huge] = await Promise.all([
          openSse(url, { Authorization: `Bearer ${ws.key}`, 'Last-Event-ID': '100000' }),
          openSse(url, { Authorization: `Bearer ${ws.key}`, 'Last-Event-ID': '999999999999999' }),
        ]);
        const ended = await Promise.race([Promise.all([past.ended, huge.ended]).then(() => 'ended'), sleep(3000).then(() => 'still open after 3 s')]);
        past.close();
        huge.close();
        return `${past.status}/${huge.status} ${ended}`;
      },
    },
    {
      name: 'usage in timezone US/Pacific-New',
      send: async () => status(await api(base, 'GET', '/api/v1/usage?timezone=US/Pacific-New', ws.key)),
    },
    {
      name: 'inbound setup answer with a NUL',
      prepare: async () => {
        const phone = number('5001');
        const id = await agent(base, ws, { ...providerA(phone), inbound_setup: { url: `${hooks.url}/setup` } });
        await ok(base, 'POST', `/api/v1/agents/${id}/telephony/provider_a/inbound`, ws.key);
        state.inboundNumber = phone;
      },
      send: async () => {
        // The carriers' process rings the number (POST /api/v1/sandbox/inbound-calls is for in-process sandbox carriers).
        const rang = await carriers.ask<{ callSid?: string; error?: string }>(
          { cmd: 'ring', input: { provider: 'provider_a', from: number('0199'), to: state.inboundNumber } },
          'rang',
        );
        if (!rang.callSid) return `ring failed: ${rang.error}`;
        const call = await service.db.knex('calls').where({ provider: 'provider_a', call_sid: rang.callSid }).first('id');
        if (!call) return 'no call for the ring';
        return `call ${await callEnd(base, ws.key, call.id as string)}`;
      },
    },
    {
      name: 'self-referencing analysis schema + text session',
      prepare: async () => {
        const r = await api(base, 'POST', '/api/v1/agents', ws.key, {
          name: 'Self',
          instruction: 'You are the receptionist of Acme Dental.',
          analysis: { schema: { type: 'object', properties: { a: { $ref: '#' } } } },
        });
        state.selfAgent = r.body.agent_id;
        state.selfCreate = status(r);
        await build(client, { kind: 'one', count: 1 });
      },
      send: async () => (state.selfAgent ? realtimeFlood(base, ws, client, state.selfAgent, 'text') : `create ${state.selfCreate}`),
    },
  ];
}

/** Has the realtime client process (hostile/realtime-client.ts) build the frames of its next flood (before the phase). */
async function build(client: BenchChild, frames: { kind: 'text' | 'image' | 'one'; count: number; bytes?: number }): Promise<void> {
  await client.ask<number>({ cmd: 'build', frames }, 'built');
}

/** Mints a realtime session and has the realtime client process send the frames it built on it. */
async function realtimeFlood(base: string, ws: Workspace, client: BenchChild, agentId: string, source: string): Promise<string> {
  const minted = await api(base, 'POST', '/api/v1/realtime/sessions', ws.key, { agent_id: agentId, user_id: `bench-${hex(4)}`, source });
  if (minted.status !== 201) return `session ${minted.status} ${minted.body.error?.code ?? ''}`;
  return client.ask<string>({ cmd: 'flood', url: minted.body.ws_url }, 'result');
}

/**
 * After a phase, what the hostile request left running (a call, jobs) may still load the service:
 * waits, a second at a time, until the neighbour's requests of a second are all within `limitMs`, at
 * most `maxMs`; the time it took, or '>max' when they never were.
 */
async function settle(take: () => Promise<Array<{ ms: number; status: number }>>, limitMs: number, maxMs: number): Promise<number | string> {
  const t0 = performance.now();
  while (performance.now() - t0 < maxMs) {
    await sleep(1000);
    const samples = await take();
    if (samples.length > 0 && samples.every((x) => x.ms <= limitMs)) return Math.round(performance.now() - t0);
  }
  return `>${maxMs}`;
}

/** CPU time (user + system) a process of this machine has used, from /proc (Linux; NaN elsewhere). */
function pidCpuMs(pid: number | undefined): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return NaN;
  }
}

/** The collector's pauses of this process's loop, in ms, since it started. */
let gcPauseMs = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) gcPauseMs += e.duration;
}).observe({ entryTypes: ['gc'] });

interface PhaseCpu {
  /** The service's loop thread. */
  cpuMs: number;
  /** The service's whole process: its loop, the collector's helper threads, the worker pools, the kernel's work for its sockets. */
  processMs: number;
  /** The loop's time in the collector's pauses. */
  gcMs: number;
  /** The hostile realtime client's process (what sending costs this machine). */
  clientMs: number;
}

/** `fn`'s value and the CPU time the service (its loop and the whole process) and the hostile client used while it ran. */
async function loopCpu<T>(fn: () => Promise<T>, client?: BenchChild): Promise<{ value: T } & PhaseCpu> {
  const before = { cpu: cpuMs(), process: process.cpuUsage(), gc: gcPauseMs, client: pidCpuMs(client?.proc.pid) };
  const value = await fn();
  const used = process.cpuUsage(before.process);
  return {
    value,
    cpuMs: cpuMs() - before.cpu,
    processMs: (used.user + used.system) / 1000,
    gcMs: gcPauseMs - before.gc,
    clientMs: pidCpuMs(client?.proc.pid) - before.client,
  };
}

function summary(samples: Array<{ ms: number; status: number }>) {
  const s = samples.map((x) => x.ms).sort((a, b) => a - b);
  const counts = new Map<number, number>();
  for (const x of samples) if (x.status < 200 || x.status >= 300) counts.set(x.status, (counts.get(x.status) ?? 0) + 1);
  const non2xx = [...counts].map(([status, n]) => `${n}x${status}`).join(' ') || '0';
  return { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), non2xx };
}

export async function run(): Promise<void> {
  const pace = num('BENCH_HOSTILE_PACE_MS', 100);
  const windowMs = num('BENCH_HOSTILE_WINDOW_MS', 3000);
  const settleMs = num('BENCH_HOSTILE_SETTLE_MS', 30_000);
  const db = await benchDatabase();
  const sandbox = path.join(import.meta.dirname, '../sandbox.ts');
  const carriers = await forkChild(sandbox, ['carriers'], { PORT: '0', SPEED: '1', RING_MS: '20', LOG_LEVEL: 'silent' });
  const voice = await forkChild(sandbox, ['voice'], { PORT: '0', SPEED: '1', LOG_LEVEL: 'silent' });
  const service = await startBenchService(db.url, {
    ADMIN_TOKEN: ADMIN,
    OUTBOUND_ALLOW_LIST: '127.0.0.1',
    PROVIDER_A_API_URL: carriers.info.providerAUrl,
    PROVIDER_B_API_URL: carriers.info.providerBUrl,
    VOICE_SERVICE_URL: voice.info.url,
    // The overload guard answers 503 when the loop lags, which on a shared machine it does without any
    // hostile request: off (as in the tests), so each row shows the request's own cost. BENCH_HOSTILE_OVERLOAD=1 keeps it.
    ...(process.env.BENCH_HOSTILE_OVERLOAD ? {} : { OVERLOAD_LOOP_DELAY_MS: '0', OVERLOAD_DB_WAITING: '0' }),
  });
  const hooks = await receiver((p) => (p.startsWith('/setup') ? '{"first_message":"Hello\\u0000 there"}' : '{"ok":true}'));
  let neighbourProc: BenchChild | undefined;
  let realtimeClient: BenchChild | undefined;
  try {
    const base = service.url;
    const neighbour = await workspace(base, 'Neighbour');
    const hostile = await workspace(base, 'Hostile');
    const neighbourAgent = await agent(base, neighbour);
    neighbourProc = await forkChild(path.join(import.meta.dirname, 'hostile/neighbour.ts'), [], {
      NEIGHBOUR_URL: base,
      NEIGHBOUR_KEY: neighbour.key,
      NEIGHBOUR_AGENT: neighbourAgent,
      NEIGHBOUR_PACE_MS: String(pace),
    });
    realtimeClient = await forkChild(path.join(import.meta.dirname, 'hostile/realtime-client.ts'), [], {});
    const only = process.env.BENCH_HOSTILE_ONLY?.split(',');
    // BENCH_CPU_PROF=<dir>: a profile of the service's process over each hostile request (cpu-profile.ts).
    const profiler = cpuProfiler('hostile');
    const take = () => neighbourProc!.ask<Array<{ ms: number; status: number }>>({ cmd: 'take' }, 'taken');
    console.log(`neighbour: one request every ${pace} ms (create call, get call); window ${windowMs} ms a phase`);
    await sleep(windowMs);
    await take(); // warm-up
    const watch = loopWatch();
    const aloneLoop = await watch.measure(() => loopCpu(() => sleep(windowMs), realtimeClient));
    const alone = summary(await take());
    const rows: Array<Record<string, string | number>> = [
      {
        phase: 'alone',
        hostile_status: '-',
        hostile_ms: '-',
        n: alone.n,
        p50_ms: r1(alone.p50),
        p99_ms: r1(alone.p99),
        p99_diff_ms: 0,
        loop_cpu_ms: r1(aloneLoop.value.cpuMs),
        process_cpu_ms: r1(aloneLoop.value.processMs),
        gc_ms: r1(aloneLoop.value.gcMs),
        client_cpu_ms: r1(aloneLoop.value.clientMs),
        block_ms: r1(aloneLoop.blockedMs),
        non2xx: alone.non2xx,
        settled_ms: '-',
      },
    ];
    for (const h of hostileRequests(service, carriers, hostile, hooks, realtimeClient).filter((x) => !only || only.some((o) => x.name.includes(o)))) {
      let outcome: string;
      let took = NaN;
      let loop = { cpu: NaN, process: NaN, gc: NaN, client: NaN, block: NaN };
      // What the hostile request throws in the service's code, uncaught, would end a service process.
      let crash: string | undefined;
      let onCrash: (err: Error) => void = () => undefined;
      const crashed = new Promise<string>((resolve) => {
        onCrash = (err) => {
          crash = `uncaught ${err.name} in the service (would end its process)`;
          resolve(crash);
        };
      });
      process.on('uncaughtException', onCrash);
      try {
        await h.prepare?.();
        await take();
        await profiler.start();
        const t0 = performance.now();
        const measured = await watch.measure(() =>
          loopCpu(
            () =>
              Promise.all([
                Promise.race([h.send(), crashed]).finally(() => {
                  took = performance.now() - t0;
                }),
                sleep(windowMs),
              ]),
            realtimeClient,
          ),
        );
        [outcome] = measured.value.value;
        const v = measured.value;
        loop = { cpu: v.cpuMs, process: v.processMs, gc: v.gcMs, client: v.clientMs, block: measured.blockedMs };
      } catch (err) {
        outcome = `error: ${(err as Error).message.slice(0, 80)}`;
      }
      const profile = await profiler.stop();
      if (profile) console.log(`${h.name}: CPU profile of the service's process in ${profile}`);
      const beside = summary(await take());
      const settled = await settle(take, alone.p99 + 100, settleMs);
      process.off('uncaughtException', onCrash);
      // Work the request left running (an analysis after a session) may throw after it answered.
      if (crash && !outcome.startsWith('uncaught')) outcome = `${outcome}; then ${crash}`;
      const diff = beside.p99 - alone.p99;
      rows.push({
        phase: h.name,
        hostile_status: outcome,
        hostile_ms: r1(took),
        n: beside.n,
        p50_ms: r1(beside.p50),
        p99_ms: r1(beside.p99),
        p99_diff_ms: r1(diff),
        loop_cpu_ms: r1(loop.cpu),
        process_cpu_ms: r1(loop.process),
        gc_ms: r1(loop.gc),
        client_cpu_ms: r1(loop.client),
        block_ms: r1(loop.block),
        non2xx: beside.non2xx,
        settled_ms: settled,
      });
      console.log(`${h.name}: ${outcome}, neighbour p99 ${r1(beside.p99)} ms (${diff > 100 ? 'OVER' : 'within'} 100 ms of alone)`);
    }
    table(rows);
    const over = rows.filter((r) => typeof r.p99_diff_ms === 'number' && r.p99_diff_ms > 100);
    console.log(
      `goal (neighbour p99 within 100 ms of alone): ${over.length ? `missed beside ${over.map((r) => r.phase).join('; ')}` : 'met beside every one'}`,
    );
  } finally {
    neighbourProc?.proc.send({ cmd: 'exit' });
    realtimeClient?.proc.send({ cmd: 'exit' });
    await hooks.close();
    await service.close();
    carriers.proc.kill();
    voice.proc.kill();
    await db.drop();
  }
}
