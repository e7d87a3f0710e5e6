/**
 * The list-shaped 422 echoes the offending input, bounded: a 100,000-deep array, a huge array or a
 * long string give a 422 in the envelope with a cut copy (they used to overflow serialisation into a
 * plain-text 500 with no log line), and objects that carry credentials are never echoed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { signup, tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/webhooks.js';

let t: TestService;
before(async () => {
  t = await startTestService();
});
after(async () => {
  await t.close();
});

describe('bounded error echoes', () => {
  it('a 100,000-deep array on POST /api/v1/keys is a 422 in the envelope, and no key is created', async () => {
    const s = await signup(t);
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    const res = await t.http.post('/api/v1/keys').set(bearer(s.sessionToken)).set('Content-Type', 'application/json').send(`{"name":${deep}}`);
    assert.equal(res.status, 422, res.text.slice(0, 300));
    assert.ok(res.headers['x-request-id']);
    assert.equal(res.body.detail[0].loc.join('.'), 'body.name');
    assert.ok(JSON.stringify(res.body).length < 5000, 'the echo is bounded');
    assert.deepEqual(await t.service.db.knex('api_keys').where({ workspace_id: s.workspaceId }), []);
  });

  it('a deep body on a large-body route (batches) is a 422 too', async () => {
    const tn = await tenant(t);
    const res = await t.http
      .post('/api/v1/batches')
      .set(bearer(tn.apiKey))
      .set('Content-Type', 'application/json')
      .send('['.repeat(20_000) + ']'.repeat(20_000));
    assert.equal(res.status, 422, res.text.slice(0, 300));
    assert.ok(res.headers['x-request-id']);
  });

  it('long strings and large arrays are cut in the echo', async () => {
    const tn = await tenant(t);
    const res = await t.http
      .post('/api/v1/batches')
      .set(bearer(tn.apiKey))
      .send({ agent_id: 'x'.repeat(100_000), recipients: Array.from({ length: 50_000 }, () => 5) });
    assert.equal(res.status, 422);
    assert.ok(JSON.stringify(res.body).length < 20_000, `echo of ${JSON.stringify(res.body).length} bytes`);
  });
});
