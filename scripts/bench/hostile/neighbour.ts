/**
 * The neighbour tenant of the hostile benchmark (scripts/bench/hostile.ts), in a process of its own so
 * a blocked service loop cannot delay its clock: one request at a time, a new one every
 * NEIGHBOUR_PACE_MS (or at once when the last took longer), alternating `POST /api/v1/calls` (to a busy
 * number, so the call ends by itself) and `GET /api/v1/calls/{call_id}` of the call just placed.
 * Reports over IPC: {ready: true}; {cmd: 'take'} answers {taken: [{ms, status}]}, every request
 * finished since the last take, after waiting for the one in flight; {cmd: 'exit'} stops.
 */
const base = process.env.NEIGHBOUR_URL!;
const key = process.env.NEIGHBOUR_KEY!;
const agentId = process.env.NEIGHBOUR_AGENT!;
const pace = Number(process.env.NEIGHBOUR_PACE_MS ?? 100);

interface Sample {
  ms: number;
  status: number;
}

let samples: Sample[] = [];
let inFlight: Promise<unknown> = Promise.resolve();
let stopped = false;
let serial = 0;

async function timed(method: string, path: string, body?: unknown): Promise<Record<string, any>> {
  const t0 = performance.now();
  let status: number;
  let json: Record<string, any> = {};
  try {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    status = res.status;
    json = (await res.json().catch(() => ({}))) as Record<string, any>;
  } catch {
    status = -1;
  }
  samples.push({ ms: performance.now() - t0, status });
  return json;
}

async function loop(): Promise<void> {
  let callId: string | undefined;
  while (!stopped) {
    const started = performance.now();
    const step = serial++ % 2 === 0 || !callId ? 'create' : 'get';
    const p =
      step === 'create'
        ? timed('POST', '/api/v1/calls', { agent_id: agentId, to_number: `+1415${200 + (serial % 800)}0002` }).then((r) => {
            callId = typeof r.call_id === 'string' ? r.call_id : callId;
          })
        : timed('GET', `/api/v1/calls/${callId}`);
    inFlight = p;
    await p;
    const wait = pace - (performance.now() - started);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
}

process.on('message', (m: { cmd: string }) => {
  if (m.cmd === 'take') {
    void inFlight.then(() => {
      const taken = samples;
      samples = [];
      process.send!({ taken });
    });
  } else if (m.cmd === 'exit') {
    stopped = true;
    void inFlight.finally(() => process.exit(0));
  }
});

process.send!({ ready: true });
void loop();
