/**
 * Property-based tests driven by the contract's own request schemas (fast-check, with
 * json-schema-faker generating values from the schemas under fast-check's seeds):
 * - mutated inputs (wrong types, missing and extra fields, huge strings and arrays, deep nesting,
 *   unicode and NUL, nulls, numbers at and past their bounds) never give a 5xx, and when refused they
 *   change no stored data of the workspace;
 * - inputs valid against the schema succeed or fail only with statuses the operation declares (the
 *   test service enforces the response contract, so an undeclared answer is a 500 here).
 * - the extremes the contract allows (extremes.ts), for every operation: the largest body (every string
 *   at its maxLength, every array at its maxItems, up to the body limit), the deepest nesting, and the
 *   longest query values, get a declared status and change nothing stored when refused.
 * No request, of any of these, may block the event loop (which the test service shares with this
 * process) longer than FUZZ_LOOP_BLOCK_MS (default 200; a busy machine may raise it) (issue 32).
 * FUZZ_RUNS sets the runs per operation (a few in `npm test`, many in `npm run fuzz`); a failure
 * prints fast-check's seed and path, and FUZZ_SEED=<seed> replays it. Where the contract sets no
 * bound, the extremes are capped by FUZZ_UNBOUNDED_LENGTH / _ITEMS / _PROPERTIES / _DEPTH and a
 * warning names the place.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { generateSync } from 'json-schema-faker';
import $RefParser from '@apidevtools/json-schema-ref-parser';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/webhooks.js';
import { loopWatch, type LoopWatch } from '../helpers/loop-watch.js';
import { generatedDir } from '../../src/contract/documents.js';
import { loadConfig } from '../../src/config.js';
import { extreme, type Caps } from './extremes.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 12);
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined;
const LOOP_BLOCK_MS = Number(process.env.FUZZ_LOOP_BLOCK_MS ?? 200);
const CAPS: Caps = {
  length: Number(process.env.FUZZ_UNBOUNDED_LENGTH ?? 100_000),
  items: Number(process.env.FUZZ_UNBOUNDED_ITEMS ?? 10_000),
  properties: Number(process.env.FUZZ_UNBOUNDED_PROPERTIES ?? 1_000),
  depth: Number(process.env.FUZZ_UNBOUNDED_DEPTH ?? 1_000),
};
/** The service's JSON body limit: the largest bodies stop a little short of it. */
const BODY_LIMIT = loadConfig({ DATABASE_URL: 'postgres://x/y' }).BODY_LIMIT_BYTES;

type Json = Record<string, any>;
interface Op {
  operationId: string;
  method: 'get' | 'post' | 'patch' | 'put' | 'delete';
  path: string;
  pathParams: string[];
  bodySchema: Json | undefined;
  querySchema: Json | undefined;
}

let t: TestService;
let tn: Tenant;
let watch: LoopWatch;
let ops: Op[] = [];
/** The contract as written, for the `$ref`s dereferencing leaves (recursive schemas). */
let rawDoc: Json = {};
/** Ids of the workspace's resources, by path parameter name. */
const ids = new Map<string, string>();
let staticTables: string[] = [];
let scopedTables: Array<{ name: string; hasId: boolean }> = [];

/** Tables whose rows change only through requests (no job, dispatcher or billing updates them later). */
const STATIC = new Set(['agents', 'tools', 'webhooks', 'mcp_servers', 'agent_tools', 'agent_mcp_servers', 'agent_documents', 'webhook_secrets', 'users']);

async function loadOps(): Promise<Op[]> {
  const text = readFileSync(path.join(generatedDir, 'openapi-internal.json'), 'utf8');
  rawDoc = JSON.parse(text) as Json;
  const doc = (await $RefParser.dereference(JSON.parse(text), {
    dereference: { circular: 'ignore' },
  })) as Json;
  const out: Op[] = [];
  for (const [p, item] of Object.entries(doc.paths as Record<string, Json>)) {
    for (const method of ['get', 'post', 'patch', 'put', 'delete'] as const) {
      const op = item[method] as Json | undefined;
      if (!op) continue;
      const security = (op.security ?? doc.security) as Array<Record<string, unknown>>;
      if (!security.some((s) => 'ApiKey' in s)) continue;
      const params = [...(item.parameters ?? []), ...(op.parameters ?? [])] as Json[];
      const query = params.filter((x) => x.in === 'query');
      out.push({
        operationId: op.operationId,
        method,
        path: p,
        pathParams: params.filter((x) => x.in === 'path').map((x) => x.name as string),
        bodySchema: op.requestBody?.content?.['application/json']?.schema,
        querySchema: query.length
          ? { type: 'object', properties: Object.fromEntries(query.map((q) => [q.name, q.schema ?? {}])), additionalProperties: false }
          : undefined,
      });
    }
  }
  return out;
}

