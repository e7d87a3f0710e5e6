/**
 * Batch test steps: creating batches through the API and waiting for a batch or its recipients to
 * reach a state (every answer is checked against the contract by the service's response check).
 */
import assert from 'node:assert/strict';
import type { TestService } from './service.js';
import type { Tenant } from './fixtures.js';
import { bearer, waitWhileMoving } from './realtime.js';

export const TERMINAL_BATCH = new Set(['completed', 'canceled', 'failed']);

/**
 * Distinct sandbox numbers ending in `suffix` (its outcome), `count` of them, from `start`: in the
 * fictional area code 555, so any exchange is a number the destination policy takes.
 */
export function sandboxNumbers(suffix: string, count: number, start = 100): string[] {
  return Array.from({ length: count }, (_, i) => `+1555${String(start + i).padStart(3, '0')}${suffix}`);
}

export function createBatch(t: TestService, tenant: Tenant, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return t.http.post('/api/v1/batches').set(bearer(tenant.apiKey)).set(headers).send(body);
}

export async function getBatch(t: TestService, tenant: Tenant, batchId: string): Promise<Record<string, any>> {
  const res = await t.http.get(`/api/v1/batches/${batchId}`).set(bearer(tenant.apiKey));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

/** Waits until the batch satisfies `pred` (default: terminal and reported, `completed_at` set), for as long as its recipients keep moving. */
export function waitForBatch(
  t: TestService,
  tenant: Tenant,
  batchId: string,
  pred: (b: Record<string, any>) => boolean = (b) => TERMINAL_BATCH.has(b.status) && b.completed_at !== null,
  idleMs = 60_000,
) {
  return waitWhileMoving(
    async () => {
      const b = await getBatch(t, tenant, batchId);
      const progress = JSON.stringify([b.status, b.recipients?.map((r: { status: string; attempts: number }) => [r.status, r.attempts])]);
      return { done: pred(b) ? b : null, progress };
    },
    idleMs,
    `batch ${batchId}`,
  );
}

/** The calls a batch placed (every page). */
export async function batchCalls(t: TestService, tenant: Tenant, batchId: string): Promise<Array<Record<string, any>>> {
  const out: Array<Record<string, any>> = [];
  let after: string | null = null;
  do {
    const res: { status: number; body: Record<string, any> } = await t.http
      .get('/api/v1/calls')
      .query({ batch_id: batchId, limit: 100, ...(after ? { starting_after: after } : {}) })
      .set(bearer(tenant.apiKey));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    out.push(...res.body.data);
    after = res.body.has_more ? res.body.next_cursor : null;
  } while (after);
  return out;
}
