/**
 * Holds the contract and the code in step: every operation either has a handler or answers 501 (and
 * declares it); prints the operations still unimplemented, a list that shrinks to zero as issues land.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { operations } from '../../generated/operations.js';
import { Contract } from '../../src/http/contract.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { operationRequest } from '../helpers/operations.js';

let t: TestService;
let tn: Tenant;
before(async () => {
  t = await startTestService();
  tn = await tenant(t);
});
after(() => t.close());

const contract = Contract.load();

describe('operations', () => {
  it('lists the operations still unimplemented', () => {
    const implemented = new Set(t.service.implemented);
    const missing = operations.filter((o) => !implemented.has(o.operationId));
    console.log(`\nUnimplemented operations (${missing.length} of ${operations.length}):`);
    for (const o of missing) console.log(`  ${o.operationId.padEnd(30)} ${o.method.padEnd(6)} ${o.path}`);
    const unknown = t.service.implemented.filter((id) => !operations.some((o) => o.operationId === id));
    assert.deepEqual(unknown, [], 'every handler belongs to an operation of the contract');
  });

  it('declares 501 exactly on the operations without a handler', () => {
    const implemented = new Set(t.service.implemented);
    for (const o of operations) {
      const declares501 = contract.operations.get(o.operationId)!.statuses.includes('501');
      assert.equal(
        declares501,
        !implemented.has(o.operationId),
        `${o.operationId}: declares 501 = ${declares501}, implemented = ${implemented.has(o.operationId)}`,
      );
    }
  });

  it('answers 501 in the envelope on every unimplemented operation', async () => {
    const implemented = new Set(t.service.implemented);
    for (const o of operations.filter((x) => !implemented.has(x.operationId))) {
      const res = await operationRequest(t, tn, contract, o);
      assert.equal(res.status, 501, `${o.operationId}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'not_implemented');
    }
  });
});
