/**
 * Per-caller setup of inbound calls, through both carriers: before the call is answered the agent's
 * `inbound_setup.url` gets a signed POST; its answer sets variables and the first message, hands the
 * call to another agent of the workspace (the carrier leg staying on the called agent's account) or
 * refuses it; a setup that hangs, fails or answers garbage leaves the call to the agent's own settings
 * with the failure recorded on the call.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { startHttpPeer, type HttpPeer, type RecordedRequest } from '../helpers/http-peer.js';
import { FAST_CALLS, createPhoneAgent, providerConfig, sandboxNumber, waitForCall, type Provider } from '../helpers/calls.js';
import type http from 'node:http';

let t: TestService;
let peer: HttpPeer;
/** What the setup receiver does with the next request, by the number called. */
const answers = new Map<string, (req: RecordedRequest, res: http.ServerResponse) => void>();

const json = (body: unknown) => (_req: RecordedRequest, res: http.ServerResponse) => {
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
};

before(async () => {
  t = await startTestService({ ...FAST_CALLS, INBOUND_SETUP_TIMEOUT_MS: '600' });
  peer = await startHttpPeer((req, res) => {
    const to = (JSON.parse(req.body) as { to_number: string }).to_number;
    const answer = answers.get(to);
    if (answer) answer(req, res);
    else json({})(req, res);
  });
});

after(async () => {
  await Promise.all([t.close(), peer.close()]);
});

const ring = (tn: Tenant, body: Record<string, unknown>) => t.http.post('/api/v1/sandbox/inbound-calls').set(bearer(tn.apiKey)).send(body);

async function inboundAgent(tn: Tenant, provider: Provider, body: Record<string, unknown> = {}): Promise<{ agentId: string; number: string }> {
  const number = sandboxNumber();
  const agentId = await createPhoneAgent(t, tn, provider, {
    ...providerConfig(provider, number),
    first_message: 'Thanks for calling Acme Dental!',
    inbound_setup: { url: `${peer.url}/setup` },
    ...body,
  });
  const on = await t.http.post(`/api/v1/agents/${agentId}/telephony/${provider}/inbound`).set(bearer(tn.apiKey));
  assert.equal(on.status, 200, JSON.stringify(on.body));
  return { agentId, number };
}

const requestsTo = (number: string) => peer.requests.filter((r) => (JSON.parse(r.body) as { to_number: string }).to_number === number);

