/**
 * The cost of the contract layer: `GET /api/v1/keys` through the full stack (request id, logging,
 * metrics, error envelope, CORS, body parsing, openapi-backend routing, security handler, validation,
 * handler) against a bare Koa handler doing the same queries (session lookup + key list) on the same
 * database, in the same run, and this process's CPU time per request on each side. Goal (issue 25): the
 * full stack keeps at least 80% of the bare handler's throughput.
 */
import http from 'node:http';
import Koa from 'koa';
import type { AddressInfo } from 'node:net';
import { benchDatabase, cpuProfiler, load, startBenchService, table } from './lib.js';
import { sha256Hex } from '../../src/lib/tokens.js';

export async function run(): Promise<void> {
  const db = await benchDatabase();
  const service = await startBenchService(db.url);
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
    const knex = service.db.knex;
    const bare = new Koa();
    bare.use(async (ctx) => {
      const m = /^Bearer (\S+)$/.exec(ctx.get('Authorization'));
      const session = m
        ? await knex('dashboard_sessions as s')
            .join('users as u', 'u.id', 's.user_id')
            .where('s.token_hash', sha256Hex(m[1]))
            .whereNull('s.revoked_at')
            .where('s.expires_at', '>', knex.fn.now())
            .first('s.workspace_id')
        : undefined;
      if (!session) {
        ctx.status = 401;
        return;
      }
      const rows = await knex('api_keys')
        .where({ workspace_id: session.workspace_id })
        .orderBy('id', 'desc')
        .select('id', 'name', 'key_prefix', 'revoked_at', 'last_used_at', 'created_at');
      ctx.body = rows.map((k) => ({
        id: k.id,
        name: k.name,
        key_prefix: k.key_prefix,
        revoked: k.revoked_at !== null,
        created_at: k.created_at.toISOString(),
        last_used_at: k.last_used_at?.toISOString() ?? null,
      }));
    });
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

    console.log('\nContract layer: GET /api/v1/keys, 20 connections, %ds each', seconds);
    table([
      {
        stack: 'bare Koa handler (same queries)',
        'req/s': Math.round(bareResult.requestsPerSec),
        'p50 ms': bareResult.p50,
        'p99 ms': bareResult.p99,
        'CPU us/request': Math.round(bareResult.cpuUsPerRequest),
        errors: bareResult.errors + bareResult.non2xx,
      },
      {
        stack: 'full stack (contract layer)',
        'req/s': Math.round(full.requestsPerSec),
        'p50 ms': full.p50,
        'p99 ms': full.p99,
        'CPU us/request': Math.round(full.cpuUsPerRequest),
        errors: full.errors + full.non2xx,
      },
    ]);
    const ratio = full.requestsPerSec / bareResult.requestsPerSec;
    console.log(`Full stack keeps ${(ratio * 100).toFixed(1)}% of the bare handler's throughput (goal: >= 80%, issue 25).`);
    console.log(
      `CPU per request, bare / full stack: ${((100 * bareResult.cpuUsPerRequest) / full.cpuUsPerRequest).toFixed(1)}% (the throughput share the full stack would keep where this process's CPU is the limit).`,
    );
  } finally {
    await service.close();
    await db.drop();
  }
}
