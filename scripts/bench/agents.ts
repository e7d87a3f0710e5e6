/**
 * Agent reads and updates, and knowledge search:
 * - `GET /api/v1/agents/{agent_id}` and `PATCH /api/v1/agents/{agent_id}` through the full stack against
 *   a bare Koa handler doing the same queries (API key lookup, then the agent select, or the locked
 *   select + update in a transaction) on the same database, in the same run;
 * - `POST /api/v1/agents/{agent_id}/knowledge/search` over an agent with 1,000 attached documents:
 *   through the full stack under load, and the search function alone (p50/p99 of sequential queries).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { benchDatabase, load, percentile, startBenchService, table } from './lib.js';
import { sha256Hex } from '../../src/lib/tokens.js';
import type { AgentRow } from '../../src/agents/store.js';

const BASE_WORDS = (
  'appointment billing cancel clinic dentist invoice refund schedule insurance parking hours holiday ' +
  'payment card cash reminder emergency whitening cleaning filling crown implant braces orthodontist ' +
  'hygienist xray checkup child adult senior discount plan coverage claim deductible copay referral'
).split(' ');
/** 5,000 words drawn with a Zipf-like skew, so common words are in most passages and rare ones in few, as in real text. */
const VOCABULARY = [...BASE_WORDS, ...Array.from({ length: 5000 - BASE_WORDS.length }, (_, i) => `term${i.toString(36)}`)];
const pick = (rand: () => number) => VOCABULARY[Math.floor(VOCABULARY.length * rand() ** 3)];

function pseudoRandom(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function documentText(rand: () => number, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    out.push(pick(rand));
    if (i % 12 === 11) out.push('.');
  }
  return out.join(' ').replace(/ \./g, '.');
}

