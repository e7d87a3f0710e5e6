/**
 * What happens during a call, through both carriers and their sandboxes: barge-in (the carrier's
 * buffer cleared, the interruption counted), the caller hanging up mid-sentence, a tool called
 * mid-call, a transfer through the carrier, hanging up through the API, and the silence timeout and
 * maximum call length from configuration.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { startHttpPeer, type HttpPeer } from '../helpers/http-peer.js';
import { bearer } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, getCall, placeCall, providerConfig, sandboxNumber, waitForCall, type Provider } from '../helpers/calls.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';

let t: TestService;
let quiet: TestService;
let brief: TestService;
const sandboxOf = (s: TestService): SandboxCarriers => s.service.sandbox.carriers!.server;

before(async () => {
  // Each limit on a service of its own, the other limit out of its way: on one service the two raced,
  // and a slow machine let the 3 s limit end the silent call before its 1.5 s of silence were noticed.
  [t, quiet, brief] = await Promise.all([
    startTestService({ ...FAST_CALLS, VOICE_MODELS: 'gemini-live-2.5-flash-preview,sandbox-refused-model' }),
    startTestService({ ...FAST_CALLS, CALL_SILENCE_TIMEOUT_MS: '1500' }),
    startTestService({ ...FAST_CALLS, CALL_SILENCE_TIMEOUT_MS: '0', CALL_MAX_DURATION_S: '3' }),
  ]);
});

after(async () => {
  await Promise.all([t.close(), quiet.close(), brief.close()]);
});

const LONG_GREETING = 'Hello! This is Acme Dental, calling about your appointment next week with doctor Smith at our Main Street clinic.';

// The groups below run at once, each in a workspace of its own (its call slots) with a tool endpoint of
// its own (its request count); each waits on its calls, not on the machine. The cases within a group
// run in order.
describe('calls', { concurrency: true }, () => {
  for (const provider of ['provider_a', 'provider_b'] as Provider[]) {
    describe(`${provider}: during the call`, { concurrency: 1 }, () => {
      let tn: Tenant;
      let peer: HttpPeer;
      before(async () => {
        tn = await tenant(t);
        peer = await startHttpPeer((_req, res) => {
          res.writeHead(200, { 'Content-Type': 'application/json' });
          res.end(JSON.stringify({ order: 'A-42', status: 'shipped yesterday' }));
        });
      });
      after(async () => {
        await peer.close();
      });
      it('barge-in: the caller talks over the agent, the carrier buffer is cleared and the interruption counted', async () => {
        const agentId = await createPhoneAgent(t, tn, provider, { first_message: LONG_GREETING });
        const to = sandboxNumber('6001');
        sandboxOf(t).setScript(to, [
          { sayWhileAgentSpeaks: 'Sorry to interrupt, when do you open?' },
          { waitForAgent: true },
          { say: 'Thanks, goodbye.' },
          { waitForAgent: true },
          { hangup: true },
        ]);
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
        const call = await waitForCall(t, tn, res.body.call_id);
        // The whole record and the call's log lines on failure: a call that ended early says how (a CI
        // run once saw one end after 474 ms with no interruption).
        const record = JSON.stringify({
          call: { ...call, analysis: undefined },
          log: t.logs.filter((line) => line.includes(call.call_id) && !line.includes('"msg":"request"')).slice(-40),
        });
        assert.equal(call.status, 'completed', record);
        assert.ok(call.interruption_count >= 1, `interruptions: ${call.interruption_count}; ${record}`);
        assert.equal(call.first_message_delivered, false, 'the first message was cut off');
        const sim = sandboxOf(t)
          .calls()
          .find((c) => c.callSid === call.call_sid)!;
        assert.ok(sim.clears >= 1, 'the service told the carrier to drop the queued audio');
        assert.ok(call.transcript.some((e: { role: string; text: string }) => e.role === 'user' && e.text === 'Sorry to interrupt, when do you open?'));
      });

      it('an agent with no first message waits for the person to speak, then answers (issue 34)', async () => {
        const agentId = await createPhoneAgent(t, tn, provider, { first_message: '' });
        const to = sandboxNumber('6009');
        sandboxOf(t).setScript(to, [{ pause: 2000 }, { say: 'Hello?' }, { waitForAgent: true }, { hangup: true }]);
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, 'completed', JSON.stringify(call));
        assert.deepEqual(
          call.transcript.map((e: { role: string; text: string }) => [e.role, e.text]),
          [
            ['user', 'Hello?'],
            ['model', 'As the receptionist of Acme Dental, I heard: "Hello?".'],
          ],
        );
        assert.equal(call.first_message, null);
        assert.equal(call.first_message_delivered, false);
        assert.equal(call.interruption_count, 0, 'nothing the agent said was talked over');
      });

      it('a model the voice service refuses at setup ends the call at once, failed with end_reason model_refused (issue 34)', async () => {
        const agentId = await createPhoneAgent(t, tn, provider, { model: 'sandbox-refused-model' });
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('6010') });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.deepEqual([call.status, call.end_reason], ['failed', 'model_refused'], JSON.stringify(call));
        assert.deepEqual(call.transcript, []);
        const sim = sandboxOf(t)
          .calls()
          .find((c) => c.callSid === call.call_sid)!;
        assert.equal(sim.agentAudioMs, 0, 'the agent said nothing');
        assert.equal(sim.state, 'completed', 'hung up at the carrier');
      });

      it('the caller hangs up mid-sentence: the call completes as a remote hang-up', async () => {
        const agentId = await createPhoneAgent(t, tn, provider);
        const to = sandboxNumber('6002');
        sandboxOf(t).setScript(to, [{ waitForAgent: true }, { say: 'Tell me everything about your clinic.' }, { hangupWhileAgentSpeaks: true }]);
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, 'completed');
        assert.equal(call.end_reason, 'remote_hangup');
        assert.ok(call.transcript.some((e: { role: string; text: string }) => e.text === 'Tell me everything about your clinic.'));
      });

      it('a tool called mid-call: the HTTP tool runs, the agent answers from it, the call records it', async () => {
        const tool = await t.http
          .post('/api/v1/tools')
          .set(bearer(tn.apiKey))
          .send({
            name: `check_order_${provider}`,
            description: 'Looks an order up.',
            url: `${peer.url}/orders`,
            parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
          });
        assert.equal(tool.status, 201, JSON.stringify(tool.body));
        const agentId = await createPhoneAgent(t, tn, provider);
        assert.equal((await t.http.put(`/api/v1/agents/${agentId}/tools/${tool.body.tool_id}`).set(bearer(tn.apiKey))).status, 200);
        const to = sandboxNumber('6003');
        sandboxOf(t).setScript(to, [
          { waitForAgent: true },
          { say: `Please run check_order_${provider} for A-42.` },
          { waitForAgent: true },
          { say: 'Great, goodbye.' },
          { waitForAgent: true },
          { hangup: true },
        ]);
        const before = peer.requests.length;
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, 'completed');
        assert.equal(call.tool_calls.length, 1, JSON.stringify(call.tool_calls));
        assert.equal(call.tool_calls[0].name, `check_order_${provider}`);
        assert.equal(call.tool_calls[0].ok, true);
        assert.deepEqual(call.tool_calls[0].result, { order: 'A-42', status: 'shipped yesterday' });
        assert.equal(peer.requests.length, before + 1, 'the tool endpoint was called once');
        assert.ok(
          call.transcript.some((e: { role: string; text: string }) => e.role === 'model' && e.text.includes('shipped yesterday')),
          'the agent answered from the result',
        );
      });

      it('a tool called mid-call with arguments its parameters refuse: the model gets the error, the tool is not called, the call records it (issue 32)', async () => {
        const tool = await t.http
          .post('/api/v1/tools')
          .set(bearer(tn.apiKey))
          .send({
            name: `order_number_${provider}`,
            description: 'Looks an order up by its number.',
            url: `${peer.url}/orders`,
            parameters: { type: 'object', properties: { order_id: { type: 'string', pattern: '^[0-9]+$' } }, required: ['order_id'] },
          });
        assert.equal(tool.status, 201, JSON.stringify(tool.body));
        const agentId = await createPhoneAgent(t, tn, provider);
        assert.equal((await t.http.put(`/api/v1/agents/${agentId}/tools/${tool.body.tool_id}`).set(bearer(tn.apiKey))).status, 200);
        const to = sandboxNumber('6003');
        sandboxOf(t).setScript(to, [
          { waitForAgent: true },
          { say: `Please run order_number_${provider} for A-42.` },
          { waitForAgent: true },
          { hangup: true },
        ]);
        const before = peer.requests.length;
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, 'completed');
        assert.equal(call.tool_calls.length, 1, JSON.stringify(call.tool_calls));
        const [record] = call.tool_calls;
        assert.equal(record.name, `order_number_${provider}`);
        assert.deepEqual(record.arguments, { order_id: 'A-42' });
        assert.equal(record.ok, false);
        assert.match(record.error, /^The arguments do not match the tool's parameters: 'arguments\.order_id' must match pattern/);
        assert.equal(peer.requests.length, before, 'the tool endpoint was not called');
      });

      it('transfer: the agent hands the call to its transfer number through the carrier', async () => {
        const agentId = await createPhoneAgent(t, tn, provider, { transfer_phone_number: '+14155550199', transfer_criteria: 'The caller asks for a person.' });
        const to = sandboxNumber('6004');
        sandboxOf(t).setScript(to, [{ waitForAgent: true }, { say: 'Please transfer call to a person.' }, { pause: 5000 }]);
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, 'completed');
        assert.equal(call.end_reason, 'transferred');
        assert.equal(call.tool_calls[0]?.name, 'transfer_call');
        const sim = sandboxOf(t)
          .calls()
          .find((c) => c.callSid === call.call_sid)!;
        assert.equal(sim.transferredTo, '+14155550199');
      });

      it('transfer destinations: the model chooses among the described destinations, and the call goes to the one it chose', async () => {
        const agentId = await createPhoneAgent(t, tn, provider, {
          transfer_phone_number: '+14155550199',
          transfer_criteria: 'The caller asks for a person.',
          transfer_destinations: [
            { name: 'sales', phone_number: '+14155550171', description: 'The caller wants to buy something.' },
            { name: 'billing', phone_number: '+14155550172', description: 'Questions about invoices or refunds.' },
          ],
        });
        const to = sandboxNumber('6014');
        sandboxOf(t).setScript(to, [{ waitForAgent: true }, { say: 'I have a question about an invoice, please transfer call to billing.' }, { pause: 5000 }]);
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.end_reason, 'transferred');
        assert.equal(call.tool_calls[0]?.name, 'transfer_call');
        assert.equal(call.tool_calls[0]?.arguments.destination, 'billing');
        const sim = sandboxOf(t)
          .calls()
          .find((c) => c.callSid === call.call_sid)!;
        assert.equal(sim.transferredTo, '+14155550172');
      });

      it('hang up through the API: a live call ends with api_hangup; the carrier refusing it is 502 and the call goes on; asking again after the end is 409', async () => {
        const config = providerConfig(provider);
        const agentId = await createPhoneAgent(t, tn, provider, config);
        const to = sandboxNumber('6005');
        sandboxOf(t).setScript(to, [{ waitForAgent: true }, { say: 'Hold on a second.' }, { pause: 20_000 }]);
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
        await waitForCall(t, tn, res.body.call_id, (c) => c.status === 'in_progress' && c.transcript.length >= 2);
        const patch = (body: Record<string, unknown>) => t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send(body);
        const refusedCredentials =
          provider === 'provider_a' ? { provider_a_config: { auth_token: 'not-hex' } } : { provider_b_config: { api_key: 'sk_wrong_shape' } };
        assert.equal((await patch(refusedCredentials)).status, 200);
        const refused = await t.http.post(`/api/v1/calls/${res.body.call_id}/hangup`).set(bearer(tn.apiKey));
        assert.equal(refused.status, 502, refused.text);
        assert.equal(refused.body.error.code, 'carrier_auth_failed');
        assert.equal((await getCall(t, tn, res.body.call_id)).status, 'in_progress', 'the call goes on');
        assert.equal((await patch(config)).status, 200);
        const hung = await t.http.post(`/api/v1/calls/${res.body.call_id}/hangup`).set(bearer(tn.apiKey));
        assert.equal(hung.status, 200, JSON.stringify(hung.body));
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, 'completed');
        assert.equal(call.end_reason, 'api_hangup');
        const again = await t.http.post(`/api/v1/calls/${res.body.call_id}/hangup`).set(bearer(tn.apiKey));
        assert.equal(again.status, 409);
        assert.equal(again.body.error.code, 'call_already_ended');
      });
    });
  }

  describe('limits from configuration', { concurrency: 1 }, () => {
    it('silence: nobody speaks for CALL_SILENCE_TIMEOUT_MS, the agent hangs up', async () => {
      const s = await tenant(quiet);
      const agentId = await createPhoneAgent(quiet, s, 'provider_a');
      const to = sandboxNumber('6006');
      sandboxOf(quiet).setScript(to, [{ waitForAgent: true }, { pause: 30_000 }]);
      const res = await placeCall(quiet, s, { agent_id: agentId, to_number: to });
      const call = await waitForCall(quiet, s, res.body.call_id);
      assert.equal(call.status, 'completed');
      assert.equal(call.end_reason, 'silence_timeout');
    });

    it('length: a call reaching CALL_MAX_DURATION_S is hung up with time_limit', async () => {
      const s = await tenant(brief);
      const agentId = await createPhoneAgent(brief, s, 'provider_b');
      const to = sandboxNumber('6007');
      // Keeps talking, as a call that reaches its limit does (this service has no silence timeout).
      sandboxOf(brief).setScript(to, [
        { waitForAgent: true },
        { say: 'One.' },
        { waitForAgent: true },
        { say: 'Two.' },
        { waitForAgent: true },
        { say: 'Three.' },
        { waitForAgent: true },
        { say: 'Four.' },
        { waitForAgent: true },
        { say: 'Five.' },
        { pause: 30_000 },
      ]);
      const res = await placeCall(brief, s, { agent_id: agentId, to_number: to });
      const call = await waitForCall(brief, s, res.body.call_id);
      assert.equal(call.end_reason, 'time_limit');
      assert.ok(call.duration <= 4, `duration ${call.duration}`);
    });
  });
});
