/**
 * How much a request holds the service's event loop, measured the way issue 32 found the stalls: a
 * second client polls `GET /healthz` back to back while the request runs, and the slowest answer is
 * the stall. A stall is judged against a baseline taken on the same instance (ordinary requests of the
 * same kind, over at least as many polls), never against a figure in milliseconds, so a busy machine
 * slows both sides alike.
 */
import assert from 'node:assert/strict';

export interface Polled<T> {
  result: T;
  /** The slowest /healthz answer while `work` ran, in ms. */
  slowestMs: number;
  polls: number;
}

/** Runs `work` while polling `${url}/healthz` back to back; at least one poll is made. */
export async function healthzDuring<T>(url: string, work: () => Promise<T>): Promise<Polled<T>> {
  let done = false;
  let slowestMs = 0;
  let polls = 0;
  const poller = (async () => {
    do {
      const started = performance.now();
      const res = await fetch(`${url}/healthz`);
      await res.arrayBuffer();
      slowestMs = Math.max(slowestMs, performance.now() - started);
      polls++;
    } while (!done);
  })();
  try {
    return { result: await work(), slowestMs, polls };
  } finally {
    done = true;
    await poller;
  }
}

/** The slowest /healthz while `ordinary` runs again and again, over at least `polls` polls. */
export async function healthzBaseline(url: string, ordinary: () => Promise<unknown>, polls: number): Promise<number> {
  let slowest = 0;
  let made = 0;
  while (made < polls) {
    const m = await healthzDuring(url, ordinary);
    slowest = Math.max(slowest, m.slowestMs);
    made += m.polls;
  }
  return slowest;
}

/** How many times the baseline's slowest /healthz a hostile request may take: generous, a stall of issue 32 was thousands. */
export const STALL_FACTOR = 10;

/**
 * Runs `hostile` with /healthz polled beside it, then `ordinary` as often as it takes to poll as many
 * times, and asserts the hostile request's slowest /healthz is within STALL_FACTOR of the ordinary one's.
 */
export async function assertNoStall<T>(url: string, hostile: () => Promise<T>, ordinary: () => Promise<unknown>, what: string): Promise<T> {
  const h = await healthzDuring(url, hostile);
  const baseline = await healthzBaseline(url, ordinary, h.polls);
  assert.ok(
    h.slowestMs <= STALL_FACTOR * Math.max(baseline, 1),
    `${what}: /healthz took up to ${h.slowestMs.toFixed(1)} ms beside it, ${STALL_FACTOR}x the ${baseline.toFixed(1)} ms beside ordinary requests is the limit`,
  );
  return h.result;
}
