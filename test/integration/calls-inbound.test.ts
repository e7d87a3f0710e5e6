/**
 * Inbound calls through both carriers: enabling inbound points the number at the service at its
 * (sandbox) carrier; a call to the number is answered by the agent over the same bridge as outbound
 * calls; refusals of enable/disable are clear and change nothing; a workspace that may not take a call
 * has it rejected as busy.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, setWorkspace, createAgent } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, providerConfig, sandboxNumber, waitForCall, type Provider } from '../helpers/calls.js';

let t: TestService;
let tn: Tenant;

before(async () => {
  t = await startTestService(FAST_CALLS);
  tn = await tenant(t);
});

after(async () => {
  await t.close();
});

const enable = (agentId: string, provider: Provider, key = tn.apiKey) =>
  t.http.post(`/api/v1/agents/${agentId}/telephony/${provider}/inbound`).set(bearer(key));
const disable = (agentId: string, provider: Provider, key = tn.apiKey) =>
  t.http.delete(`/api/v1/agents/${agentId}/telephony/${provider}/inbound`).set(bearer(key));
const ring = (body: Record<string, unknown>, key = tn.apiKey) => t.http.post('/api/v1/sandbox/inbound-calls').set(bearer(key)).send(body);

for (const provider of ['provider_a', 'provider_b'] as Provider[]) {
  describe(`${provider}: inbound`, () => {
    it('enable, ring: the agent answers, converses and the call completes as inbound; disable stops it', async () => {
      const number = sandboxNumber('5100');
      const agentId = await createPhoneAgent(t, tn, provider, { ...providerConfig(provider, number), first_message: 'Thanks for calling Acme Dental!' });
      const on = await enable(agentId, provider);
      assert.equal(on.status, 200, JSON.stringify(on.body));
      assert.equal(on.body.telephony[provider].inbound_enabled, true);
      assert.equal((await enable(agentId, provider)).status, 200, 'enabling again repairs and answers 200');

      const res = await ring({ to_number: number, from_number: '+14155550188' });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.direction, 'inbound');
      assert.equal(res.body.from_number, '+14155550188');
      assert.equal(res.body.to_number, number);
      assert.equal(res.body.agent_id, agentId);
      const call = await waitForCall(t, tn, res.body.call_id);
      assert.equal(call.status, 'completed');
      assert.equal(call.answered_by, null, 'no machine detection on inbound calls');
      assert.equal(call.transcript[0]?.text, 'Thanks for calling Acme Dental!');
      assert.ok(call.transcript.some((e: { role: string; text: string }) => e.role === 'user' && e.text === 'Hello, this is Sam.'));
      const listed = await t.http.get('/api/v1/calls?direction=inbound').set(bearer(tn.apiKey));
      assert.ok(listed.body.data.some((c: { call_id: string }) => c.call_id === call.call_id));

      const off = await disable(agentId, provider);
      assert.equal(off.status, 200);
      assert.equal(off.body.telephony[provider].inbound_enabled, false);
      assert.equal((await disable(agentId, provider)).status, 200, 'already off: 200');
      const after = await ring({ to_number: number });
      assert.equal(after.status, 404);
      assert.equal(after.body.error.code, 'no_agent_for_number');
    });

    it('refusals change nothing: not configured (409), number in use (409), unknown number or bad credentials at the carrier (502), and the same when turning inbound off', async () => {
      const bare = await createAgent(t, tn);
      const notConfigured = await enable(bare, provider);
      assert.equal(notConfigured.status, 409);
      assert.equal(notConfigured.body.error.code, 'provider_not_configured');

      const number = sandboxNumber('5200');
      const first = await createPhoneAgent(t, tn, provider, providerConfig(provider, number));
      assert.equal((await enable(first, provider)).status, 200);
      const second = await createPhoneAgent(t, tn, provider, providerConfig(provider, number));
      const inUse = await enable(second, provider);
      assert.equal(inUse.status, 409);
      assert.equal(inUse.body.error.code, 'phone_number_in_use');

      const missing = await createPhoneAgent(t, tn, provider, providerConfig(provider, sandboxNumber('0004')));
      const notFound = await enable(missing, provider);
      assert.equal(notFound.status, 502);
      assert.equal(notFound.body.error.code, 'carrier_number_not_found');

      const badCreds = provider === 'provider_a' ? { provider_a_config: { auth_token: 'not-hex' } } : { provider_b_config: { api_key: 'sk_wrong_shape' } };
      const bad = await createPhoneAgent(t, tn, provider, { ...providerConfig(provider, sandboxNumber('5300')) });
      assert.equal((await t.http.patch(`/api/v1/agents/${bad}`).set(bearer(tn.apiKey)).send(badCreds)).status, 200);
      const refused = await enable(bad, provider);
      assert.equal(refused.status, 502);
      assert.equal(refused.body.error.code, 'carrier_auth_failed');
      assert.ok(!JSON.stringify(refused.body).includes('not-hex') && !JSON.stringify(refused.body).includes('sk_wrong_shape'), 'no credential echoed');
      for (const id of [bare, second, missing, bad]) {
        const agent = await t.http.get(`/api/v1/agents/${id}`).set(bearer(tn.apiKey));
        assert.equal(agent.body.telephony[provider].inbound_enabled, false);
      }

      // Turning inbound off asks the carrier too: credentials it refuses are 502, and inbound stays on.
      assert.equal((await t.http.patch(`/api/v1/agents/${first}`).set(bearer(tn.apiKey)).send(badCreds)).status, 200);
      const notOff = await disable(first, provider);
      assert.equal(notOff.status, 502, notOff.text);
      assert.equal(notOff.body.error.code, 'carrier_auth_failed');
      assert.equal((await t.http.get(`/api/v1/agents/${first}`).set(bearer(tn.apiKey))).body.telephony[provider].inbound_enabled, true);
      // A credential cleared (a field sent as null) leaves inbound on with the config incomplete: 409, still on.
      const cleared = provider === 'provider_a' ? { provider_a_config: { auth_token: null } } : { provider_b_config: { api_key: null } };
      assert.equal((await t.http.patch(`/api/v1/agents/${first}`).set(bearer(tn.apiKey)).send(cleared)).status, 200);
      const incomplete = await disable(first, provider);
      assert.equal(incomplete.status, 409, incomplete.text);
      assert.equal(incomplete.body.error.code, 'provider_not_configured');
      assert.equal((await t.http.get(`/api/v1/agents/${first}`).set(bearer(tn.apiKey))).body.telephony[provider].inbound_enabled, true);
    });
  });
}

describe('inbound refusals', () => {
  it("a workspace past due has its inbound calls rejected as busy; another workspace's number is not found", async () => {
    const other = await tenant(t);
    const number = sandboxNumber('5400');
    const agentId = await createPhoneAgent(t, other, 'provider_a', providerConfig('provider_a', number));
    assert.equal((await enable(agentId, 'provider_a', other.apiKey)).status, 200);
    assert.equal((await ring({ to_number: number })).status, 404, 'not this workspace’s number');
    await setWorkspace(t, other.workspaceId, { subscription_status: 'past_due' });
    const res = await ring({ to_number: number }, other.apiKey);
    assert.equal(res.status, 409);
    assert.equal(res.body.error.code, 'inbound_call_rejected');
    const sim = t.service.sandbox.carriers!.server.calls().filter((c) => c.to === number);
    assert.equal(sim.at(-1)?.outcome, 'rejected');
    const calls = await t.http.get('/api/v1/calls').set(bearer(other.apiKey));
    assert.deepEqual(calls.body.data, []);
  });

  it('a number configured at both providers needs the provider named', async () => {
    const number = sandboxNumber('5500');
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { ...providerConfig('provider_a', number), ...providerConfig('provider_b', number) });
    assert.equal((await enable(agentId, 'provider_a')).status, 200);
    assert.equal((await enable(agentId, 'provider_b')).status, 200);
    const res = await ring({ to_number: number });
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'provider_required');
    assert.equal(
      (await ring({ to_number: number, provider: 'provider_b', from_number: `+1415${(randomBytes(3).readUIntBE(0, 3) % 9000000) + 1000000}` })).status,
      201,
    );
  });
});
