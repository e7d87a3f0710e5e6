/** Agent-version test steps shared by the files that pin versions across instances. */
import assert from 'node:assert/strict';
import type { TestService } from './service.js';
import type { Tenant } from './fixtures.js';

/**
 * Publishes the agent's draft (version 2 over a published 1) on `a` while `b` keeps version 1 and does
 * not hear of it: `b`'s NOTIFY for the agent is held back, as if not yet arrived, until the returned
 * function is called.
 */
export async function publishUnheard(a: TestService, b: TestService, tenant: Tenant, agentId: string): Promise<() => void> {
  const cache = b.service.caches.of<never>('agents');
  const invalidate = cache.invalidate;
  cache.invalidate = (key: string) => (key === agentId ? undefined : invalidate.call(cache, key));
  const release = () => {
    cache.invalidate = invalidate;
  };
  try {
    assert.equal((await b.service.agents.findForRuntime(tenant.workspaceId, agentId))?.version, 1);
    const published = await a.http
      .post(`/api/v1/agents/${agentId}/publish`)
      .set({ Authorization: `Bearer ${tenant.apiKey}` })
      .send({});
    assert.equal(published.status, 200, published.text);
    assert.equal(published.body.published_version, 2);
    assert.equal((await b.service.agents.findForRuntime(tenant.workspaceId, agentId))?.version, 1, "B's kept agent is still version 1");
    return release;
  } catch (err) {
    release();
    throw err;
  }
}