/** The schema with every `maxLength` at most `cap` (json-schema-faker builds a string of up to the schema's maxLength, 10 MB for a document, before cutting it to its own option). */
function capLengths(schema: Json, cap: number, seen = new Map<object, unknown>()): unknown {
  if (!schema || typeof schema !== 'object') return schema;
  if (seen.has(schema)) return seen.get(schema);
  const out: Record<string, unknown> | unknown[] = Array.isArray(schema) ? [] : {};
  seen.set(schema, out);
  for (const [k, v] of Object.entries(schema))
    (out as Record<string, unknown>)[k] =
      k === 'maxLength' && typeof v === 'number' ? Math.min(v, Math.max(cap, schema.minLength ?? 0)) : capLengths(v as Json, cap, seen);
  return out;
}

/** A value for the schema, reproducible from `seed`. */
function sample(schema: Json, seed: number): unknown {
  try {
    return generateSync(capLengths(schema, 40) as never, { seed, maxItems: 3, maxLength: 40, maxDepth: 4, optionalsProbability: 0.5 });
  } catch {
    return {};
  }
}

/** Fingerprint of everything the workspace has stored that only requests change. */
async function snapshot(): Promise<string> {
  const knex = t.service.db.knex;
  const parts: string[] = [];
  for (const table of staticTables) {
    const r = await knex.raw(`select md5(coalesce(string_agg(t::text, '|' order by t::text), '')) as h from ${table} t where workspace_id = ?`, [
      tn.workspaceId,
    ]);
    parts.push(`${table}:${r.rows[0].h}`);
  }
  for (const { name, hasId } of scopedTables) {
    const r = hasId
      ? await knex.raw(`select md5(coalesce(string_agg(id::text, ',' order by id), '')) as h from ${name} where workspace_id = ?`, [tn.workspaceId])
      : await knex.raw(`select count(*)::text as h from ${name} where workspace_id = ?`, [tn.workspaceId]);
    parts.push(`${name}:${r.rows[0].h}`);
  }
  return parts.join(';');
}

function url(op: Op, query?: unknown): string {
  const p = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(ids.get(name) ?? `${name}_fuzz`));
  const qs =
    query && typeof query === 'object'
      ? new URLSearchParams(Object.entries(query as Record<string, unknown>).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)])).toString()
      : '';
  return qs ? `${p}?${qs}` : p;
}

/** Sends the request and fails if the event loop was blocked longer than LOOP_BLOCK_MS while it ran. */
async function send(op: Op, body: unknown, query?: unknown): Promise<{ status: number; text: string }> {
  const target = url(op, query);
  const payload = op.bodySchema ? (typeof body === 'string' ? body : JSON.stringify(body)) : undefined;
  const {
    value: res,
    blockedMs,
    gapMs,
  } = await watch.measure(async () => {
    const req = t.http[op.method](target).set(bearer(tn.apiKey));
    return payload !== undefined ? await req.set('Content-Type', 'application/json').send(payload) : await req;
  });
  assert.ok(
    blockedMs <= LOOP_BLOCK_MS,
    `${op.operationId} (${op.method.toUpperCase()} ${target.slice(0, 200)}) blocked the event loop ${Math.round(blockedMs)} ms ` +
      `(over FUZZ_LOOP_BLOCK_MS=${LOOP_BLOCK_MS}; longest gap ${Math.round(gapMs)} ms); answered ${res.status}; body of ${payload?.length ?? 0} characters: ${payload?.slice(0, 200) ?? '-'}`,
  );
  return { status: res.status, text: res.text };
}

