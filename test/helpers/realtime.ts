/**
 * Realtime test steps: agents and session tokens through the API, real `ws` clients bound to distinct
 * 127.x.y.z source addresses (so the per-IP attempt limit stays out of the way), and a check of every
 * server message against its AsyncAPI schema.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import WebSocket from 'ws';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import { asyncapiPayloadValidator } from '../../src/contract/documents.js';
import { realtimeServerMessages } from '../../generated/asyncapi-types.js';
import type { TestService } from './service.js';
import type { Tenant } from './fixtures.js';
import { ADMIN_TOKEN } from './service.js';
import { patient } from './patience.js';

/** The test media (test/fixtures). */
export const FIXTURES = path.resolve(import.meta.dirname, '../fixtures');
export const fixture = (rel: string) => readFileSync(path.join(FIXTURES, rel));

let addressCounter = Math.floor(Math.random() * 200) * 250;
/**
 * A fresh loopback source address per call: 127.<a>.<b>.<c>, never one handed out before in this
 * process (the per-address limits count every attempt, so a repeat is another test's attempts). Each
 * count maps to exactly one address: c runs 1..254, b 0..255, a 1..254.
 */
export function freshAddress(): string {
  addressCounter += 1;
  const n = addressCounter;
  const c = (n % 254) + 1;
  const b = Math.floor(n / 254) % 256;
  const a = (Math.floor(n / (254 * 256)) % 254) + 1;
  return `127.${a}.${b}.${c}`;
}

const serverMessages = new Map<string, ValidateFunction>(
  Object.entries(realtimeServerMessages).map(([type, component]) => [type, asyncapiPayloadValidator(component)]),
);

/** Throws unless the message is one of the AsyncAPI server messages and matches its schema. */
export function assertServerMessage(msg: Record<string, unknown>): void {
  const validate = serverMessages.get(String(msg.type));
  assert.ok(validate, `unknown server message type ${JSON.stringify(msg.type)}`);
  assert.ok(validate(msg), `server message does not match the AsyncAPI schema: ${JSON.stringify(validate.errors)} in ${JSON.stringify(msg).slice(0, 300)}`);
}

export const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });
export const operator = { Authorization: `Bearer ${ADMIN_TOKEN}` };

export async function createAgent(t: TestService, tenant: Tenant, body: Record<string, unknown> = {}): Promise<string> {
  const res = await t.http
    .post('/api/v1/agents')
    .set(bearer(tenant.apiKey))
    .send({ name: 'Receptionist', instruction: 'You are the receptionist of Acme Dental.', first_message: 'Hello! How can I help you today?', ...body });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.agent_id as string;
}

export async function setWorkspace(t: TestService, workspaceId: string, patch: Record<string, unknown>): Promise<void> {
  const res = await t.http.patch(`/admin/v1/workspaces/${workspaceId}`).set(operator).send(patch);
  assert.equal(res.status, 200, JSON.stringify(res.body));
}

export async function mintSession(
  t: TestService,
  tenant: Tenant,
  agentId: string,
  source = 'voice',
  userId = 'visitor-1',
): Promise<{ session_token: string; ws_url: string }> {
  const res = await t.http.post('/api/v1/realtime/sessions').set(bearer(tenant.apiKey)).send({ agent_id: agentId, user_id: userId, source });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body;
}

export interface Client {
  ws: WebSocket;
  messages: Array<Record<string, unknown>>;
  /** Resolves with the close code and reason. */
  closed: Promise<{ code: number; reason: string }>;
  /** The next message (after those already taken) matching the predicate. */
  next(match?: string | ((m: Record<string, unknown>) => boolean), timeoutMs?: number): Promise<Record<string, unknown>>;
  sendJson(value: unknown): void;
  sendFrame(mimeType: string, data: Buffer | string): void;
  close(): Promise<{ code: number; reason: string }>;
}

/**
 * Opens `url` from a fresh loopback address; every message is checked against the AsyncAPI schemas.
 * `generateMask` is ws's: a benchmark's flood fills it with zeros so that sending costs its process no masking.
 */
