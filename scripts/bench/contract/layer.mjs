/**
 * The contract layer alone, in one process, with no socket and no database: `GET /api/v1/keys` through
 * the compiled service's Koa app (src/app.ts: front door, routing, security handler, validation,
 * handler) against a bare Koa handler, both given the same stub session lookup and key list, each
 * request handed to the app's callback as node's own request and response objects. What the
 * autocannon benchmark (contract.ts) measures less precisely on a busy machine: the layer's own CPU a
 * request, without the sockets, PostgreSQL and the load generator sharing the cores.
 *
 * `npm run build` first; then `node --min-semi-space-size=16 scripts/bench/contract/layer.mjs`
 * (LAYER_REQUESTS per round, default 100,000; LAYER_ROUNDS, default 5). Prints each round's CPU
 * microseconds a request for both sides (process.cpuUsage: this process is the only work measured).
 * LAYER_DATABASE_URL=<an empty database> starts the whole service on it and drives its app's callback,
 * against a bare handler running the service's two queries through a knex of its own in the same
 * process: the database client's work counted too, the sockets to the client still left out.
 * LAYER_FULL_QUERIES=bare (with LAYER_DATABASE_URL) gives the layer the bare handler's own database code
 * in place of the service's authentication and handler: the layer's cost with real I/O, nothing else.
 * LAYER_ONLY=full|bare measures one side (for a CPU profile of it: `node --cpu-prof`).
 */
import http from 'node:http';
import { Socket } from 'node:net';
import { createHash } from 'node:crypto';
import Koa from 'koa';
import pino from 'pino';
import { Registry } from 'prom-client';
import { createApp } from '../../../dist/src/app.js';
import { Contract } from '../../../dist/src/http/contract.js';
import { loadConfig } from '../../../dist/src/config.js';
import { bareKeysApp, bareQueries, toApiKey } from './bare.mjs';

const requests = Number(process.env.LAYER_REQUESTS ?? 100_000);
const rounds = Number(process.env.LAYER_ROUNDS ?? 5);
const token = 'ds_' + 'a'.repeat(40);
const tokenHash = createHash('sha256').update(token).digest('hex');
const sessions = new Map([
  [tokenHash, { workspaceId: 'ws_1', userId: 'usr_1', role: 'owner', sessionId: 'dss_1', expiresAt: new Date(Date.now() + 3_600_000) }],
]);
const created = new Date('2026-12-01T10:00:00Z');
// What the database would give: five keys, as the autocannon benchmark's workspace has.
const keyRows = () =>
  Array.from({ length: 5 }, (_, i) => ({
    id: `key_0${i}`,
    name: `key ${i}`,
    key_prefix: 'vas_live_ab',
    revoked_at: null,
    last_used_at: null,
    created_at: created,
  }));
const session = async (t) => {
  const s = sessions.get(createHash('sha256').update(t).digest('hex'));
  return s ? { kind: 'dashboard', ...s } : null;
};

function fullApp(auth = { apiKey: async () => null, dashboardSession: session }, listApiKeys = async () => ({ status: 200, body: keyRows().map(toApiKey) })) {
  const contract = Contract.load();
  return contract.backend().then((api) =>
    createApp({
      config: loadConfig({ DATABASE_URL: 'postgres://unused/none', LOG_LEVEL: 'silent', CONTRACT_CHECK: 'off', SECRETS_KEY: 'b'.repeat(64) }),
      log: pino({ level: 'silent' }),
      contract,
      api,
      handlers: { listApiKeys },
      metrics: new Registry(),
      auth,
    }),
  );
}

function bareApp() {
  const app = new Koa();
  app.use(async (ctx) => {
    const m = /^Bearer (\S+)$/.exec(ctx.get('Authorization'));
    const principal = m ? await session(m[1]) : null;
    if (!principal) {
      ctx.status = 401;
      return;
    }
    ctx.body = keyRows().map(toApiKey);
  });
  return app;
}

