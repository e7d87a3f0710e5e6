/**
 * Refusals the contract declares for whole kinds of operations, provoked on every operation of the
 * kind as the contract lists them (so an operation added later is covered without a line here):
 * - a viewer's dashboard session on a developer operation that needs a higher role: 403
 *   `insufficient_role`, before its body is read, validated or acted on;
 * - a path parameter that breaks its declared constraint (longer than its maxLength, not matching its
 *   pattern, not one of its values): 422 naming the parameter (or, for an operation whose body is
 *   required and sent empty, a missing field of it), before any lookup;
 * - a well-formed id that names nothing: 404 with the `..._not_found` code of the resource.
 * Every answer is checked against the contract by the service under test (CONTRACT_CHECK=enforce), and
 * after each kind nothing of the workspace's has changed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, freshAddress, operator } from '../helpers/realtime.js';
import { readRawAnswer } from '../helpers/raw-http.js';
import { Contract, type OperationInfo } from '../../src/http/contract.js';
import { internalOpenapiDocument } from '../../src/contract/documents.js';

interface Schema {
  $ref?: string;
  type?: string;
  minimum?: number;
  maxLength?: number;
  pattern?: string;
  enum?: string[];
}
interface Parameter {
  $ref?: string;
  name: string;
  in: string;
  schema: Schema;
}
interface Document {
  paths: Record<string, Record<string, { operationId?: string; parameters?: Parameter[] }> & { parameters?: Parameter[] }>;
}

const bundle = internalOpenapiDocument() as unknown as Document;

function resolve<T extends { $ref?: string }>(value: T): T {
  if (!value.$ref) return value;
  let target: unknown = bundle;
  for (const key of value.$ref.replace(/^#\//, '').split('/')) target = (target as Record<string, unknown>)[key];
  return resolve(target as T);
}

/** The path parameters an operation declares (the path item's and its own), schemas resolved. */
function pathParameters(op: OperationInfo): Array<{ name: string; schema: Schema }> {
  const item = bundle.paths[op.path];
  const declared = [...(item.parameters ?? []), ...(item[op.method.toLowerCase()].parameters ?? [])].map(resolve);
  return declared.filter((p) => p.in === 'path').map((p) => ({ name: p.name, schema: resolve(p.schema) }));
}

/** A value that breaks `schema`'s constraint, or null when the schema has none. */
function breaking(schema: Schema): string | null {
  if (schema.enum) return 'not_one_of_them';
  if (schema.pattern) return 'bad-id';
  if (schema.maxLength !== undefined) return 'x'.repeat(schema.maxLength + 1);
  if (schema.type === 'integer') return 'one';
  return null;
}

/** A well-formed id of a parameter that names nothing (its pattern's prefix, 26 characters of Crockford base32). */
function unknownId(name: string, schema: Schema): string {
  const prefix = /^\^([a-z]+_)/.exec(schema.pattern ?? '')?.[1] ?? `${name.replace(/_id$/, '').slice(0, 3)}_`;
  return `${prefix}0NKNWN0000000000000000000Z`;
}

/** Well-formed values of path parameters: the first of an enum's values, a number for an integer, else an id that names nothing. */
const wellFormed = (params: Array<{ name: string; schema: Schema }>): Record<string, string> =>
  Object.fromEntries(
    params.map((p) => [p.name, p.schema.enum?.[0] ?? (p.schema.type === 'integer' ? String(p.schema.minimum ?? 1) : unknownId(p.name, p.schema))]),
  );

const fill = (op: OperationInfo, values: Record<string, string>) => op.path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(values[name]));

const isDeveloperOperation = (op: OperationInfo) => op.security.some((s) => 'ApiKey' in s);
const allOperations = [...Contract.load().operations.values()];
const operations = allOperations.filter(isDeveloperOperation);

let t: TestService;
let owner: Tenant;
let viewer: string;

/** Every row of the workspace's that an operation could change. */
async function workspaceState(workspaceId: string): Promise<unknown> {
  const knex = t.service.db.knex;
  const tables = ['agents', 'tools', 'documents', 'mcp_servers', 'webhooks', 'calls', 'batches', 'api_keys', 'realtime_tokens', 'recordings'];
  const rows = await Promise.all(
    tables.map(async (table) => (await knex(table).where({ workspace_id: workspaceId })).map((row) => JSON.stringify(row)).sort()),
  );
  return { workspace: await knex('workspaces').where({ id: workspaceId }).first(), ...Object.fromEntries(tables.map((table, i) => [table, rows[i]])) };
}

/** Runs `check`, which lists every answer that was not the refusal expected; then none may be listed, and the workspace is as it was. */
async function refusedLeavingAllAsItWas(check: (wrong: string[]) => Promise<void>): Promise<void> {
  const before = await workspaceState(owner.workspaceId);
  const wrong: string[] = [];
  await check(wrong);
  assert.deepEqual(wrong, []);
  assert.deepEqual(await workspaceState(owner.workspaceId), before);
}

