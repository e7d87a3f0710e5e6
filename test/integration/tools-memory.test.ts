/**
 * Failed tool tests leave nothing behind (issue 32: a test failing against a branching schema kept its
 * error objects, and the seventh killed an instance with a 512 MB heap). Fifty tests failing against
 * the most branching `parameters` the budget allows each get their 422, and afterwards the service's
 * heap (collected) and the schema pool's threads' heaps have not grown by more than a few of the
 * hundreds of MB one such test used to keep. Memory, not time: nothing here is timed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { startHttpPeer, type HttpPeer } from '../helpers/http-peer.js';
import { branchingSchema } from '../helpers/hostile-schemas.js';
import { schemaPoolHeapUsed } from '../../src/contract/schema-pool.js';

// The test runner starts files without --expose-gc: the flag is set now and `gc` read from a fresh context.
v8.setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const MB = 1024 * 1024;

let t: TestService;
let tn: Tenant;
let peer: HttpPeer;

before(async () => {
  t = await startTestService();
  tn = await tenant(t);
  peer = await startHttpPeer(async (_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{"ok":true}');
  });
});

after(async () => {
  await peer.close();
  await t.close();
});

/** The service's heap after two full collections, and the pool threads' heaps, in bytes. */
async function heaps(): Promise<{ service: number; pool: number }> {
  gc();
  gc();
  return { service: v8.getHeapStatistics().used_heap_size, pool: await schemaPoolHeapUsed() };
}

describe('failed tool tests do not grow the heap (issue 32)', () => {
  it('50 tests failing against the most branching schema the budget allows: each a 422, and the heaps stay where they were', async () => {
    // The deepest branching the budget takes (2^levels paths through the $refs for a failing value).
    let toolId: string | undefined;
    let levels = 14;
    for (; !toolId && levels > 0;) {
      const res = await t.http
        .post('/api/v1/tools')
        .set(bearer(tn.apiKey))
        .send({ name: `branching_${levels}`, description: 'Branches.', url: `${peer.url}/lookup`, parameters: branchingSchema(levels) });
      if (res.status === 201) toolId = res.body.tool_id as string;
      else {
        assert.equal(res.body.error.code, 'parameters_schema_too_complex', JSON.stringify(res.body));
        levels--;
      }
    }
    assert.ok(toolId && levels >= 6, `the budget takes a branching schema of ${levels} levels`);
    const failingTest = async () => {
      const res = await t.http
        .post(`/api/v1/tools/${toolId}/test`)
        .set(bearer(tn.apiKey))
        .send({ arguments: { v: 'no' } });
      assert.equal(res.status, 422, JSON.stringify(res.body).slice(0, 300));
      assert.equal(res.body.error.code, 'invalid_arguments');
      assert.equal(res.body.error.param, 'arguments.v');
    };
    // Warm: the threads have started and compiled the schema once (cached by its hash).
    for (let i = 0; i < 5; i++) await failingTest();
    const before = await heaps();
    for (let i = 0; i < 50; i++) await failingTest();
    const afterTests = await heaps();
    assert.equal(peer.requests.length, 0, 'no failing test reached the tool');
    const grown = { service: (afterTests.service - before.service) / MB, pool: (afterTests.pool - before.pool) / MB };
    // One test used to keep tens of MB (seven filled 512 MB). The pool's threads are not collected on
    // demand, so their figure includes garbage not yet collected: a wider bound than the service's.
    assert.ok(grown.service < 16, `the service's heap grew ${grown.service.toFixed(1)} MB over 50 failed tests`);
    assert.ok(grown.pool < 64, `the schema pool's heaps grew ${grown.pool.toFixed(1)} MB over 50 failed tests`);
  });
});