export function connect(url: string, opts: { localAddress?: string; headers?: Record<string, string>; generateMask?: (mask: Buffer) => void } = {}): Client {
  const ws = new WebSocket(url, { localAddress: opts.localAddress ?? freshAddress(), headers: opts.headers, generateMask: opts.generateMask });
  const messages: Array<Record<string, unknown>> = [];
  const waiters: Array<() => void> = [];
  let taken = 0;
  ws.on('message', (data, isBinary) => {
    assert.equal(isBinary, false, 'the server sends only text frames');
    const msg = JSON.parse(data.toString()) as Record<string, unknown>;
    assertServerMessage(msg);
    messages.push(msg);
    for (const w of waiters.splice(0)) w();
  });
  ws.on('error', () => undefined);
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => {
      resolve({ code, reason: reason.toString() });
      for (const w of waiters.splice(0)) w();
    }),
  );
  const client: Client = {
    ws,
    messages,
    closed,
    async next(match, timeoutMs = 5000) {
      const pred = typeof match === 'string' ? (m: Record<string, unknown>) => m.type === match : (match ?? (() => true));
      const deadline = Date.now() + patient(timeoutMs);
      for (;;) {
        while (taken < messages.length) {
          const m = messages[taken++];
          if (pred(m)) return m;
        }
        if (ws.readyState === WebSocket.CLOSED) throw new Error(`socket closed while waiting; got ${JSON.stringify(messages).slice(0, 500)}`);
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`timed out waiting for a message; got ${JSON.stringify(messages).slice(0, 800)}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
    sendJson(value) {
      ws.send(typeof value === 'string' ? value : JSON.stringify(value));
    },
    sendFrame(mimeType, data) {
      ws.send(JSON.stringify({ mime_type: mimeType, data: typeof data === 'string' ? data : data.toString('base64') }));
    },
    async close() {
      if (ws.readyState === WebSocket.OPEN) ws.close(1000);
      return closed;
    },
  };
  return client;
}

/** Opens and expects an immediate close with no message before it. */
export async function expectRefusal(url: string, code: number, reason: string, opts: { localAddress?: string } = {}): Promise<void> {
  const c = connect(url, opts);
  const closed = await c.closed;
  assert.deepEqual(closed, { code, reason });
  assert.deepEqual(c.messages, [], 'no message precedes a refusal');
}

/** The HTTP answer to an upgrade the server refuses before accepting (status and headers). */
export function upgradeRefusal(
  url: string,
  localAddress: string,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined> } | 'accepted'> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { localAddress });
    ws.on('unexpected-response', (_req, res) => {
      resolve({ status: res.statusCode ?? 0, headers: res.headers });
      res.resume();
      ws.terminate();
    });
    ws.on('open', () => {
      resolve('accepted');
      ws.close();
    });
    ws.on('error', (err) => {
      if (!/Unexpected server response/.test(String(err))) reject(err);
    });
  });
}

export async function waitFor<T>(fn: () => Promise<T | undefined | null | false>, timeoutMs = 5000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + patient(timeoutMs);
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Like waitFor, for something that moves towards its end (a batch's recipients, a call's recording):
 * gives up only after `idleMs` in which `look` saw no change of `progress`. A busy machine slows such a
 * thing down without stopping it; a stuck one stops.
 */
export async function waitWhileMoving<T>(look: () => Promise<{ done: T | null; progress: string }>, idleMs: number, what: string): Promise<T> {
  let deadline = Date.now() + patient(idleMs);
  let last: string | null = null;
  for (;;) {
    const { done, progress } = await look();
    if (done) return done;
    if (progress !== last) {
      last = progress;
      deadline = Date.now() + patient(idleMs);
    } else if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}: nothing moved in ${patient(idleMs)} ms (last seen ${progress})`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A web session's conversation record, once it is written (within `timeoutMs`). */
export function sessionRecord(t: TestService, tenant: Tenant, sessionId: unknown, timeoutMs = 5000): Promise<Record<string, any>> {
  return waitFor(
    async () => {
      const res = await t.http.get(`/api/v1/realtime/conversations/${sessionId}`).set(bearer(tenant.apiKey));
      return res.status === 200 ? (res.body as Record<string, any>) : null;
    },
    timeoutMs,
    'the record',
  );
}

export async function tokenCount(t: TestService, workspaceId: string): Promise<number> {
  const [{ count }] = await t.service.db.knex('realtime_tokens').where({ workspace_id: workspaceId }).count<{ count: string }[]>('* as count');
  return Number(count);
}
