/**
 * Live events: `npm run bench -- events`.
 *
 * N concurrent sandbox phone calls (BENCH_EVENTS_CALLS, default 100) on one service with its sandbox
 * carriers and voice service in-process; each call's event stream is followed by an SSE client, and a
 * webhook listing `call.transcript` receives every utterance. Figures: the time from an utterance's
 * end in the bridge (its final transcript event queued by the conversation, `onLiveEvent`) to the SSE
 * client reading it, and to the webhook receiver having read the `call.transcript` request, p50/p99
 * (goal: SSE p99 under 100 ms at 100 calls). One process and one clock for all ends.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { benchDatabase, percentile, table } from './lib.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startService } from '../../src/service.js';
import { openSse } from '../../test/helpers/sse.js';
import { providerConfig, sandboxNumber } from '../../test/helpers/calls.js';

const ADMIN = 'bench-operator-token-0123456789';
const ms = (n: number) => Math.round(n * 10) / 10;
const keyOf = (conversationId: string, role: unknown, text: unknown) => `${conversationId}|${String(role)}|${String(text)}`;

async function api(base: string, method: string, path: string, token: string, body?: unknown): Promise<any> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await res.json().catch(() => null);
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

export async function run(): Promise<void> {
  const calls = Number(process.env.BENCH_EVENTS_CALLS ?? 100);
  const ended = new Map<string, number>();
  const toSse = new Map<string, number>();
  const toHook = new Map<string, number>();
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const e = JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>;
      if (e.event === 'call.transcript') toHook.set(keyOf(String(e.call_id), e.role, e.text), at);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const db = await benchDatabase();
  try {
    const config = loadConfig({
      DATABASE_URL: db.url,
      DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'vas-bench-')),
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      CONTRACT_CHECK: 'off',
      ADMIN_TOKEN: ADMIN,
      SANDBOX_CARRIERS_SPEED: '2',
      CALL_AUDIO_RATE: '2',
      SANDBOX_CARRIERS_RING_MS: '40',
      VOICE_SANDBOX_SPEED: '2',
      VOICE_SANDBOX_MS_PER_CHAR: '30',
      JOBS_POLL_INTERVAL_MS: '200',
      DATABASE_POOL_MAX: '30',
    });
    // The service as startBenchService runs it, told of each live event its conversations queue.
    const live = await startService(config, createLogger('silent'), {
      onLiveEvent: (conversationId, type, data) => {
        if (type === 'transcript' && data.final === true) {
          const key = keyOf(conversationId, data.role, data.text);
          if (!ended.has(key)) ended.set(key, performance.now());
        }
      },
    });
    try {
      const base = live.url;
      const signup = (await fetch(`${base}/api/v1/auth/signup`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ email: `bench-events-${Date.now()}@example.com`, password: 'long-enough-pw', workspace_name: 'Bench events' }),
      }).then((r) => r.json())) as { session_token: string; workspace: { id: string } };
      const key = (await api(base, 'POST', '/api/v1/keys', signup.session_token, { name: 'bench' })).key as string;
      await api(base, 'PATCH', `/admin/v1/workspaces/${signup.workspace.id}`, ADMIN, {
        concurrent_session_limit: calls + 10,
        credit_balance_cents: 100_000_000,
      });
      await api(base, 'POST', '/api/v1/webhooks', key, {
        url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
        events: ['call.transcript'],
      });
      const agent = await api(base, 'POST', '/api/v1/agents', key, {
        name: 'Receptionist',
        instruction: 'You are the receptionist of Acme Dental.',
        first_message: 'Hello! This is Acme Dental.',
        can_end_conversation: true,
        ...providerConfig('provider_a'),
      });
      const started = performance.now();
      // An overloaded instance refuses new calls (503); those are counted, not measured.
      const attempts = await Promise.allSettled(
        Array.from({ length: calls }, () => api(base, 'POST', '/api/v1/calls', key, { agent_id: agent.agent_id, to_number: sandboxNumber() })),
      );
      const placed = attempts.flatMap((a) => (a.status === 'fulfilled' ? [a.value] : []));
      const refused = attempts.length - placed.length;
      const streams = await Promise.all(
        placed.map((c) =>
          openSse(`${base}/api/v1/calls/${c.call_id}/events`, { Authorization: `Bearer ${key}` }, (m) => {
            if (m.event === 'transcript' && m.data.final) toSse.set(keyOf(String(m.data.conversation_id), m.data.role, m.data.text), performance.now());
          }),
        ),
      );
      await Promise.all(streams.map((s) => s.ended));
      // The webhook deliveries of the last utterances may still be on their way.
      const deadline = Date.now() + 15_000;
      while (toHook.size < ended.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      const sse = [...toSse].flatMap(([k, at]) => (ended.has(k) ? [at - ended.get(k)!] : [])).sort((a, b) => a - b);
      const hook = [...toHook].flatMap(([k, at]) => (ended.has(k) ? [at - ended.get(k)!] : [])).sort((a, b) => a - b);
      table([
        { path: 'utterance end -> SSE client', utterances: sse.length, 'p50 ms': ms(percentile(sse, 50)), 'p99 ms': ms(percentile(sse, 99)) },
        { path: 'utterance end -> webhook receiver', utterances: hook.length, 'p50 ms': ms(percentile(hook, 50)), 'p99 ms': ms(percentile(hook, 99)) },
      ]);
      console.log(`${placed.length} concurrent calls (${refused} refused), ${ended.size} utterances, ${((performance.now() - started) / 1000).toFixed(1)} s.`);
    } finally {
      await live.close();
    }
  } finally {
    receiver.closeAllConnections();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
    await db.drop();
  }
}
