/**
 * The checks, in the order they run. Each states what it expects of any deployment of the contract;
 * the write checks run only with --allow-writes, on resources they create and delete again.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket from 'ws';
import type { Contract, Operation } from './contract.js';
import type { Results } from './results.js';
import type { Response, Target } from './target.js';

export interface Workspace {
  apiKey: string;
  /** Ids of this workspace's resources, by the path parameter they fill (agent_id, tool_id, ...). */
  ids: Map<string, string[]>;
}

export interface RunContext {
  target: Target;
  results: Results;
  allowWrites: boolean;
  /** One or two workspaces the checks may act as (two are needed for isolation). */
  workspaces: Workspace[];
  /** Our own contract, to compare the deployment's document with. */
  reference?: Contract;
  /** Where the deployment can reach a receiver this process starts (webhook check). */
  receiverHost: string;
  /** What the checks created, deleted at the end (last first). */
  cleanup: Array<() => Promise<unknown>>;
  /** Ids of the resources the checks created: the only ones write attempts across workspaces may target. */
  created: Set<string>;
  /** The operations checked (--operations, --skip-operations); others are called only as set-up for them. */
  selected: (operationId: string) => boolean;
}

const isSecured = (op: Operation) => op.security.length > 0 && op.security.every((alt) => Object.keys(alt).length > 0);
const takesApiKey = (op: Operation) => op.security.some((alt) => 'ApiKey' in alt);
const sessionOnly = (op: Operation) => isSecured(op) && !takesApiKey(op) && op.security.some((alt) => 'DashboardSession' in alt);
const developerOps = (c: Contract) => c.operations.filter((op) => takesApiKey(op));
/** The operations a check exercises: the selected ones. */
const checked = (ctx: RunContext) => ctx.target.contract.operations.filter((op) => ctx.selected(op.operationId));
/** A value for a path parameter that names nothing: a well-formed id is not needed before authentication. */
const PLACEHOLDER = 'conformance_placeholder_0000000000';

export async function checkDocument(ctx: RunContext): Promise<void> {
  const { results, target, reference } = ctx;
  results.begin('contract-document');
  results.expect(String(target.contract.document.openapi ?? '').startsWith('3.1'), `/openapi.json is OpenAPI ${target.contract.document.openapi}, not 3.1`);
  results.expect(target.contract.operations.length > 0, '/openapi.json declares no operations');
  if (!reference) return;
  for (const ours of reference.operations) {
    const theirs = target.contract.operations.find((o) => o.operationId === ours.operationId);
    if (!theirs) {
      results.fail(ours.operationId, `operation ${ours.operationId} (${ours.method} ${ours.path}) is missing`);
      continue;
    }
    results.expect(
      theirs.method === ours.method && theirs.path === ours.path,
      `${ours.operationId} is ${theirs.method} ${theirs.path}, the reference has ${ours.method} ${ours.path}`,
      ours.operationId,
    );
    for (const status of ours.statuses) results.expect(theirs.statuses.includes(status), `${ours.operationId} no longer declares ${status}`, ours.operationId);
  }
}

export async function checkUnauthenticated(ctx: RunContext): Promise<void> {
  const { results, target } = ctx;
  results.begin('authentication');
  for (const op of checked(ctx).filter(isSecured)) {
    const params = Object.fromEntries(op.pathParams.map((p) => [p, PLACEHOLDER]));
    for (const token of [null, 'conformance-unknown-token']) {
      const res = await target.send('authentication', { op, params, token, body: op.requestContentTypes.length ? {} : undefined });
      results.expect(
        res.status === 401,
        `${op.method} ${op.path} answered ${res.status} ${token ? 'with an unknown token' : 'without credentials'}, not 401`,
        op.operationId,
      );
      if (res.status === 401) results.expect(target.contract.isErrorEnvelope(res.json), `${op.operationId}'s 401 is not the error envelope`, op.operationId);
    }
  }
}