/** One way to break a valid body. */
const mutation = fc.oneof(
  fc.record({
    kind: fc.constant('wrong_type' as const),
    value: fc.oneof(
      fc.integer(),
      fc.double(),
      fc.boolean(),
      fc.constant(null),
      fc.array(fc.integer(), { maxLength: 3 }),
      fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 2 }),
    ),
  }),
  fc.record({ kind: fc.constant('drop_field' as const) }),
  fc.record({ kind: fc.constant('extra_field' as const), name: fc.string({ minLength: 1, maxLength: 12 }) }),
  fc.record({ kind: fc.constant('huge_string' as const), size: fc.integer({ min: 10_000, max: 300_000 }) }),
  fc.record({ kind: fc.constant('huge_array' as const), size: fc.integer({ min: 1_000, max: 20_000 }) }),
  fc.record({ kind: fc.constant('deep' as const), depth: fc.integer({ min: 100, max: 20_000 }) }),
  fc.record({
    kind: fc.constant('unicode' as const),
    value: fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 20 }),
      fc.string({ maxLength: 10 }).map((s) => `${s}\u0000${s}`),
      fc.constantFrom('\uFFFF', '\uD800', '😀'.repeat(50), '\u202Eevil', 'a\r\nb'),
    ),
  }),
  fc.record({ kind: fc.constant('number_edge' as const), value: fc.constantFrom(-1, 0, -0.5, 2 ** 31, 2 ** 53 + 1, 1e308, -1e308, 1.5) }),
  fc.record({ kind: fc.constant('whole_body' as const), value: fc.constantFrom('null', '[]', '"x"', '42', '{', '{"a":', '\u0000') }),
);

type Mutation = typeof mutation extends fc.Arbitrary<infer T> ? T : never;

function nest(depth: number): string {
  return '['.repeat(depth) + ']'.repeat(depth);
}

/** The body as JSON text after the mutation; fields are chosen by `pick`. */
function mutate(body: unknown, m: Mutation, pick: number): string {
  const obj = body && typeof body === 'object' && !Array.isArray(body) ? { ...(body as Record<string, unknown>) } : {};
  const keys = Object.keys(obj);
  const key = keys.length ? keys[pick % keys.length] : 'name';
  switch (m.kind) {
    case 'wrong_type':
      return JSON.stringify({ ...obj, [key]: m.value });
    case 'drop_field':
      delete obj[key];
      return JSON.stringify(obj);
    case 'extra_field':
      return JSON.stringify({ ...obj, [`${m.name}_x`]: 1 });
    case 'huge_string':
      return JSON.stringify({ ...obj, [key]: 'x'.repeat(m.size) });
    case 'huge_array':
      return JSON.stringify({ ...obj, [key]: Array.from({ length: m.size }, (_, i) => i) });
    case 'deep':
      return JSON.stringify({ ...obj, [key]: null }).replace('null', nest(m.depth));
    case 'unicode':
      return JSON.stringify({ ...obj, [key]: m.value });
    case 'number_edge':
      return JSON.stringify({ ...obj, [key]: m.value });
    case 'whole_body':
      return m.value;
  }
}

before(async () => {
  t = await startTestService({ REALTIME_SESSIONS_PER_HOUR: '100000', REALTIME_SESSIONS_PER_DAY: '100000' });
  tn = await tenant(t);
  watch = loopWatch();
  ops = await loadOps();
  const agent = await t.http.post('/api/v1/agents').set(bearer(tn.apiKey)).send({ name: 'Fuzz agent' });
  const tool = await t.http.post('/api/v1/tools').set(bearer(tn.apiKey)).send({ name: 'fuzz_tool', description: 'A tool.', url: 'http://127.0.0.1:9/tool' });
  const hook = await t.http.post('/api/v1/webhooks').set(bearer(tn.apiKey)).send({ url: 'http://127.0.0.1:9/hooks' });
  ids.set('agent_id', agent.body.agent_id);
  ids.set('tool_id', tool.body.tool_id);
  ids.set('webhook_id', hook.body.webhook_id);
  const cols = await t.service.db.knex.raw(
    `select table_name, bool_or(column_name = 'id') as has_id from information_schema.columns where table_schema = 'public' group by table_name having bool_or(column_name = 'workspace_id')`,
  );
  staticTables = cols.rows
    .map((r: { table_name: string }) => r.table_name)
    .filter((n: string) => STATIC.has(n))
    .sort();
  scopedTables = cols.rows
    .filter((r: { table_name: string }) => !STATIC.has(r.table_name))
    .map((r: { table_name: string; has_id: boolean }) => ({ name: r.table_name, hasId: r.has_id }))
    .sort((a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name));
});

