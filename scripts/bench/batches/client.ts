/**
 * The API client of the batches benchmark's baselines (scripts/bench/batches.ts), in a process of its
 * own so that its requests do not share the service's event loop. It places calls one by one with
 * `POST /api/v1/calls`, in one of two ways:
 * - `requests`: `concurrency` requests in flight, each started when the previous one was answered (a
 *   client placing calls as fast as the API takes them; the calls' own lengths do not hold it back);
 * - `paced`: at most `concurrency` calls live, as a batch keeps them: each call carries this process's
 *   receiver as its `webhook_url`, and the next call is placed when its `call.completed` arrives.
 * A 429 (no free workspace slot) is retried after BENCH_CLIENT_RETRY_MS (default 20); a 503 (the
 * instance at capacity: the request did nothing) after its Retry-After, as a client should. Its
 * requests come from an address of their own (127.0.0.2), as a client's machine is not the carrier's:
 * the service's per-address connection cap counts them apart from the in-process sandbox carrier's
 * callbacks, which come from 127.0.0.1.
 * IPC: sends {ready, webhookUrl}; takes {cmd: 'run', mode, base, key, agentId, numbers, concurrency}
 * and answers {done: {placed, retried429, retried503, errors, lost, ms}} (lost: no call.completed within
 * BENCH_CLIENT_LOST_MS, default 30 s); {cmd: 'exit'} exits.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

interface RunMsg {
  cmd: 'run';
  mode: 'requests' | 'paced';
  base: string;
  key: string;
  agentId: string;
  numbers: string[];
  concurrency: number;
}

const RETRY_MS = Number(process.env.BENCH_CLIENT_RETRY_MS ?? 20);
const agent = new http.Agent({ keepAlive: true, localAddress: '127.0.0.2' });

/**
 * POST with a JSON body from the client's own address; the status, the Retry-After and the body. A
 * kept-alive connection the server closed as idle just as it was reused fails before the request was
 * read (Node marks it `reusedSocket`): sent again on a new connection, as Node's documentation advises.
 */
async function post(url: string, key: string, body: string): Promise<{ status: number; retryAfter: string | undefined; text: string }> {
  for (;;) {
    try {
      return await postOnce(url, key, body);
    } catch (err) {
      if (!(err instanceof StaleConnection)) throw err;
    }
  }
}

class StaleConnection extends Error {}

function postOnce(url: string, key: string, body: string): Promise<{ status: number; retryAfter: string | undefined; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: 'POST', agent, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), Authorization: `Bearer ${key}` } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'], text: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) =>
      reject(req.reusedSocket && (err.code === 'ECONNRESET' || err.message === 'socket hang up') ? new StaleConnection(err.message) : err),
    );
    req.end(body);
  });
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// call.completed receipts: the waiter of a call, or the ids that arrived before their POST was answered.
const waiting = new Map<string, () => void>();
const ended = new Set<string>();
/** The call's id in the event is its `conversation_id`. */
const CALL_ID = /"conversation_id"\s*:\s*"([^"]+)"/;
const LOST_MS = Number(process.env.BENCH_CLIENT_LOST_MS ?? 30_000);

const receiver = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    res.writeHead(200).end();
    const body = Buffer.concat(chunks).toString();
    if (!body.includes('call.completed')) return;
    const id = CALL_ID.exec(body)?.[1];
    if (!id) return;
    const w = waiting.get(id);
    if (w) {
      waiting.delete(id);
      w();
    } else ended.add(id);
  });
});
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
const webhookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

/** Resolves true when the call's call.completed has arrived, false after LOST_MS without it. */
function callEnded(id: string): Promise<boolean> {
  if (ended.delete(id)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      waiting.delete(id);
      resolve(false);
    }, LOST_MS);
    waiting.set(id, () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

async function run(m: RunMsg) {
  let next = 0;
  let placed = 0;
  let retried429 = 0;
  let retried503 = 0;
  let errors = 0;
  let lost = 0;
  const t0 = performance.now();
  const place = async (to: string): Promise<string | null> => {
    for (;;) {
      const res = await post(
        `${m.base}/api/v1/calls`,
        m.key,
        JSON.stringify({ agent_id: m.agentId, to_number: to, ...(m.mode === 'paced' ? { webhook_url: webhookUrl } : {}) }),
      );
      const text = res.text;
      if (res.status === 429) {
        retried429++;
        await sleep(RETRY_MS);
        continue;
      }
      if (res.status === 503) {
        retried503++;
        await sleep(Number(res.retryAfter ?? 1) * 1000);
        continue;
      }
      if (res.status !== 201) {
        errors++;
        if (errors <= 3) process.stderr.write(`batches client: POST /api/v1/calls ${res.status} ${text.slice(0, 200)}\n`);
        return null;
      }
      placed++;
      return (JSON.parse(text) as { call_id: string }).call_id;
    }
  };
  await Promise.all(
    Array.from({ length: m.concurrency }, async () => {
      while (next < m.numbers.length) {
        const id = await place(m.numbers[next++]);
        if (id && m.mode === 'paced' && !(await callEnded(id))) lost++;
      }
    }),
  );
  return { placed, retried429, retried503, errors, lost, ms: performance.now() - t0 };
}

process.on('message', (m: RunMsg | { cmd: 'exit' }) => {
  if (m.cmd === 'run') {
    run(m).then(
      (done) => process.send!({ done }),
      (err: unknown) => process.send!({ done: { placed: 0, retried429: 0, retried503: 0, errors: -1, lost: 0, ms: 0, error: String(err) } }),
    );
  } else if (m.cmd === 'exit') {
    receiver.closeAllConnections();
    receiver.close(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
process.send!({ ready: true, webhookUrl });
