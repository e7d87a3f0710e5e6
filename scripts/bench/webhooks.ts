/**
 * Webhook delivery:
 * - fan-out: one `call.completed` to 20 registered receivers (repeated, so the percentiles cover
 *   several hundred deliveries);
 * - burst: 1,000 events raised at once to one receiver;
 * - neighbour: another workspace's events (10, one every 100 ms) alone, then while the first
 *   workspace has 60 deliveries to a receiver that takes 3 s to answer (its own baseline in the run).
 * Figures: deliveries per second and latency from the moment the event is raised (EventPublisher
 * call) to the moment the receiver has read the whole request. Receivers are node:http servers on
 * 127.0.0.1 in this process (one clock for both ends); they answer 200 at once. The dispatcher runs
 * with its defaults (WEBHOOK_CONCURRENCY 20: 15 shared, 5 kept for other workspaces; signing with both schemes).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { benchDatabase, percentile, startBenchService, table } from './lib.js';
import { callFacts as facts } from '../../test/helpers/webhooks.js';

interface Receipt {
  eventId: string;
  at: number;
}

async function startReceivers(n: number, onReceipt: (r: Receipt) => void): Promise<{ urls: string[]; close(): Promise<void> }> {
  const servers: http.Server[] = [];
  for (let i = 0; i < n; i++) {
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        onReceipt({ eventId: String(req.headers['webhook-id']), at: performance.now() });
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
  }
  return {
    urls: servers.map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}/hook`),
    close: async () => {
      for (const s of servers) {
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
    },
  };
}

/** A receiver that answers after `delayMs`. */
async function slowReceiver(delayMs: number): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => setTimeout(() => res.writeHead(200).end(), delayMs));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/slow`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function waitFor(cond: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for deliveries');
    await new Promise((r) => setTimeout(r, 5));
  }
}

const ms = (n: number) => Math.round(n * 10) / 10;

export async function run(): Promise<void> {
  const db = await benchDatabase();
  const service = await startBenchService(db.url);
  const receipts: Receipt[] = [];
  const receivers = await startReceivers(21, (r) => receipts.push(r));
  try {
    const signup = (await fetch(`${service.url}/api/v1/auth/signup`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ email: 'bench-webhooks@example.com', password: 'long-enough-pw', workspace_name: 'Bench' }),
    }).then((r) => r.json())) as { workspace: { id: string } };
    const workspaceId = signup.workspace.id;
    const fanOutUrls = receivers.urls.slice(0, 20);
    const burstUrl = receivers.urls[20];
    const fanOut = await service.webhooks.register(workspaceId, { url: fanOutUrls[0] });
    for (const url of fanOutUrls.slice(1)) await service.webhooks.register(workspaceId, { url });
    await service.webhooks.secret(workspaceId);

    // Fan-out: one event to 20 receivers, 20 rounds (the first is a warm-up and not counted).
    const rounds = Number(process.env.BENCH_WEBHOOK_ROUNDS ?? 20);
    const fanLatencies: number[] = [];
    const allReceived: number[] = [];
    for (let round = 0; round <= rounds; round++) {
      receipts.length = 0;
      const t0 = performance.now();
      const { eventId } = await service.events.callCompleted({ workspaceId, callId: null, webhookUrl: null, payload: facts() });
      await waitFor(() => receipts.length >= 20, 30_000);
      if (round === 0) continue;
      for (const r of receipts) if (r.eventId === eventId) fanLatencies.push(r.at - t0);
      allReceived.push(Math.max(...receipts.map((r) => r.at)) - t0);
    }
    fanLatencies.sort((a, b) => a - b);
    allReceived.sort((a, b) => a - b);
    const fanRate = (20 * rounds) / (allReceived.reduce((a, b) => a + b, 0) / 1000);

    // Burst: 1,000 events raised at once to one receiver (the fan-out webhooks deleted first).
    await service.webhooks.remove(workspaceId, fanOut.webhook.webhook_id);
    for (const w of (await service.webhooks.list(workspaceId, { limit: 100 })).data) await service.webhooks.remove(workspaceId, w.webhook_id);
    await service.webhooks.register(workspaceId, { url: burstUrl });
    receipts.length = 0;
    const burst = Number(process.env.BENCH_WEBHOOK_BURST ?? 1000);
    const raisedAt = new Map<string, number>();
    const start = performance.now();
    await Promise.all(
      Array.from({ length: burst }, async () => {
        const t0 = performance.now();
        const { eventId } = await service.events.callCompleted({ workspaceId, callId: null, webhookUrl: null, payload: facts() });
        raisedAt.set(eventId, t0);
      }),
    );
    const recorded = performance.now();
    await waitFor(() => receipts.length >= burst, 120_000);
    const end = Math.max(...receipts.map((r) => r.at));
    const burstLatencies = receipts.map((r) => r.at - raisedAt.get(r.eventId)!).sort((a, b) => a - b);
    const duplicates = receipts.length - new Set(receipts.map((r) => r.eventId)).size;

    // Neighbour: workspace B's deliveries alone, then beside workspace A's 60 slow ones.
    const slowMs = Number(process.env.BENCH_WEBHOOK_SLOW_MS ?? 3000);
    const slow = await slowReceiver(slowMs);
    const other = (await fetch(`${service.url}/api/v1/auth/signup`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ email: 'bench-webhooks-b@example.com', password: 'long-enough-pw', workspace_name: 'Neighbour' }),
    }).then((r) => r.json())) as { workspace: { id: string } };
    await service.webhooks.register(other.workspace.id, { url: burstUrl });
    const neighbour = async (): Promise<number[]> => {
      receipts.length = 0;
      const sent = new Map<string, number>();
      for (let i = 0; i < 10; i++) {
        const t0 = performance.now();
        const { eventId } = await service.events.callCompleted({ workspaceId: other.workspace.id, callId: null, webhookUrl: null, payload: facts() });
        sent.set(eventId, t0);
        await new Promise((r) => setTimeout(r, 100));
      }
      await waitFor(() => [...sent.keys()].every((id) => receipts.some((r) => r.eventId === id)), 120_000);
      return receipts
        .filter((r) => sent.has(r.eventId))
        .map((r) => r.at - sent.get(r.eventId)!)
        .sort((a, b) => a - b);
    };
    const alone = await neighbour();
    for (const w of (await service.webhooks.list(workspaceId, { limit: 100 })).data) await service.webhooks.remove(workspaceId, w.webhook_id);
    await service.webhooks.register(workspaceId, { url: slow.url });
    for (let i = 0; i < 60; i++) await service.events.callCompleted({ workspaceId, callId: null, webhookUrl: null, payload: facts() });
    const beside = await neighbour();
    await slow.close();

    table([
      {
        scenario: `fan-out: 1 event -> 20 receivers (x${rounds})`,
        'deliveries/s': Math.round(fanRate),
        'p50 ms': ms(percentile(fanLatencies, 50)),
        'p99 ms': ms(percentile(fanLatencies, 99)),
        'all 20 received, p50 ms': ms(percentile(allReceived, 50)),
      },
      {
        scenario: `burst: ${burst} events -> 1 receiver`,
        'deliveries/s': Math.round(burst / ((end - start) / 1000)),
        'p50 ms': ms(percentile(burstLatencies, 50)),
        'p99 ms': ms(percentile(burstLatencies, 99)),
        'all 20 received, p50 ms': '-',
      },
      {
        scenario: 'neighbour: 10 events of workspace B, alone',
        'deliveries/s': '-',
        'p50 ms': ms(percentile(alone, 50)),
        'p99 ms': ms(percentile(alone, 99)),
        'all 20 received, p50 ms': '-',
      },
      {
        scenario: `neighbour: the same beside 60 of A to a ${slowMs / 1000} s receiver`,
        'deliveries/s': '-',
        'p50 ms': ms(percentile(beside, 50)),
        'p99 ms': ms(percentile(beside, 99)),
        'all 20 received, p50 ms': '-',
      },
    ]);
    console.log(
      `burst: ${burst} events recorded in ${Math.round(recorded - start)} ms (${Math.round(burst / ((recorded - start) / 1000))} events/s), all delivered ${Math.round(end - start)} ms after the first was raised; duplicates: ${duplicates}`,
    );
  } finally {
    await receivers.close();
    await service.close();
    await db.drop();
  }
}