after(async () => {
  watch?.stop();
  await t.close();
});

const params = (): fc.Parameters<unknown> => ({ numRuns: RUNS, ...(SEED !== undefined ? { seed: SEED } : {}), verbose: 1, endOnFailure: true });

describe('fuzzing from the contract', () => {
  it('mutated bodies never give a 5xx, and a refused one changes nothing stored', async () => {
    for (const op of ops.filter((o) => o.bodySchema && o.method !== 'get')) {
      await fc.assert(
        fc.asyncProperty(fc.integer(), mutation, fc.nat(), async (seed, m, pick) => {
          const valid = sample(op.bodySchema!, seed);
          const text = mutate(valid, m, pick);
          const before = await snapshot();
          const res = await send(op, text);
          assert.ok(res.status < 500, `${op.operationId} answered ${res.status} to ${m.kind}: ${res.text.slice(0, 300)}`);
          if (res.status >= 400) assert.equal(await snapshot(), before, `${op.operationId} changed stored data while refusing ${m.kind} (${res.status})`);
        }),
        params(),
      );
    }
  });

  it('mutated query strings never give a 5xx', async () => {
    for (const op of ops.filter((o) => o.querySchema)) {
      await fc.assert(
        fc.asyncProperty(
          fc.dictionary(
            fc.constantFrom(...Object.keys(op.querySchema!.properties), 'unknown'),
            fc.oneof(fc.string({ maxLength: 20 }), fc.integer(), fc.constantFrom('', '-1', '1e400', '\u0000', 'x'.repeat(5000))),
            { maxKeys: 3 },
          ),
          async (query) => {
            const res = await send(op, undefined, query);
            assert.ok(res.status < 500, `${op.operationId}?${JSON.stringify(query)} answered ${res.status}: ${res.text.slice(0, 300)}`);
          },
        ),
        params(),
      );
    }
  });

  it('bodies valid against the schema succeed or fail only with declared statuses', async () => {
    for (const op of ops.filter((o) => o.bodySchema && o.method !== 'get' && o.method !== 'delete')) {
      await fc.assert(
        fc.asyncProperty(fc.integer(), async (seed) => {
          const body = sample(op.bodySchema!, seed);
          const res = await send(op, body);
          // An undeclared status or a body off the contract is a 500 contract_violation from the test service.
          assert.ok(
            res.status < 500,
            `${op.operationId} answered ${res.status} to a valid body ${JSON.stringify(body).slice(0, 300)}: ${res.text.slice(0, 300)}`,
          );
        }),
        params(),
      );
    }
  });

  it('the extremes the contract allows get declared statuses, change nothing stored when refused, and block nothing', async () => {
    const unbounded = new Map<string, string>();
    const warn = (where: string, what: string) => unbounded.set(`${where}: ${what.split(':')[0]}`, what);
    const options = { caps: CAPS, budget: BODY_LIMIT - 4096, root: rawDoc, warn };
    const cases: Array<{ op: Op; kind: string; body?: unknown; query?: unknown }> = [];
    for (const op of ops.filter((o) => o.bodySchema && o.method !== 'get')) {
      for (const mode of ['largest', 'deepest'] as const)
        cases.push({ op, kind: `${mode} body`, body: extreme(op.bodySchema!, op.operationId, { ...options, mode }).value });
    }
    for (const op of ops.filter((o) => o.querySchema)) {
      cases.push({ op, kind: 'longest query', query: extreme(op.querySchema!, `${op.operationId}?`, { ...options, mode: 'largest' }).value });
    }
    if (unbounded.size) {
      console.warn(`The contract sets no bound at ${unbounded.size} places; the extremes there are capped (FUZZ_UNBOUNDED_*):`);
      for (const [place, what] of unbounded) console.warn(`  ${place.split(': ')[0]}: ${what}`);
    }
    for (const c of cases) {
      const before = await snapshot();
      const res = await send(c.op, c.body, c.query);
      assert.ok(res.status < 500, `${c.op.operationId} answered ${res.status} to its ${c.kind}: ${res.text.slice(0, 300)}`);
      if (res.status >= 400) assert.equal(await snapshot(), before, `${c.op.operationId} changed stored data while refusing its ${c.kind} (${res.status})`);
    }
  });
});