async function withDatabase(url) {
  const { startService } = await import('../../../dist/src/service.js');
  const { createLogger } = await import('../../../dist/src/log.js');
  const fs = await import('node:fs');
  const { default: knexFactory } = await import('knex');
  const config = loadConfig({
    DATABASE_URL: url,
    DATA_DIR: fs.mkdtempSync('/tmp/layer-bench-'),
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    CONTRACT_CHECK: 'off',
    SECRETS_KEY: 'd'.repeat(64),
  });
  const service = await startService(config, createLogger('silent'));
  const handle = service.server.listeners('request')[0];
  handle.verbose = true;
  const signup = await inject(handle, {
    method: 'POST',
    url: '/api/v1/auth/signup',
    auth: null,
    body: { email: `layer${Date.now()}@example.com`, password: 'long-enough-pw', workspace_name: 'Layer' },
  });
  const dsToken = JSON.parse(signup.body).session_token;
  for (let i = 0; i < 5; i++) await inject(handle, { method: 'POST', auth: dsToken, body: { name: `key ${i}` } });
  handle.verbose = false;
  const knex = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 20 } });
  const queries = bareQueries(knex);
  const wrap = (h) => (req, res) => {
    req.headers.authorization = `Bearer ${dsToken}`;
    return h(req, res);
  };
  const bareHandle = bareKeysApp(knex).callback();
  if (process.env.LAYER_FULL_QUERIES === 'bare') {
    // The layer with the bare handler's own database code in place of the service's authentication and handler.
    const lookup = async (t) => {
      const row = await queries.session(t);
      return row
        ? { kind: 'dashboard', workspaceId: row.workspace_id, userId: row.user_id, role: row.role, sessionId: row.id, expiresAt: row.expires_at }
        : null;
    };
    const list = async (req) => ({ status: 200, body: (await queries.keys(req.auth.workspaceId)).map(toApiKey) });
    const layered = (await fullApp({ apiKey: async () => null, dashboardSession: lookup }, list)).callback();
    return { full: wrap(layered), bare: wrap(bareHandle) };
  }
  return { full: wrap(handle), bare: wrap(bareHandle) };
}

/** One request through `handle`, resolved when the app ends the response (its bytes are dropped). */
function inject(handle, { method = 'GET', url = '/api/v1/keys', auth = token, body } = {}) {
  return new Promise((resolve) => {
    const socket = new Socket();
    const req = new http.IncomingMessage(socket);
    req.method = method;
    req.url = url;
    req.headers = { host: '127.0.0.1', 'user-agent': 'layer-bench', ...(auth && { authorization: `Bearer ${auth}` }) };
    if (body !== undefined) {
      const bytes = Buffer.from(JSON.stringify(body));
      Object.assign(req.headers, { 'content-type': 'application/json', 'content-length': String(bytes.length) });
      req.push(bytes);
    }
    req.push(null);
    const res = new http.ServerResponse(req);
    res.end = function (body) {
      resolve(handle.verbose ? { status: this.statusCode, headers: this.getHeaders(), body: String(body) } : body);
      return this;
    };
    handle(req, res);
  });
}

async function round(handle, n) {
  const before = process.cpuUsage();
  // 20 in flight, as the autocannon benchmark's 20 connections.
  let next = 0;
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (next++ < n) await inject(handle);
    }),
  );
  const used = process.cpuUsage(before);
  return (used.user + used.system) / n;
}

let full = (await fullApp()).callback();
let bare = bareApp().callback();
if (process.env.LAYER_DATABASE_URL) {
  // Both sides on a real database (the service started whole, its app's callback driven directly; the
  // bare handler with the service's queries through a knex of its own): the sockets still left out.
  ({ full, bare } = await withDatabase(process.env.LAYER_DATABASE_URL));
}
for (const [name, handle] of [
  ['bare', bare],
  ['full', full],
]) {
  handle.verbose = true;
  const answer = await inject(handle);
  handle.verbose = false;
  if (answer.status !== 200 || !answer.body.includes('"key 4"')) throw new Error(`the ${name} side answered ${JSON.stringify(answer)}`);
  if (process.env.LAYER_SHOW) console.log(name, JSON.stringify(answer).slice(0, 600));
}
await round(bare, 20_000);
await round(full, 20_000); // warm-up
console.log(
  `The contract layer alone (no client socket, ${process.env.LAYER_DATABASE_URL ? 'a real database' : 'no database'}), ${requests} requests a round, CPU us a request:`,
);
const only = process.env.LAYER_ONLY;
for (let i = 1; i <= rounds; i++) {
  const b = only === 'full' ? NaN : await round(bare, requests);
  const f = only === 'bare' ? NaN : await round(full, requests);
  console.log(`round ${i}: bare ${b.toFixed(1)}, full ${f.toFixed(1)}, layer's own ${(f - b).toFixed(1)} us a request`);
}
process.exit(0);
