/**
 * A call hung up (POST /calls/{id}/hangup) while it is still being dialed ends, on both carriers, at
 * every stage: right after it is created, while the dial request is at the carrier, once the carrier
 * has it, while it rings, and as it is being answered. Before the answer it ends `canceled` (end_reason
 * `canceled`, call.completed says so, the carrier's call canceled by the service); answered first, it
 * ends `completed` with `api_hangup`, as the contract says of a hang-up after the answer. The
 * deadlines that end a call nobody reports on are set far beyond the test, so every end seen here
 * comes from the carrier's and the service's own steps.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, setWorkspace, waitFor } from '../helpers/realtime.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall, type Provider } from '../helpers/calls.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';
import type { DialRequest } from '../../src/carriers/index.js';

/** No call is ended by a deadline while the tests run: only the real path can end it. */
const NO_DEADLINES = { CALL_DIAL_GRACE_MS: '600000', CALL_STATUS_GRACE_MS: '600000', CALL_ORPHAN_AFTER_MS: '600000' };

let ringing: TestService;
let answering: TestService;
let receiver: Receiver;

before(async () => {
  [ringing, answering, receiver] = await Promise.all([
    // Real time, and a person answers only after 20 s of ringing: every hang-up below comes first.
    startTestService({
      ...FAST_CALLS,
      ...NO_DEADLINES,
      SANDBOX_CARRIERS_SPEED: '1',
      CALL_AUDIO_RATE: '1',
      SANDBOX_CARRIERS_RING_MS: '20000',
      CALL_RING_TIMEOUT_S: '60',
    }),
    // Answered within a few hundred milliseconds of the dial request: hang-ups race the answer.
    startTestService({ ...FAST_CALLS, ...NO_DEADLINES }),
    startReceiver(),
  ]);
});

after(async () => {
  await Promise.all([ringing.close(), answering.close(), receiver.close()]);
});

const sandboxOf = (t: TestService): SandboxCarriers => t.service.sandbox.carriers!.server;
const hangup = (t: TestService, tn: Tenant, callId: string) => t.http.post(`/api/v1/calls/${callId}/hangup`).set(bearer(tn.apiKey));

/** The call.completed delivered to the receiver for `callId`. */
async function completedEvent(callId: string): Promise<Record<string, unknown>> {
  return waitFor(
    async () =>
      receiver.requests
        .map((r) => JSON.parse(r.rawBody.toString()) as Record<string, unknown>)
        .find((e) => e.conversation_id === callId && e.event === 'call.completed'),
    10_000,
    `call.completed of ${callId}`,
  );
}

/** The call ended before anyone answered: canceled, and the carrier's call (if it was placed) canceled by the service. */
async function assertCanceled(t: TestService, tn: Tenant, callId: string): Promise<void> {
  const call = await waitForCall(t, tn, callId);
  assert.deepEqual([call.status, call.end_reason, call.answered_at], ['canceled', 'canceled', null], JSON.stringify(call));
  assert.ok(call.ended_at);
  const event = await completedEvent(callId);
  assert.deepEqual([event.status, event.duration], ['canceled', 0]);
  if (call.call_sid) {
    const sim = await sandboxOf(t).waitForCall((c) => c.callSid === call.call_sid && c.state === 'completed');
    assert.deepEqual([sim.outcome, sim.hangupBy, sim.answeredAt], ['canceled', 'service', null], JSON.stringify(sim));
  }
}

for (const provider of ['provider_a', 'provider_b'] as Provider[]) {
  describe(`${provider}: hanging up a call still being dialed`, () => {
    let tn: Tenant;
    let agentId: string;
    before(async () => {
      tn = await tenant(ringing);
      agentId = await createPhoneAgent(ringing, tn, provider);
    });

    const place = async (to: string) => {
      const res = await placeCall(ringing, tn, { agent_id: agentId, to_number: to, webhook_url: receiver.url });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return res.body.call_id as string;
    };

    it('right after it is created: canceled', async () => {
      const callId = await place(sandboxNumber());
      assert.equal((await hangup(ringing, tn, callId)).status, 200);
      await assertCanceled(ringing, tn, callId);
    });

    it('while the dial request is at the carrier: answered as it stands, then canceled once the carrier has the call', async () => {
      const rest = ringing.service.telephony.carriers.get(provider).rest;
      const dial = rest.dial.bind(rest);
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let asked!: () => void;
      const dialing = new Promise<void>((r) => (asked = r));
      rest.dial = async (credentials, request: DialRequest) => {
        asked();
        await released;
        return dial(credentials, request);
      };
      try {
        const to = sandboxNumber();
        const callId = await place(to);
        await dialing;
        const hung = await hangup(ringing, tn, callId);
        assert.equal(hung.status, 200, JSON.stringify(hung.body));
        assert.equal(hung.body.status, 'queued', 'the dial is under way: the call is as it stands');
        release();
        await assertCanceled(ringing, tn, callId);
        assert.equal(
          sandboxOf(ringing)
            .calls()
            .filter((c) => c.to === to).length,
          1,
          'dialed once',
        );
      } finally {
        release();
        Reflect.deleteProperty(rest, 'dial');
      }
    });

    it('once the carrier has it (its call id known): canceled at the carrier', async () => {
      const callId = await place(sandboxNumber());
      await waitForCall(ringing, tn, callId, (c) => Boolean(c.call_sid));
      assert.equal((await hangup(ringing, tn, callId)).status, 200);
      await assertCanceled(ringing, tn, callId);
    });

    it('while it rings: canceled at the carrier', async () => {
      const to = sandboxNumber();
      const callId = await place(to);
      await sandboxOf(ringing).waitForCall((c) => c.to === to && c.state === 'ringing');
      assert.equal((await hangup(ringing, tn, callId)).status, 200);
      await assertCanceled(ringing, tn, callId);
    });

    it('as it is being answered: every call ends, canceled before the answer, completed with api_hangup after it', async () => {
      const ta = await tenant(answering);
      await setWorkspace(answering, ta.workspaceId, { concurrent_session_limit: 20 });
      const agent = await createPhoneAgent(answering, ta, provider);
      const ids: string[] = [];
      // Hang-ups at every moment of the first few hundred milliseconds: created, dialing, ringing, answered, stream starting.
      for (let i = 0; i < 8; i++) {
        const to = sandboxNumber();
        sandboxOf(answering).setScript(to, [{ waitForAgent: true }, { pause: 60_000 }]);
        const res = await placeCall(answering, ta, { agent_id: agent, to_number: to });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        ids.push(res.body.call_id);
        await new Promise((r) => setTimeout(r, i * 40));
        const hung = await hangup(answering, ta, res.body.call_id);
        assert.ok([200, 409].includes(hung.status), JSON.stringify(hung.body));
      }
      for (const id of ids) {
        const call = await waitForCall(answering, ta, id);
        if (call.answered_at === null) assert.deepEqual([call.status, call.end_reason], ['canceled', 'canceled'], JSON.stringify(call));
        else assert.deepEqual([call.status, call.end_reason], ['completed', 'api_hangup'], JSON.stringify(call));
      }
    });
  });
}
