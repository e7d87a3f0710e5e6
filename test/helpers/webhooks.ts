/**
 * Webhook test peers: real HTTP receivers on 127.0.0.1 that record every request, sample event
 * facts, and waiting for deliveries to be recorded.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Knex } from 'knex';
import assert from 'node:assert/strict';
import type { CallCompletedInput, BatchCompletedInput } from '../../src/webhooks/payloads.js';
import { newId } from '../../src/lib/ids.js';
import type { TestService } from './service.js';
import { patient } from './patience.js';

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  rawBody: Buffer;
  receivedAt: number;
}

export interface Receiver {
  url: string;
  port: number;
  requests: ReceivedRequest[];
  /** Resolves once `n` requests arrived; rejects after `timeoutMs`. */
  waitFor(n: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
  server: http.Server;
}

export type Respond = (req: ReceivedRequest, res: http.ServerResponse) => void;

/** A receiver that answers each request with `respond` (default: 200 `ok`). */
export async function startReceiver(respond: Respond = (_r, res) => res.writeHead(200).end('ok')): Promise<Receiver> {
  const requests: ReceivedRequest[] = [];
  const waiters: Array<() => void> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r = { method: req.method!, path: req.url!, headers: req.headers, rawBody: Buffer.concat(chunks), receivedAt: performance.now() };
      requests.push(r);
      for (const w of waiters.splice(0)) w();
      respond(r, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    port,
    requests,
    server,
    async waitFor(n, timeoutMs = 5000) {
      const deadline = Date.now() + patient(timeoutMs);
      while (requests.length < n) {
        if (Date.now() > deadline) throw new Error(`expected ${n} requests, got ${requests.length}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
      return requests;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Waits until every delivery of the event is recorded (state `done`) and returns them, oldest first. */
export async function settledDeliveries(knex: Knex, eventId: string, timeoutMs = 5000): Promise<Array<Record<string, any>>> {
  const deadline = Date.now() + patient(timeoutMs);
  for (;;) {
    const rows = await knex('webhook_deliveries').where({ event_id: eventId }).orderBy('id');
    if (rows.every((r) => r.state === 'done')) return rows;
    if (Date.now() > deadline) throw new Error(`deliveries of ${eventId} not settled: ${JSON.stringify(rows.map((r) => r.state))}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export function callFacts(overrides: Partial<CallCompletedInput> = {}): CallCompletedInput {
  return {
    conversation_id: newId('call'),
    call_sid: 'CA5f2d0c1a9b8e7d6c5b4a39281706f5e4',
    agent_id: newId('agent'),
    to_number: '+14155550123',
    provider: 'provider_a',
    first_message: 'Hi Ada, this is Sam from Acme Dental.',
    first_message_delivered: true,
    variables: { patient_name: 'Ada' },
    duration: 95,
    status: 'completed',
    transcript: [
      { role: 'model', text: 'Hi Ada, this is Sam from Acme Dental.', timestamp: 1795305100.84 },
      { role: 'user', text: 'Yes, that works. Thanks, bye.', timestamp: 1795305112.3 },
    ],
    transcript_truncated: false,
    summary: 'The patient confirmed the appointment.',
    sentiment: 'positive',
    goal_met: true,
    needs_review: false,
    unanswered_questions: [],
    interruption_count: 0,
    latency_avg_ms: 812.5,
    created_at: new Date('2026-11-21T23:51:18.000Z'),
    tool_calls: [],
    ...overrides,
  };
}

export function batchFacts(overrides: Partial<BatchCompletedInput> = {}): BatchCompletedInput {
  return {
    batch_id: newId('batch'),
    agent_id: newId('agent'),
    agent_version: 1,
    name: 'November appointment reminders',
    status: 'completed',
    total: 3,
    completed_count: 2,
    failed_count: 1,
    voicemail_count: 0,
    created_at: new Date('2026-11-21T18:00:00.000Z'),
    completed_at: new Date('2026-11-21T19:42:31.000Z'),
    ...overrides,
  };
}

export const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });

/** Registers `url` for the workspace's `call.completed` events. */
export async function subscribeCallCompleted(t: TestService, apiKey: string, url: string): Promise<void> {
  const res = await t.http
    .post('/api/v1/webhooks')
    .set({ Authorization: `Bearer ${apiKey}` })
    .send({ url, events: ['call.completed'] });
  assert.ok(res.status === 201 || res.status === 200, JSON.stringify(res.body));
}