function send(op: OperationInfo, url: string, auth: string) {
  const method = op.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
  return t.http[method](url).set(bearer(auth));
}

before(async () => {
  t = await startTestService();
  owner = await tenant(t);
  const email = `viewer-${Date.now()}@example.com`;
  const created = await t.http.post('/api/v1/members').set(bearer(owner.sessionToken)).send({ email, password: 'long-enough-pw', role: 'viewer' });
  assert.equal(created.status, 201, created.text);
  const login = await t.http.post('/api/v1/auth/login').send({ email, password: 'long-enough-pw' });
  assert.equal(login.status, 200, login.text);
  viewer = login.body.session_token as string;
  // Something of each kind, so a refusal that went through to the handler would have something to change.
  const agent = await t.http.post('/api/v1/agents').set(bearer(owner.apiKey)).send({ name: 'Kept as it is' });
  assert.equal(agent.status, 201, agent.text);
  const tool = await t.http
    .post('/api/v1/tools')
    .set(bearer(owner.apiKey))
    .send({ name: 'kept_tool', description: 'Kept.', url: 'http://127.0.0.1:9/tool', parameters: { type: 'object', properties: {} } });
  assert.equal(tool.status, 201, tool.text);
});
after(() => t.close());

describe('refusals every operation of a kind declares', () => {
  it("a viewer's session is refused 403 insufficient_role by every developer operation that needs more, and nothing changes", async (ctx) => {
    const guarded = operations.filter((op) => op.minimumRole !== 'viewer');
    ctx.diagnostic(`${guarded.length} operations need more than a viewer`);
    assert.ok(guarded.length >= 40, `only ${guarded.length} operations need more than a viewer`);
    await refusedLeavingAllAsItWas(async (wrong) => {
      for (const op of guarded) {
        const values = wellFormed(pathParameters(op));
        const res = await send(op, fill(op, values), viewer).send(op.requestContentTypes.includes('application/json') ? { name: 'Not stored' } : undefined);
        if (res.status !== 403 || res.body.error?.code !== 'insufficient_role') wrong.push(`${op.operationId}: ${res.status} ${res.text.slice(0, 200)}`);
      }
    });
  });

  it('a path parameter that breaks its declared constraint is refused 422 naming it, on every operation, and nothing changes', async (ctx) => {
    let tried = 0;
    await refusedLeavingAllAsItWas(async (wrong) => {
      for (const op of operations) {
        const params = pathParameters(op);
        for (const param of params) {
          const bad = breaking(param.schema);
          if (bad === null) continue;
          // Every other parameter well-formed, so the one broken is the only thing wrong with the path.
          const values = wellFormed(params);
          values[param.name] = bad;
          tried += 1;
          // An operation that needs a body gets an empty object: a missing body is reported before the path.
          const res = await send(op, fill(op, values), owner.apiKey).send(op.requestBodyRequired ? {} : undefined);
          const issues = JSON.stringify(res.body.detail ?? res.body.error?.param ?? '');
          // With an empty body, a required field of it may be the problem the answer names instead.
          const named = issues.includes(param.name) || (op.requestBodyRequired && res.body.error?.code === 'missing_field');
          if (res.status !== 422 || !named) {
            wrong.push(`${op.operationId} ${param.name}=${bad.slice(0, 20)}: ${res.status} ${res.text.slice(0, 300)}`);
          }
        }
      }
    });
    ctx.diagnostic(`${tried} constrained path parameters`);
    assert.ok(tried >= 45, `only ${tried} constrained path parameters`);
  });

  it('a JSON body cut off before its Content-Length is 400 request_aborted in the envelope on every operation that takes one, and nothing changes', async (ctx) => {
    const port = Number(new URL(t.url).port);
    // Every operation, whatever its credentials: a body is read before the router looks at them.
    const takesJson = allOperations.filter((op) => op.requestContentTypes.includes('application/json'));
    ctx.diagnostic(`${takesJson.length} operations take a JSON body`);
    assert.ok(takesJson.length >= 20, `only ${takesJson.length} operations take a JSON body`);
    await refusedLeavingAllAsItWas(async (wrong) => {
      for (const op of takesJson) {
        const head = [
          `${op.method} ${fill(op, wellFormed(pathParameters(op)))} HTTP/1.1`,
          'Host: x',
          `Authorization: Bearer ${owner.apiKey}`,
          'Content-Type: application/json',
          'Content-Length: 100',
          'Connection: close',
        ].join('\r\n');
        // The client sends 10 of the 100 bytes it announced, then ends its side of the connection.
        const answer = await new Promise<string>((resolve, reject) => {
          let received = '';
          const socket = net.connect({ host: '127.0.0.1', port, localAddress: freshAddress() }, () => socket.end(`${head}\r\n\r\n{"name": "`));
          socket.on('data', (d) => (received += d.toString()));
          socket.on('close', () => resolve(received));
          socket.on('error', reject);
        });
        const refusal = readRawAnswer(answer);
        if (refusal.status !== 400 || refusal.body?.error?.code !== 'request_aborted' || refusal.body.error.request_id !== refusal.requestId) {
          wrong.push(`${op.operationId}: ${answer.slice(0, 300)}`);
        }
      }
    });
  });

  it('a well-formed id that names nothing is 404 with its resource code, on every operation that takes no body, and nothing changes', async (ctx) => {
    let tried = 0;
    await refusedLeavingAllAsItWas(async (wrong) => {
      for (const op of operations) {
        const params = pathParameters(op);
        if (!params.some((p) => p.name.endsWith('_id')) || op.requestBodyRequired) continue;
        const values = wellFormed(params);
        tried += 1;
        const res = await send(op, fill(op, values), owner.apiKey);
        if (res.status !== 404 || !/_not_found$/.test(String(res.body.error?.code))) wrong.push(`${op.operationId}: ${res.status} ${res.text.slice(0, 300)}`);
      }
    });
    ctx.diagnostic(`${tried} operations on an id`);
    assert.ok(tried >= 35, `only ${tried} operations on an id`);
  });
});

