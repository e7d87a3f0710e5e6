/**
 * One schema pool serves every workspace, fairly (issue 32: one tenant's slow schemas made another
 * tenant's agent creation fail, "took longer than 10 s to compile"): each workspace has its own queue,
 * served round-robin, and one workspace never holds every thread, so a workspace waits behind its own
 * work only. Judged by order, not by time: tenant B's create finishes while tenant A's are still in
 * the pool.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { wideSchema } from '../helpers/hostile-schemas.js';

let t: TestService;
let a: Tenant;
let b: Tenant;
const SMALL = { type: 'object', properties: { name: { type: 'string' } } };

before(async () => {
  t = await startTestService({ SCHEMA_POOL_THREADS: '2' });
  [a, b] = await Promise.all([tenant(t, 'Slow Schemas'), tenant(t, 'Neighbour')]);
  // Both threads warm (started, Ajv's meta-schema compiled): one create from each workspace at once.
  for (const res of await Promise.all([create(a, 'Warm', SMALL), create(b, 'Warm', SMALL)])) assert.equal(res.status, 201);
});

after(() => t.close());

function create(tn: Tenant, name: string, schema: Record<string, unknown>) {
  return t.http.post('/api/v1/agents').set(bearer(tn.apiKey)).send({ name, analysis: { schema } });
}

describe('the schema pool between workspaces', () => {
  it("a workspace's create is checked beside another's queue of large schemas, not behind it", async () => {
    const QUEUED = 8;
    const finished: string[] = [];
    // Distinct schemas at the size budget: each is compiled (none comes from the cache), a while each.
    const slow = Array.from({ length: QUEUED }, (_, i) =>
      create(a, `Slow ${i}`, wideSchema(190, `a${i}_`)).then((res) => {
        finished.push(`a${i}`);
        return res;
      }),
    );
    await Promise.race(slow);
    const neighbour = await create(b, 'Neighbour', SMALL);
    finished.push('b');
    assert.equal(neighbour.status, 201, JSON.stringify(neighbour.body));
    const slowDone = finished.indexOf('b');
    for (const res of await Promise.all(slow)) assert.equal(res.status, 201, JSON.stringify(res.body).slice(0, 300));
    assert.ok(slowDone < QUEUED / 2, `B's create finished with ${slowDone} of A's ${QUEUED} done: beside them, not behind them (${finished.join(' ')})`);
  });
});
