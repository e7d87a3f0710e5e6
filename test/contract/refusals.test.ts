/**
 * Every operation answers the requests the framework refuses the way its contract declares: no
 * credentials 401; and for those that take a body, malformed JSON 422, an oversized body 413, a media
 * type it does not take 415, an unknown field 422 naming it, all in the error envelope. The
 * service enforces the contract on every response, so an undeclared status would come back as a 500
 * `contract_violation`; this walks every such operation of the contract rather than a chosen few.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LARGE_BODIES } from '../../src/http/body-parsing.js';
import { operations } from '../../generated/operations.js';
import { Contract } from '../../src/http/contract.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { operationRequest } from '../helpers/operations.js';

const LIMIT = 4096;
let t: TestService;
let tn: Tenant;
before(async () => {
  t = await startTestService({ BODY_LIMIT_BYTES: String(LIMIT) });
  tn = await tenant(t);
});
after(() => t.close());

const contract = Contract.load();
const withJsonBody = operations.filter((o) => contract.operations.get(o.operationId)!.requestContentTypes.includes('application/json'));

const request = (o: (typeof operations)[number]) => operationRequest(t, tn, contract, o);

function assertEnvelope(
  o: { operationId: string },
  res: { status: number; body: { error?: { code?: string; request_id?: string } } },
  status: number,
  code: string,
) {
  assert.notEqual(res.body.error?.code, 'contract_violation', `${o.operationId}: ${JSON.stringify(res.body)}`);
  assert.equal(res.status, status, `${o.operationId}: ${JSON.stringify(res.body)}`);
  assert.equal(res.body.error?.code, code, o.operationId);
  assert.ok(res.body.error?.request_id, o.operationId);
}

describe(`unreadable bodies on the ${withJsonBody.length} operations that take JSON`, () => {
  it('malformed JSON: 422 invalid_json (the list-shaped body where the operation uses it)', async () => {
    for (const o of withJsonBody) {
      const res = await request(o).set('Content-Type', 'application/json').send('{"name": ');
      assertEnvelope(o, res, 422, 'invalid_json');
    }
  });

  it('a body sent to an operation that takes none is ignored, readable or not', async () => {
    const res = await request(operations.find((o) => o.operationId === 'rotateWebhookSecret')!)
      .set('Content-Type', 'application/json')
      .send('{"name": ');
    assert.notEqual(res.status, 422);
    assert.notEqual(res.status, 500);
  });

  it('a body over the limit: 413 payload_too_large', async () => {
    for (const o of withJsonBody.filter((x) => x.operationId !== 'uploadDocument')) {
      // Routes with a larger limit of their own (batch creation) get a body over theirs.
      const route = LARGE_BODIES[o.operationId];
      const res = await request(o).send({ name: 'x'.repeat((route?.maxBytes ?? LIMIT) + LIMIT) });
      assertEnvelope(o, res, 413, 'payload_too_large');
    }
  });

  it('a media type the operation does not take: 415 unsupported_media_type', async () => {
    for (const o of withJsonBody.filter((x) => !contract.operations.get(x.operationId)!.requestContentTypes.includes('text/plain'))) {
      const res = await request(o).set('Content-Type', 'text/plain').send('name=x');
      assert.notEqual(res.body.error?.code, 'contract_violation', `${o.operationId}: ${JSON.stringify(res.body)}`);
      // An operation not implemented yet answers 501 before it looks at the body.
      if (res.status === 501) continue;
      assertEnvelope(o, res, 415, 'unsupported_media_type');
    }
  });
});

describe('requests refused before any handler runs', () => {
  it('no credentials: 401 unauthorized on every secured operation', async () => {
    const secured = operations.filter((o) => contract.operations.get(o.operationId)!.security.length > 0);
    assert.ok(secured.length > 50);
    for (const o of secured) {
      const path = o.path.replace(/\{(\w+)\}/g, (_m, name: string) =>
        name === 'provider' ? 'provider_a' : `${name.split('_')[0]}_01JD5Z7Q8Y1C2B3A4N5M6K7P8R`,
      );
      const res = await t.http[o.method.toLowerCase() as 'get'](path);
      assertEnvelope(o, res, 401, 'unauthorized');
    }
  });

  it('an unknown field: 422 naming it (list-shaped where the contract says so)', async () => {
    // Carrier callbacks take the carriers' open payloads (carriers add fields); every body of ours is closed.
    const ours = (x: { operationId: string }) => !contract.operations.get(x.operationId)!.tags.includes('Carrier Callbacks');
    for (const o of withJsonBody.filter((x) => !contract.operations.get(x.operationId)!.validateInHandler && ours(x))) {
      const res = await request(o).send({ surely_not_a_field: 1 });
      assert.notEqual(res.body.error?.code, 'contract_violation', `${o.operationId}: ${JSON.stringify(res.body)}`);
      if (res.status === 501) continue;
      assert.equal(res.status, 422, `${o.operationId}: ${JSON.stringify(res.body)}`);
      const issues = res.body.detail ?? [];
      const named = res.body.error.param === 'surely_not_a_field' || issues.some((d: { loc: string[] }) => d.loc.includes('surely_not_a_field'));
      assert.ok(named, `${o.operationId}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'unknown_field', o.operationId);
      if (contract.usesListShaped422(o.operationId)) assert.ok(Array.isArray(res.body.detail), o.operationId);
    }
  });
});