describe('refusals of routes that need no credentials', () => {
  // Health, the documents, their reference pages and the browser files take no parameter: one they do
  // not know is 422 naming it, which each declares (issue 32: they declared no 4xx at all).
  it('an unknown query parameter is 422 naming it on every GET that takes no credentials and no path parameter', async (ctx) => {
    const open = allOperations.filter((op) => op.method === 'GET' && op.security.length === 0 && !op.path.includes('{'));
    const wrong: string[] = [];
    for (const op of open) {
      const res = await t.http.get(`${op.path}?x=1`);
      if (res.status !== 422 || res.body.error?.param !== 'x') wrong.push(`${op.operationId}: ${res.status} ${res.text.slice(0, 200)}`);
    }
    assert.deepEqual(wrong, []);
    ctx.diagnostic(`${open.length} operations`);
    assert.ok(open.length >= 13, `only ${open.length} operations`);
  });
});

describe('refusals of single operations', () => {
  it("the operator's update of a workspace that does not exist is 404 workspace_not_found", async () => {
    const res = await t.http.patch('/admin/v1/workspaces/ws_does_not_exist').set(operator).send({ credit_balance_cents: 100 });
    assert.equal(res.status, 404, res.text);
    assert.equal(res.body.error.code, 'workspace_not_found');
  });

  it('provider_a callbacks in a media type other than a form are refused 415 before their signature is checked', async () => {
    for (const path of [
      '/telephony/provider_a/voice',
      '/telephony/provider_a/status?call_id=call_0NKNWN0000000000000000000Z',
      '/telephony/provider_a/amd?call_id=call_0NKNWN0000000000000000000Z',
    ]) {
      const res = await t.http.post(path).set('X-Twilio-Signature', 'c2lnbmF0dXJl').send({ CallSid: 'CA1', CallStatus: 'ringing' });
      assert.equal(res.status, 415, `${path}: ${res.text}`);
      assert.equal(res.body.error.code, 'unsupported_media_type');
    }
  });

  it('provider_a callbacks whose call_id is not a call id are refused 422 naming it', async () => {
    for (const path of ['/telephony/provider_a/voice', '/telephony/provider_a/status', '/telephony/provider_a/amd']) {
      const res = await t.http
        .post(`${path}?call_id=not-a-call`)
        .type('form')
        .set('X-Twilio-Signature', 'c2lnbmF0dXJl')
        .send('CallSid=CA1&AccountSid=AC1&From=%2B14155550199&To=%2B14155550100&CallStatus=ringing&Direction=inbound&AnsweredBy=human');
      assert.equal(res.status, 422, `${path}: ${res.text}`);
      assert.equal(res.body.error.param, 'call_id');
    }
  });

  it('a CSV batch for an agent that does not exist is 404 agent_not_found, and one sent as JSON 415; nothing is stored', async () => {
    const before = await workspaceState(owner.workspaceId);
    const unknownAgent = await t.http
      .post('/api/v1/batches/csv')
      .set(bearer(owner.apiKey))
      .field('agent_id', 'agt_0NKNWN0000000000000000000Z')
      .field('name', 'Nobody calls')
      .attach('file', Buffer.from('to_number\n+14155550002\n'), { filename: 'numbers.csv', contentType: 'text/csv' });
    assert.equal(unknownAgent.status, 404, unknownAgent.text);
    assert.equal(unknownAgent.body.error.code, 'agent_not_found');
    const json = await t.http.post('/api/v1/batches/csv').set(bearer(owner.apiKey)).send({ agent_id: 'agt_does_not_exist', name: 'As JSON' });
    assert.equal(json.status, 415, json.text);
    assert.equal(json.body.error.code, 'unsupported_media_type');
    assert.deepEqual(await workspaceState(owner.workspaceId), before);
  });
});