export async function checkKeyRoutes(ctx: RunContext): Promise<void> {
  const { results, target, workspaces } = ctx;
  results.begin('session-only-routes');
  if (!workspaces.length) return results.skip('needs --api-key (or --allow-writes to sign up)');
  for (const op of checked(ctx).filter(sessionOnly)) {
    const params = Object.fromEntries(op.pathParams.map((p) => [p, PLACEHOLDER]));
    const res = await target.send('session-only-routes', { op, params, token: workspaces[0].apiKey, body: op.requestContentTypes.length ? {} : undefined });
    results.expect(res.status === 401, `${op.method} ${op.path} answered ${res.status} to an API key, not 401`, op.operationId);
  }
}

/** Records the ids a list or a resource shows, by the path parameter names of the contract. */
function collectIds(ws: Workspace, pathParams: Set<string>, value: unknown): void {
  const items = Array.isArray((value as any)?.data) ? (value as any).data : [value];
  for (const item of items) {
    if (!item || typeof item !== 'object') continue;
    for (const [k, v] of Object.entries(item)) {
      if (typeof v !== 'string' || !pathParams.has(k)) continue;
      const list = ws.ids.get(k) ?? [];
      if (!list.includes(v)) list.push(v);
      ws.ids.set(k, list);
    }
  }
}

function allPathParams(c: Contract): Set<string> {
  return new Set(c.operations.flatMap((o) => o.pathParams));
}

/** Reads everything a workspace can list, then every resource listed. */
async function readAll(ctx: RunContext, ws: Workspace, check: string): Promise<void> {
  const { target, results } = ctx;
  const params = allPathParams(target.contract);
  const reads = developerOps(target.contract).filter((op) => op.method === 'GET');
  for (const op of reads.filter((o) => o.pathParams.length === 0)) {
    const res = await target.send(check, { op, token: ws.apiKey });
    results.expect(res.status < 400, `${op.operationId} answered ${res.status} to its own workspace's key`, op.operationId);
    if (res.status < 300) collectIds(ws, params, res.json);
  }
  for (const op of reads.filter((o) => o.pathParams.length > 0 && ctx.selected(o.operationId))) {
    const values = op.pathParams.map((p) => ws.ids.get(p)?.[0]);
    if (values.some((v) => v === undefined)) continue;
    const res = await target.send(check, { op, params: Object.fromEntries(op.pathParams.map((p, i) => [p, values[i]!])), token: ws.apiKey });
    results.expect(res.status < 400, `${op.operationId} answered ${res.status} for the workspace's own ${op.pathParams.join(', ')}`, op.operationId);
    if (res.status < 300) collectIds(ws, params, res.json);
  }
}

export async function checkReads(ctx: RunContext): Promise<void> {
  ctx.results.begin('reads');
  if (!ctx.workspaces.length) return ctx.results.skip('needs --api-key (or --allow-writes to sign up)');
  for (const ws of ctx.workspaces) await readAll(ctx, ws, 'reads');
}

export async function checkIsolation(ctx: RunContext): Promise<void> {
  const { results, target, workspaces } = ctx;
  results.begin('isolation');
  if (workspaces.length < 2) return results.skip('needs two workspaces: --api-key twice, or --allow-writes');
  const [a, b] = workspaces;
  const foreign = new Set([...b.ids.values()].flat());
  if (!foreign.size) return results.skip('the second workspace has no resources to try (run with --allow-writes to create some)');
  for (const op of developerOps(target.contract).filter((o) => o.pathParams.length > 0 && ctx.selected(o.operationId))) {
    if (op.method !== 'GET' && !ctx.allowWrites) continue;
    // A write attempt targets only what the checks created: a broken deployment must not damage real data.
    const values = op.pathParams.map((p) => (b.ids.get(p) ?? []).find((id) => op.method === 'GET' || ctx.created.has(id)));
    if (values.some((v) => v === undefined)) continue;
    const params = Object.fromEntries(op.pathParams.map((p, i) => [p, values[i]!]));
    const res = await target.send('isolation', {
      op,
      params,
      token: a.apiKey,
      body: op.requestContentTypes.includes('application/json') ? (op.bodyExample ?? {}) : undefined,
    });
    results.expect(
      res.status === 403 || res.status === 404 || res.status === 422,
      `${op.method} ${op.path} with another workspace's ${op.pathParams.join(', ')} answered ${res.status}, not 403/404`,
      op.operationId,
    );
    if (res.status < 300) results.fail(op.operationId, `${op.operationId} served another workspace's resource: ${res.text.slice(0, 200)}`);
  }
  for (const op of developerOps(target.contract).filter((o) => o.method === 'GET' && o.pathParams.length === 0 && ctx.selected(o.operationId))) {
    const res = await target.send('isolation', { op, token: a.apiKey });
    const leaked = [...foreign].filter((id) => res.text.includes(id));
    results.expect(leaked.length === 0, `${op.operationId} lists another workspace's ${leaked.slice(0, 3).join(', ')}`, op.operationId);
  }
}

