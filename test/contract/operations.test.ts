/**
 * Holds the contract and the code in step: every operation either has a handler or answers 501 (and
 * declares it); prints the operations still unimplemented, a list that shrinks to zero as issues land.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { operations } from '../../generated/operations.js';
import { Contract } from '../../src/http/contract.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';

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
      const info = contract.operations.get(o.operationId)!;
      const path = o.path.replace(/\{(\w+)\}/g, (_m, name: string) =>
        name === 'provider' ? 'provider_a' : `${name.split('_')[0]}_01JD5Z7Q8Y1C2B3A4N5M6K7P8R`,
      );
      const schemes = info.security.flatMap((s) => Object.keys(s));
      const token = schemes.includes('ApiKey')
        ? tn.apiKey
        : schemes.includes('DashboardSession')
          ? tn.sessionToken
          : schemes.includes('OperatorToken')
            ? ADMIN_TOKEN
            : null;
      let req = t.http[o.method.toLowerCase() as 'get'](path);
      if (token) req = req.set('Authorization', `Bearer ${token}`);
      const res = await req;
      assert.equal(res.status, 501, `${o.operationId}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'not_implemented');
    }
  });
});
