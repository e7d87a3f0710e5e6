/**
 * What a conversation costs PostgreSQL: `npm run bench -- database`. The service runs in this process
 * (startBenchService, its in-process sandbox carriers and voice service, which use no database), and
 * every SQL statement any of its pools sends (knex, graphile-worker's pool, the LISTEN connections) is
 * counted at `pg.Client.prototype.query`, so nothing is left out.
 *
 * 1. idle: statements per second of an instance with nothing to do (slot and session heartbeats, job
 *    and webhook polling), and the connections it holds (pg_stat_activity of its database).
 * 2. calls: BENCH_DB_CALLS (20) outbound provider_a calls to the sandbox's default person (a ~8 s
 *    conversation at speed 1; SANDBOX_CARRIERS_SPEED here 4), BENCH_DB_CONCURRENCY (10) at a time,
 *    each from `POST /api/v1/calls` to its `call.completed` delivered to a webhook; statements per
 *    call with the idle rate over the phase's length taken off, and the peak of connections.
 * 3. sessions: as many text web sessions of BENCH_DB_TURNS (4) turns, the client closing at the end.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import WebSocket from 'ws';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { benchDatabase, table } from './lib.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startService } from '../../src/service.js';

const num = (name: string, dflt: number) => Number(process.env[name] ?? dflt);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ADMIN = 'bench-operator-token-0123456789';

let statements = 0;
function countStatements(): void {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown; __counted?: boolean };
  if (proto.__counted) return;
  const query = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    statements += 1;
    return query.apply(this, args);
  };
  proto.__counted = true;
}

export async function run(): Promise<void> {
  countStatements();
  const db = await benchDatabase();
  const config = loadConfig({
    DATABASE_URL: db.url,
    DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'vas-bench-')),
    PORT: '0',
    HOST: '127.0.0.1',
    CONTRACT_CHECK: 'off',
    ADMIN_TOKEN: ADMIN,
    SANDBOX_CARRIERS_SPEED: '4',
    SANDBOX_CARRIERS_RING_MS: '40',
    VOICE_SANDBOX_SPEED: '4',
    VOICE_SANDBOX_MS_PER_CHAR: '20',
  });
  const service = await startService(config, createLogger(process.env.BENCH_LOG_LEVEL ?? 'silent'));
  const watcher = new pg.Client({ connectionString: db.url });
  await watcher.connect();
  const dbName = new URL(db.url).pathname.slice(1);
  // The watcher's own statements are not counted (it runs on a client made before counting... no: it is
  // counted), so they are subtracted: one per connections() call.
  let watcherStatements = 0;
  const connections = async () => {
    watcherStatements += 1;
    const r = await watcher.query('select count(*)::int as n from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [dbName]);
    return r.rows[0].n as number;
  };
  const serviceStatements = () => statements - watcherStatements;

  const completed = new Set<string>();
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const e = JSON.parse(body);
      if (e.event === 'call.completed') completed.add(e.conversation_id);
      res.end('ok');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

  const api = async (method: string, p: string, body?: unknown, auth?: string) => {
    const res = await fetch(`${service.url}${p}`, {
      method,
      headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${auth}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
  const signup = await api('POST', '/api/v1/auth/signup', { email: `db-${Date.now()}@example.com`, password: 'correct-horse-battery', workspace_name: 'DB' });
  const key = (await api('POST', '/api/v1/keys', { name: 'bench' }, signup.session_token)).key as string;
  await api('PATCH', `/admin/v1/workspaces/${signup.workspace.id}`, { concurrent_session_limit: 100 }, ADMIN);
  await api('POST', '/api/v1/webhooks', { url: hookUrl }, key);
  const hex = () => Math.random().toString(16).slice(2, 10).padEnd(8, '0');
  const phoneAgent = (
    await api(
      'POST',
      '/api/v1/agents',
      {
        name: 'Receptionist',
        instruction: 'You are the receptionist of Acme Dental.',
        first_message: 'Hello! This is Acme Dental.',
        provider_a_config: { account_sid: `AC${hex()}${hex()}${hex()}${hex()}`, auth_token: `${hex()}${hex()}${hex()}${hex()}`, phone_number: '+14155550100' },
      },
      key,
    )
  ).agent_id as string;
  const webAgent = (await api('POST', '/api/v1/agents', { name: 'Helper', instruction: 'You help visitors of Acme Dental.' }, key)).agent_id as string;

  // One call first: the workspace's first call stores its destination policy, and concurrent first
  // calls race on that insert (a 500 for all but one; reported separately).
  const first = await api('POST', '/api/v1/calls', { agent_id: phoneAgent, to_number: '+14155557001' }, key);
  while (!completed.has(first.call_id)) await sleep(100);
  const rows: Array<Record<string, string | number>> = [];
  // Idle.
  await sleep(3000);
  const idleSeconds = num('BENCH_DB_IDLE_S', 10);
  const idleConnections = await connections();
  const s0 = serviceStatements();
  await sleep(idleSeconds * 1000);
  const idleRate = (serviceStatements() - s0) / idleSeconds;
  rows.push({
    phase: 'idle',
    conversations: 0,
    'statements/s idle': idleRate.toFixed(1),
    'statements per conversation': '-',
    'connections (idle / peak)': idleConnections,
  });

  const phase = async (name: string, n: number, concurrency: number, one: (i: number) => Promise<string>) => {
    let peak = await connections();
    const sampler = setInterval(() => void connections().then((c) => (peak = Math.max(peak, c))), 200);
    const start = serviceStatements();
    const t0 = performance.now();
    const ids: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < n) ids.push(await one(next++));
      }),
    );
    while (!ids.every((id) => completed.has(id))) await sleep(100);
    clearInterval(sampler);
    const seconds = (performance.now() - t0) / 1000;
    const used = serviceStatements() - start - idleRate * seconds;
    rows.push({
      phase: name,
      conversations: n,
      'statements/s idle': idleRate.toFixed(1),
      'statements per conversation': (used / n).toFixed(1),
      'connections (idle / peak)': `${idleConnections} / ${peak}`,
    });
  };

  const n = num('BENCH_DB_CALLS', 20);
  const concurrency = num('BENCH_DB_CONCURRENCY', 10);
  await phase('phone calls (provider_a, ~8 s talk)', n, concurrency, async () => {
    const to = `+1415${String(200 + Math.floor(Math.random() * 800))}${String(5000 + Math.floor(Math.random() * 4000))}`;
    const call = await api('POST', '/api/v1/calls', { agent_id: phoneAgent, to_number: to }, key);
    return call.call_id as string;
  });
  const turns = num('BENCH_DB_TURNS', 4);
  await phase(`text web sessions (${turns} turns)`, n, concurrency, async (i) => {
    const minted = await api('POST', '/api/v1/realtime/sessions', { agent_id: webAgent, user_id: `visitor-${i}`, source: 'text' }, key);
    const ws = new WebSocket(minted.ws_url);
    const messages: Array<Record<string, unknown>> = [];
    let wake = () => undefined as void;
    ws.on('message', (d) => {
      messages.push(JSON.parse(d.toString()));
      wake();
    });
    const until = async (pred: (m: Record<string, unknown>) => boolean) => {
      for (;;) {
        const found = messages.findIndex(pred);
        if (found >= 0) return messages.splice(0, found + 1)[found];
        await new Promise<void>((r) => (wake = r));
      }
    };
    const started = await until((m) => m.type === 'session_started');
    for (let t = 0; t < turns; t++) {
      ws.send(JSON.stringify({ mime_type: 'text/plain', data: Buffer.from(`Question ${t}: when are you open?`).toString('base64') }));
      await until((m) => m.type === 'text');
    }
    ws.close(1000);
    await new Promise((r) => ws.once('close', r));
    return String(started.session_id);
  });
  table(rows);

  await service.close();
  await watcher.end();
  receiver.close();
  await db.drop();
}