/** The operations whose bad bodies can be sent with real path parameters of the workspace. */
function bodyOps(ctx: RunContext, ws: Workspace): Array<{ op: Operation; params: Record<string, string> }> {
  const out: Array<{ op: Operation; params: Record<string, string> }> = [];
  for (const op of developerOps(ctx.target.contract)) {
    if (!op.requestContentTypes.includes('application/json') || !ctx.selected(op.operationId)) continue;
    const values = op.pathParams.map((p) => ws.ids.get(p)?.[0]);
    if (values.some((v) => v === undefined)) continue;
    out.push({ op, params: Object.fromEntries(op.pathParams.map((p, i) => [p, values[i]!])) });
  }
  return out;
}

export async function checkBadBodies(ctx: RunContext): Promise<void> {
  const { results, target, workspaces } = ctx;
  results.begin('bad-bodies');
  if (!ctx.allowWrites) return results.skip('sends bodies to write operations: needs --allow-writes');
  if (!workspaces.length) return results.skip('needs a workspace');
  const ws = workspaces[0];
  for (const { op, params } of bodyOps(ctx, ws)) {
    for (const [what, raw] of [
      ['unparsable JSON', '{"'],
      ['a JSON array', '[]'],
      ['a JSON string', '"text"'],
      ['null', 'null'],
      ['deep nesting', '['.repeat(5000) + ']'.repeat(5000)],
    ] as const) {
      const res = await target.send('bad-bodies', { op, params, token: ws.apiKey, raw: { text: raw, contentType: 'application/json' } });
      results.expect(res.status >= 400 && res.status < 500, `${op.operationId} answered ${res.status} to ${what}`, op.operationId);
    }
    if (op.bodyExample && typeof op.bodyExample === 'object' && !Array.isArray(op.bodyExample)) {
      const field = 'conformance_unknown_field';
      // Ids in the example name nothing here: the workspace's own take their place, so only the unknown field is wrong.
      const example = Object.fromEntries(Object.entries(op.bodyExample as Record<string, unknown>).map(([k, v]) => [k, ws.ids.get(k)?.[0] ?? v]));
      const res = await target.send('bad-bodies', { op, params, token: ws.apiKey, body: { ...example, [field]: 1 } });
      const named =
        res.json?.error?.param === field ||
        (Array.isArray(res.json?.detail) && res.json.detail.some((d: any) => Array.isArray(d.loc) && d.loc.includes(field)));
      results.expect(
        res.status === 422 && named,
        `${op.operationId} answered ${res.status} to an unknown field${res.status === 422 ? ' without naming it' : ''}`,
        op.operationId,
      );
    }
  }
}

/** Signs up a workspace and creates its API key (writes). */
export async function signUpWorkspace(ctx: RunContext, label: string): Promise<Workspace | null> {
  const { target } = ctx;
  const signup = target.op('signup');
  const createKey = target.op('createApiKey');
  if (!signup || !createKey) return null;
  const email = `conformance-${label}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}@example.com`;
  const s = await target.send('setup', {
    op: signup,
    body: { email, password: `conformance-${Math.random().toString(36)}`, workspace_name: `Conformance ${label}` },
  });
  if (s.status !== 201) return null;
  const k = await target.send('setup', { op: createKey, token: s.json.session_token, body: { name: 'conformance' } });
  if (k.status !== 201) return null;
  return { apiKey: k.json.key, ids: new Map() };
}

