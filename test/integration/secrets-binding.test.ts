/**
 * A sealed secret copied into another row (as someone with write access to the database could do)
 * does not open there: the other row's owner gets an error, never the secret, and nothing is sent
 * with it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant } from '../helpers/fixtures.js';
import { bearer, startReceiver, type Receiver } from '../helpers/webhooks.js';

let t: TestService;
let receiver: Receiver;
before(async () => {
  t = await startTestService();
  receiver = await startReceiver((_req, res) => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}'));
});
after(async () => {
  await receiver.close();
  await t.close();
});

describe('secrets bound to their row', () => {
  it("a webhook secret copied into another workspace's row is not revealed there", async () => {
    const a = await tenant(t);
    const b = await tenant(t);
    const secretA = (await t.http.get('/api/v1/webhooks/secret').set(bearer(a.apiKey))).body.webhook_secret as string;
    await t.http.get('/api/v1/webhooks/secret').set(bearer(b.apiKey));
    const rowA = await t.service.db.knex('webhook_secrets').where({ workspace_id: a.workspaceId }).first();
    await t.service.db.knex('webhook_secrets').where({ workspace_id: b.workspaceId }).update({ secret_sealed: rowA.secret_sealed });
    const res = await t.http.get('/api/v1/webhooks/secret').set(bearer(b.apiKey));
    assert.equal(res.status, 500);
    assert.equal(res.body.error.code, 'internal_error');
    assert.ok(!res.text.includes(secretA));
    assert.ok(!t.logs.join('').includes(secretA), 'nor logged');
  });

  it('a tool header copied into another tool is not sent by it', async () => {
    const a = await tenant(t);
    const b = await tenant(t);
    const create = (key: string, secret: string) =>
      t.http
        .post('/api/v1/tools')
        .set(bearer(key))
        .send({ name: 'lookup', description: 'Looks things up.', url: `${receiver.url}/tool`, headers: { Authorization: secret } });
    const toolA = (await create(a.apiKey, 'Bearer secret-of-a-0123456789')).body;
    const toolB = (await create(b.apiKey, 'Bearer secret-of-b-0123456789')).body;
    const rowA = await t.service.db.knex('tools').where({ id: toolA.tool_id }).first();
    await t.service.db
      .knex('tools')
      .where({ id: toolB.tool_id })
      .update({ headers: JSON.stringify({ Authorization: rowA.headers.Authorization }) });
    const before = receiver.requests.length;
    const res = await t.http.post(`/api/v1/tools/${toolB.tool_id}/test`).set(bearer(b.apiKey)).send({ arguments: {} });
    assert.equal(res.status, 500, res.text);
    assert.ok(!res.text.includes('secret-of-a'));
    assert.equal(receiver.requests.length, before, 'nothing was sent');
  });

  it('a provider credential copied into another agent does not open for it', async () => {
    const a = await tenant(t);
    const config = {
      provider_a_config: { account_sid: 'AC0123456789abcdef0123456789abcdef', auth_token: 'token-of-a-0123456789', phone_number: '+14155550100' },
    };
    const agentA = (
      await t.http
        .post('/api/v1/agents')
        .set(bearer(a.apiKey))
        .send({ name: 'A', ...config })
    ).body;
    const agentB = (
      await t.http
        .post('/api/v1/agents')
        .set(bearer(a.apiKey))
        .send({ name: 'B', ...config })
    ).body;
    const rowA = await t.service.db.knex('agents').where({ id: agentA.agent_id }).first();
    const rowB = await t.service.db.knex('agents').where({ id: agentB.agent_id }).first();
    await t.service.db
      .knex('agents')
      .where({ id: agentB.agent_id })
      .update({
        carrier_accounts: JSON.stringify({
          ...rowB.carrier_accounts,
          provider_a: {
            ...rowB.carrier_accounts.provider_a,
            config: { ...rowB.carrier_accounts.provider_a.config, auth_token: rowA.carrier_accounts.provider_a.config.auth_token },
          },
        }),
      });
    assert.equal(
      (await t.service.agents.loadForRuntime(a.workspaceId, agentA.agent_id)).carrierAccounts.provider_a?.config.auth_token,
      'token-of-a-0123456789',
    );
    await assert.rejects(t.service.agents.loadForRuntime(a.workspaceId, agentB.agent_id));
  });
});