async function json(url: string, method: string, key: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(url, {
    method,
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, unknown>;
}

export async function run(): Promise<void> {
  const db = await benchDatabase();
  const service = await startBenchService(db.url);
  const seconds = Number(process.env.BENCH_SECONDS ?? 10);
  try {
    const signup = (await fetch(`${service.url}/api/v1/auth/signup`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ email: 'bench-agents@example.com', password: 'long-enough-pw', workspace_name: 'Bench' }),
    }).then((r) => r.json())) as { session_token: string; workspace: { id: string } };
    const wsId = signup.workspace.id;
    const key = (await json(`${service.url}/api/v1/keys`, 'POST', signup.session_token, { name: 'bench' })).key as string;
    const agent = await json(`${service.url}/api/v1/agents`, 'POST', key, {
      name: 'Bench agent',
      instruction: 'You are a helpful receptionist. '.repeat(20),
      first_message: 'Hello!',
      variable_placeholders: { patient_name: 'there' },
      voicemail_config: { enabled: true, message: 'Call us back.' },
      provider_a_config: { account_sid: 'AC0123', auth_token: 'bench-token-0123456789', phone_number: '+14155550100' },
    });
    const agentId = agent.agent_id as string;

    // The bare handler: the same queries and the same JSON out, no contract layer.
    const knex = service.db.knex;
    const agents = service.agents;
    const bare = new Koa();
    bare.silent = true;
    bare.use(async (ctx) => {
      const m = /^Bearer (\S+)$/.exec(ctx.get('Authorization'));
      const k = m
        ? await knex('api_keys')
            .where({ key_hash: sha256Hex(m[1]) })
            .whereNull('revoked_at')
            .first('id', 'workspace_id', 'last_used_at')
        : undefined;
      if (!k) {
        ctx.status = 401;
        return;
      }
      const id = ctx.path.split('/').pop() as string;
      if (ctx.method === 'GET') {
        const row = (await knex('agents').where({ id }).first()) as AgentRow | undefined;
        if (!row || row.workspace_id !== k.workspace_id) ctx.status = 404;
        else ctx.body = agents.toAgent(row);
        return;
      }
      const chunks: Buffer[] = [];
      for await (const c of ctx.req) chunks.push(c as Buffer);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { first_message: string };
      const row = await knex.transaction(async (trx) => {
        const current = (await trx('agents').where({ id }).forUpdate().first()) as AgentRow | undefined;
        if (!current || current.workspace_id !== k.workspace_id) return undefined;
        const [updated] = await trx('agents').where({ id }).update({ first_message: body.first_message, updated_at: trx.fn.now() }).returning('*');
        return updated as AgentRow;
      });
      if (!row) ctx.status = 404;
      else ctx.body = agents.toAgent(row);
    });
    const bareServer = http.createServer(bare.callback());
    await new Promise<void>((r) => bareServer.listen(0, '127.0.0.1', () => r()));
    const bareUrl = `http://127.0.0.1:${(bareServer.address() as AddressInfo).port}`;

    const headers = { Authorization: `Bearer ${key}` };
    const patchOpts = { method: 'PATCH', headers: { ...headers, 'Content-Type': 'application/json' }, body: JSON.stringify({ first_message: 'Hello again!' }) };
    const path = `/api/v1/agents/${agentId}`;
    await load(`${bareUrl}${path}`, { headers, seconds: 2 }); // warm-up
    await load(`${service.url}${path}`, { headers, seconds: 2 });
    const bareGet = await load(`${bareUrl}${path}`, { headers, seconds });
    const fullGet = await load(`${service.url}${path}`, { headers, seconds });
    const barePatch = await load(`${bareUrl}${path}`, { ...patchOpts, seconds });
    const fullPatch = await load(`${service.url}${path}`, { ...patchOpts, seconds });
    bareServer.close();

    const rowOf = (stack: string, r: Awaited<ReturnType<typeof load>>) => ({
      stack,
      'req/s': Math.round(r.requestsPerSec),
      'p50 ms': r.p50,
      'p99 ms': r.p99,
      errors: r.errors + r.non2xx,
    });
    console.log('\nAgent reads and updates, 20 connections, %ds each', seconds);
    table([
      rowOf('GET  bare Koa handler (same queries)', bareGet),
      rowOf('GET  full stack', fullGet),
      rowOf('PATCH bare Koa handler (same queries)', barePatch),
      rowOf('PATCH full stack', fullPatch),
    ]);
    console.log(
      `GET: full stack keeps ${((fullGet.requestsPerSec / bareGet.requestsPerSec) * 100).toFixed(1)}% of the bare handler's throughput; PATCH: ${((fullPatch.requestsPerSec / barePatch.requestsPerSec) * 100).toFixed(1)}%.`,
    );

    // Knowledge search over 1,000 documents attached to one agent.
    const rand = pseudoRandom(42);
    const docs = 1000;
    const started = performance.now();
    for (let i = 0; i < docs; i++) {
      const doc = await service.knowledge.upload(wsId, { kind: 'text', name: `Document ${i}`, text: documentText(rand, 300) });
      await service.knowledge.attach(wsId, agentId, doc.doc_id);
    }
    const chunks = await knex('knowledge_chunks').whereNotNull('agent_id').count<{ count: string }[]>('* as count');
    console.log(
      `\nKnowledge: ${docs} documents (${chunks[0].count} agent passages) uploaded and attached in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    await knex.raw('analyze knowledge_chunks');

    const queries = Array.from({ length: 300 }, (_, i) => {
      const r = pseudoRandom(1000 + i);
      const n = 1 + Math.floor(r() * 3);
      return Array.from({ length: n }, () => pick(r)).join(' ');
    });
    for (const q of queries.slice(0, 30)) await service.knowledge.search(wsId, agentId, q, 5); // warm-up
    const times: number[] = [];
    let matched = 0;
    for (const q of queries) {
      const t0 = performance.now();
      const hits = await service.knowledge.search(wsId, agentId, q, 5);
      times.push(performance.now() - t0);
      if (hits.length) matched++;
    }
    times.sort((a, b) => a - b);
    const searchLoad = (query: string) =>
      load(`${service.url}/api/v1/agents/${agentId}/knowledge/search`, {
        method: 'POST',
        headers: { ...headers, 'Content-Type': 'application/json' },
        body: JSON.stringify({ query, limit: 5 }),
        connections: 10,
        seconds,
      });
    // A query of two mid-frequency words, and one of the two most common words (it matches almost every passage).
    const typical = await searchLoad(`${VOCABULARY[400]} ${VOCABULARY[900]}`);
    const common = await searchLoad(`${VOCABULARY[0]} or ${VOCABULARY[1]}`);
    table([
      {
        what: `search function, ${queries.length} sequential queries (1-3 words, ${matched} with hits)`,
        'p50 ms': times[Math.floor(times.length / 2)].toFixed(2),
        'p99 ms': percentile(times, 99).toFixed(2),
        'req/s': '',
      },
      {
        what: 'POST .../knowledge/search full stack, 10 conn., two mid-frequency words',
        'p50 ms': String(typical.p50),
        'p99 ms': String(typical.p99),
        'req/s': String(Math.round(typical.requestsPerSec)),
      },
      {
        what: 'POST .../knowledge/search full stack, 10 conn., the two commonest words',
        'p50 ms': String(common.p50),
        'p99 ms': String(common.p99),
        'req/s': String(Math.round(common.requestsPerSec)),
      },
    ]);
  } finally {
    await service.close();
    await db.drop();
  }
}