/** Creates a resource from the contract's example, remembers its ids and how to delete it. */
async function create(
  ctx: RunContext,
  ws: Workspace,
  operationId: string,
  body: unknown,
  deleteOperationId: string,
  idField: string,
): Promise<Response | null> {
  const { target, results } = ctx;
  const op = target.op(operationId);
  if (!op) return null;
  const res = await target.send('writes', { op, token: ws.apiKey, body });
  results.expect(res.status === 201 || res.status === 200, `${operationId} answered ${res.status}: ${res.text.slice(0, 200)}`, operationId);
  if (res.status >= 300) return null;
  const id = res.json?.[idField] as string | undefined;
  if (id) {
    ctx.created.add(id);
    ws.ids.set(idField, [id, ...(ws.ids.get(idField) ?? [])]);
    const del = target.op(deleteOperationId);
    if (del) ctx.cleanup.push(() => target.send('cleanup', { op: del, params: { [idField]: id }, token: ws.apiKey }));
  }
  return res;
}

export async function checkWrites(ctx: RunContext): Promise<void> {
  const { results, target, workspaces } = ctx;
  results.begin('writes');
  if (!ctx.allowWrites) return results.skip('needs --allow-writes');
  for (const ws of workspaces) {
    await create(ctx, ws, 'createAgent', { name: 'Conformance agent', instruction: 'You answer questions about opening hours.' }, 'deleteAgent', 'agent_id');
    await create(
      ctx,
      ws,
      'createTool',
      { name: 'conformance_lookup', description: 'Looks up opening hours.', url: 'https://1.1.1.1/conformance-tool', method: 'POST' },
      'deleteTool',
      'tool_id',
    );
    await create(ctx, ws, 'createWebhook', { url: 'https://1.1.1.1/conformance-hooks' }, 'deleteWebhook', 'webhook_id');
  }
  const ws = workspaces[0];
  const agentId = ws.ids.get('agent_id')?.[0];
  const update = target.op('updateAgent');
  const get = target.op('getAgent');
  if (agentId && update && get) {
    const patched = await target.send('writes', { op: update, params: { agent_id: agentId }, token: ws.apiKey, body: { name: 'Conformance agent, renamed' } });
    results.expect(
      patched.status === 200 && patched.json?.name === 'Conformance agent, renamed',
      `updateAgent answered ${patched.status} without the new name`,
      'updateAgent',
    );
    const read = await target.send('writes', { op: get, params: { agent_id: agentId }, token: ws.apiKey });
    results.expect(read.json?.name === 'Conformance agent, renamed', 'getAgent does not show the update', 'getAgent');
  }
  const scratch = await create(ctx, ws, 'createAgent', { name: 'Conformance scratch agent' }, 'deleteAgent', 'agent_id');
  const del = target.op('deleteAgent');
  if (scratch && del && get) {
    const id = scratch.json.agent_id as string;
    const gone = await target.send('writes', { op: del, params: { agent_id: id }, token: ws.apiKey });
    results.expect(gone.status === 200 || gone.status === 204, `deleteAgent answered ${gone.status}`, 'deleteAgent');
    const after = await target.send('writes', { op: get, params: { agent_id: id }, token: ws.apiKey });
    results.expect(after.status === 404, `a deleted agent answers ${after.status}, not 404`, 'deleteAgent');
    ws.ids.set(
      'agent_id',
      (ws.ids.get('agent_id') ?? []).filter((x) => x !== id),
    );
  }
}

/** Waits for the first POST to a receiver this process runs; resolves with its headers and raw body. */
function startReceiver(
  host: string,
): Promise<{ url: string; next: (timeoutMs: number) => Promise<{ headers: http.IncomingHttpHeaders; body: Buffer } | null>; close: () => Promise<void> }> {
  const received: Array<{ headers: http.IncomingHttpHeaders; body: Buffer }> = [];
  const waiters: Array<() => void> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(200).end();
      for (const w of waiters.splice(0)) w();
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://${host}:${port}/conformance-webhooks`,
        next: async (timeoutMs) => {
          const deadline = Date.now() + timeoutMs;
          while (!received.length && Date.now() < deadline) await new Promise<void>((r) => (waiters.push(r), setTimeout(r, 200)));
          return received.shift() ?? null;
        },
        close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))),
      });
    });
  });
}