// The groups below at once, each in a workspace of its own (its five call slots); each waits on its
// calls, not on the machine. The cases within a group run in order.
describe('inbound setup', { concurrency: true }, () => {
  for (const provider of ['provider_a', 'provider_b'] as Provider[]) {
    describe(`${provider}: per-caller inbound setup`, { concurrency: 1 }, () => {
      let tn: Tenant;
      before(async () => {
        tn = await tenant(t);
      });
      it("the answer's variables and first message set the call up; the request is signed with the workspace secret", async () => {
        const { agentId, number } = await inboundAgent(tn, provider, { variable_placeholders: { customer_name: 'there', tier: 'basic' } });
        answers.set(
          number,
          json({ variables: { customer_name: 'Ada', visits: 3 }, first_message: 'Hi {{customer_name}}, a {{tier}} member with {{visits}} visits!' }),
        );
        const res = await ring(tn, { to_number: number, from_number: '+14155550188' });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, 'completed');
        assert.equal(call.agent_id, agentId);
        assert.equal(call.first_message, 'Hi Ada, a basic member with 3 visits!');
        assert.equal(call.transcript[0]?.text, 'Hi Ada, a basic member with 3 visits!');
        assert.deepEqual(call.variables, { customer_name: 'Ada', visits: 3 });
        assert.equal(call.inbound_setup.status, 'applied');
        assert.equal(call.inbound_setup.error, null);

        const [request] = requestsTo(number);
        const sent = JSON.parse(request.body);
        assert.deepEqual(
          { ...sent, sent_at: undefined },
          { event: 'inbound.setup', call_id: call.call_id, agent_id: agentId, provider, from_number: '+14155550188', to_number: number, sent_at: undefined },
        );
        const secret = (await t.http.get('/api/v1/webhooks/secret').set(bearer(tn.apiKey))).body.webhook_secret as string;
        assert.equal(request.headers['x-webhook-signature'], createHmac('sha256', secret).update(request.body).digest('hex'));
      });

      it('an answer whose first message is "" makes the agent wait for the caller, then answer (issue 34)', async () => {
        const { number } = await inboundAgent(tn, provider);
        answers.set(number, json({ first_message: '' }));
        const res = await ring(tn, { to_number: number });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, 'completed');
        assert.equal(call.first_message, null);
        assert.equal(call.first_message_delivered, false);
        assert.deepEqual(call.transcript[0], { ...call.transcript[0], role: 'user', text: 'Hello, this is Sam.' }, 'the caller spoke first');
        assert.deepEqual(call.transcript[1], {
          ...call.transcript[1],
          role: 'model',
          text: 'As the receptionist of Acme Dental, I heard: "Hello, this is Sam.".',
        });
      });

      it('the answer hands the call to another agent of the workspace; the carrier leg stays on the called number', async () => {
        const desk = await t.http
          .post('/api/v1/agents')
          .set(bearer(tn.apiKey))
          .send({ name: 'Billing desk', instruction: 'You are the billing desk of Acme Dental.', first_message: 'Billing desk, how can I help?' });
        assert.equal(desk.status, 201);
        const { number } = await inboundAgent(tn, provider);
        answers.set(number, json({ agent_id: desk.body.agent_id }));
        const res = await ring(tn, { to_number: number });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, 'completed');
        assert.equal(call.agent_id, desk.body.agent_id);
        assert.equal(call.transcript[0]?.text, 'Billing desk, how can I help?');
        assert.deepEqual({ ...call.inbound_setup, duration_ms: 0 }, { status: 'applied', error: null, agent_id: desk.body.agent_id, duration_ms: 0 });
      });

      it('a refusal turns the call away as busy and records no call', async () => {
        const { number } = await inboundAgent(tn, provider);
        answers.set(number, json({ action: 'refuse' }));
        const before = (await t.service.db.knex('calls').where({ workspace_id: tn.workspaceId }).count({ n: '*' }))[0].n;
        const res = await ring(tn, { to_number: number });
        assert.equal(res.status, 409, JSON.stringify(res.body));
        assert.equal(res.body.error.code, 'inbound_call_rejected');
        const sim = t.service.sandbox.carriers!.server.calls().filter((c) => c.to === number);
        assert.equal(sim.at(-1)?.outcome, 'rejected');
        assert.equal((await t.service.db.knex('calls').where({ workspace_id: tn.workspaceId }).count({ n: '*' }))[0].n, before);
      });

      it("an answer with a NUL character is answered with the agent's own settings, invalid_answer recorded", async () => {
        const { agentId, number } = await inboundAgent(tn, provider, { variable_placeholders: { customer_name: 'there' } });
        answers.set(number, json({ variables: { customer_name: 'A\u0000da' }, first_message: 'Hi {{customer_name}}!' }));
        const res = await ring(tn, { to_number: number });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, 'completed');
        assert.equal(call.agent_id, agentId);
        assert.deepEqual(call.variables, {});
        assert.equal(call.transcript[0]?.text, 'Thanks for calling Acme Dental!');
        assert.equal(call.inbound_setup.status, 'failed');
        assert.equal(call.inbound_setup.error, 'invalid_answer');
      });

      it("a setup that hangs past the deadline leaves the call to the agent's own settings, the timeout recorded", async () => {
        const { agentId, number } = await inboundAgent(tn, provider);
        answers.set(number, () => undefined);
        const res = await ring(tn, { to_number: number });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, 'completed');
        assert.equal(call.agent_id, agentId);
        assert.equal(call.transcript[0]?.text, 'Thanks for calling Acme Dental!');
        assert.equal(call.inbound_setup.status, 'failed');
        assert.equal(call.inbound_setup.error, 'timeout');
        assert.ok(call.inbound_setup.duration_ms >= 600);
      });
    });
  }

  describe('inbound setup failures', { concurrency: 1 }, () => {
    let tn: Tenant;
    before(async () => {
      tn = await tenant(t);
    });

    it("an error status, garbage, unknown fields, a placeholder left without a value or another workspace's agent: the agent's own settings, the reason recorded", async () => {
      const other = await tenant(t);
      const foreign = await t.http.post('/api/v1/agents').set(bearer(other.apiKey)).send({ name: 'Not yours' });
      const cases: Array<[string, (req: RecordedRequest, res: http.ServerResponse) => void]> = [
        [
          'http_status',
          (_req, res) => {
            res.writeHead(500);
            res.end('{}');
          },
        ],
        ['invalid_answer', json('this is not JSON')],
        ['invalid_answer', json({ first_message: 'Hi', colour: 'red' })],
        ['invalid_answer', json({ variables: { 'bad name': 'x' } })],
        ['invalid_answer', json({ first_message: 'x'.repeat(70_000) })],
        ['invalid_answer', json({ first_message: 'Hi\u0000' })],
        ['invalid_answer', json('{"variables": {"name": "\\ud800"}}')],
        ['invalid_answer', json({ variables: { name: 'n'.repeat(2000) }, first_message: '{{name}}'.repeat(2) })],
        // A placeholder the answer leaves without a value: the agent's own first message and defaults (issue 34).
        ['variable_missing', json({ first_message: 'Hi {{customer_name}}!' })],
        ['agent_not_found', json({ agent_id: foreign.body.agent_id })],
        ['agent_not_found', json({ agent_id: 'agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8V' })],
      ];
      // Five at a time: the workspace's concurrency slots.
      for (let i = 0; i < cases.length; i += 5) {
        await Promise.all(
          cases.slice(i, i + 5).map(async ([reason, answer]) => {
            const { agentId, number } = await inboundAgent(tn, 'provider_a');
            answers.set(number, answer);
            const res = await ring(tn, { to_number: number });
            assert.equal(res.status, 201, JSON.stringify(res.body));
            const call = await waitForCall(t, tn, res.body.call_id);
            assert.equal(call.status, 'completed', reason);
            assert.equal(call.agent_id, agentId, reason);
            assert.equal(call.transcript[0]?.text, 'Thanks for calling Acme Dental!', reason);
            assert.equal(call.inbound_setup.status, 'failed', reason);
            assert.equal(call.inbound_setup.error, reason);
          }),
        );
      }
    });

    it('an agent without the setting makes no request and records none; a setup URL that is not http(s) is refused', async () => {
      const number = sandboxNumber('5790');
      const agentId = await createPhoneAgent(t, tn, 'provider_b', { ...providerConfig('provider_b', number) });
      assert.equal((await t.http.post(`/api/v1/agents/${agentId}/telephony/provider_b/inbound`).set(bearer(tn.apiKey))).status, 200);
      const res = await ring(tn, { to_number: number });
      const call = await waitForCall(t, tn, res.body.call_id);
      assert.equal(call.inbound_setup, null);
      assert.equal(requestsTo(number).length, 0);

      const bad = await t.http
        .patch(`/api/v1/agents/${agentId}`)
        .set(bearer(tn.apiKey))
        .send({ inbound_setup: { url: 'ftp://example.com/x' } });
      assert.equal(bad.status, 422);
      assert.equal(bad.body.error.param, 'inbound_setup.url');
      const agent = await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey));
      assert.equal(agent.body.inbound_setup, null);
    });
  });
});
