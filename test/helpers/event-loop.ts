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
 * How many times a hostile request is measured before a stall is reported. The slowest of many polls
 * is an extreme: on a busy machine one garbage collection or one descheduled moment can land in it.
 * A stall of the kind issue 32 found is the hostile input's own work and shows in every measurement;
 * a hiccup of the machine does not come back three times in a row.
 */
export const STALL_ATTEMPTS = 3;

/**
 * Runs `hostile` with /healthz polled beside it, then `ordinary` as often as it takes to poll as many
 * times, and asserts the hostile request's slowest /healthz is within STALL_FACTOR of the ordinary
 * one's in at least one of STALL_ATTEMPTS measurements (`hostile` must be safe to repeat). Returns
 * what `hostile` gave in that measurement.
 */
export async function assertNoStall<T>(url: string, hostile: () => Promise<T>, ordinary: () => Promise<unknown>, what: string): Promise<T> {
  const seen: string[] = [];
  for (let attempt = 1; ; attempt++) {
    const h = await healthzDuring(url, hostile);
    const baseline = await healthzBaseline(url, ordinary, h.polls);
    if (h.slowestMs <= STALL_FACTOR * Math.max(baseline, 1)) return h.result;
    seen.push(`${h.slowestMs.toFixed(1)} ms against ${baseline.toFixed(1)} ms`);
    if (attempt < STALL_ATTEMPTS) process.stderr.write(`# ${what}: measured again after ${seen.at(-1)}\n`);
    assert.ok(
      attempt < STALL_ATTEMPTS,
      `${what}: /healthz took up to ${STALL_FACTOR}x as long beside it as beside ordinary requests in each of ${STALL_ATTEMPTS} measurements (${seen.join('; ')})`,
    );
  }
}