/** Opens a text session and exchanges one message, so the deployment sends call.completed. */
async function textSession(wsUrl: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new WebSocket(wsUrl);
    const timer = setTimeout(() => (socket.terminate(), resolve(false)), 30_000);
    let sent = false;
    socket.on('message', (data) => {
      const msg = JSON.parse(data.toString()) as { type?: string };
      if (msg.type === 'session_started' && !sent) {
        sent = true;
        socket.send(JSON.stringify({ mime_type: 'text/plain', data: Buffer.from('What are your opening hours?').toString('base64') }));
      } else if (msg.type === 'turn_complete' && sent) {
        socket.close(1000);
      }
    });
    socket.on('close', () => (clearTimeout(timer), resolve(sent)));
    socket.on('error', () => undefined);
  });
}

export async function checkWebhookSignatures(ctx: RunContext): Promise<void> {
  const { results, target, workspaces } = ctx;
  results.begin('webhook-signatures');
  if (!ctx.allowWrites) return results.skip('needs --allow-writes');
  const ops = ['createWebhook', 'getWebhookSecret', 'createAgent', 'createRealtimeSession'].map((id) => target.op(id));
  if (ops.some((o) => !o)) return results.skip('the deployment lacks the webhook or realtime operations');
  const ws = workspaces[0];
  const receiver = await startReceiver(ctx.receiverHost);
  try {
    const hook = await create(ctx, ws, 'createWebhook', { url: receiver.url, events: ['call.completed'] }, 'deleteWebhook', 'webhook_id');
    if (!hook) return;
    const secret = (await target.send('webhook-signatures', { op: ops[1]!, token: ws.apiKey })).json?.webhook_secret as string | undefined;
    results.expect(typeof secret === 'string' && secret.length > 0, 'getWebhookSecret gave no secret');
    const agent = await create(ctx, ws, 'createAgent', { name: 'Conformance webhook agent', instruction: 'Answer briefly.' }, 'deleteAgent', 'agent_id');
    if (!agent || !secret) return;
    const minted = await target.send('webhook-signatures', {
      op: ops[3]!,
      token: ws.apiKey,
      body: { agent_id: agent.json.agent_id, user_id: 'conformance', source: 'text' },
    });
    if (minted.status !== 201) return results.fail(null, `createRealtimeSession answered ${minted.status}: ${minted.text.slice(0, 200)}`);
    results.expect(await textSession(minted.json.ws_url), 'the realtime session did not start');
    const delivery = await receiver.next(60_000);
    if (!delivery) return results.fail(null, 'no webhook delivery arrived within 60 s (can the deployment reach ' + receiver.url + '? set --receiver-host)');
    const header = String(delivery.headers['x-webhook-signature'] ?? '');
    const expected = createHmac('sha256', Buffer.from(secret, 'utf8')).update(delivery.body).digest('hex');
    results.expect(
      header.length === expected.length && timingSafeEqual(Buffer.from(header), Buffer.from(expected)),
      `X-Webhook-Signature '${header.slice(0, 16)}…' does not verify with the workspace secret`,
    );
    const standard = delivery.headers['webhook-signature'];
    if (standard) {
      const id = String(delivery.headers['webhook-id']);
      const ts = String(delivery.headers['webhook-timestamp']);
      const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
      const sig = `v1,${createHmac('sha256', key).update(`${id}.${ts}.`).update(delivery.body).digest('base64')}`;
      results.expect(String(standard).split(' ').includes(sig), 'webhook-signature (Standard Webhooks) does not verify');
    }
    const event = JSON.parse(delivery.body.toString('utf8'));
    results.expect(event.event === 'call.completed', `the delivery is '${event.event}', not call.completed`);
  } finally {
    await receiver.close();
  }
}
