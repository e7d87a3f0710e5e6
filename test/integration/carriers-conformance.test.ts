/**
 * The carriers' shared conformance suite: every carrier in the registry (src/carriers/index.ts) runs
 * it, through the service and against its sandbox simulator (provider_a and provider_b over real HTTP
 * and WebSocket, sip over real SIP and RTP on loopback against the sandbox's SIP far end), as LiveKit's
 * plug-ins share one suite. A carrier added to the registry (with its simulator in src/sandbox/carriers/)
 * gets it without a line here: dialling, hang-up before and after the answer, transfer (and its record), keys both
 * ways, inbound on and off, every outcome its callbacks map (a person, a machine, busy, no answer,
 * refused, canceled), and media in (the person's words in the transcript) and out (the agent's audio
 * played to the person). Where SIP cannot be asked the same, the case says why: its account is a SIP
 * trunk (each agent gets one to the far end), its inbound switch is the agent's `sip_config`, and it
 * has no answering-machine detection.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, providerConfig, sandboxNumber, sipConfig, waitForCall } from '../helpers/calls.js';
import { freePort, LOOPBACK } from '../helpers/sipp.js';
import { openSse } from '../helpers/sse.js';
import type { SandboxCallRecord, SandboxCarriers } from '../../src/sandbox/carriers/server.js';
import { PROVIDERS, type Provider } from '../../src/carriers/index.js';

let t: TestService;
/** Each carrier's suite has a workspace of its own (its five call slots), so the three run at once. */
const tenants = new Map<Provider, Tenant>();
const sandbox = (): SandboxCarriers => t.service.sandbox.carriers!.server;
const simOf = (callSid: string): SandboxCallRecord => sandbox().call(callSid)!;

type Entry = { role: string; text: string; dtmf?: string };

before(async () => {
  // SIP on, so the sandbox runs its SIP far end.
  const [sipPort, rtp] = [await freePort(), await freePort()];
  t = await startTestService({
    ...FAST_CALLS,
    SIP_PORT: String(sipPort),
    SIP_HOST: LOOPBACK,
    SIP_ADVERTISED_ADDRESS: LOOPBACK,
    SIP_RTP_PORT_MIN: String(rtp),
    SIP_RTP_PORT_MAX: String(rtp + 100),
  });
  for (const provider of PROVIDERS) tenants.set(provider, await tenant(t));
});

after(async () => {
  await t.close();
});

/** The agent's account at `provider` for `number`: sandbox credentials, or for sip a trunk of its own to the far end delivering the number. */
const accountFor = async (tn: Tenant, provider: Provider, number = sandboxNumber('5000')) =>
  provider === 'sip' ? sipConfig(t, tn, number) : providerConfig(provider, number);

it('runs for every registered carrier, each on its simulator', () => {
  assert.deepEqual(
    PROVIDERS.filter((p) => !t.service.sandbox.carriers?.providers.has(p)),
    [],
    'every carrier in the registry has its sandbox simulator',
  );
});

// The carriers' suites at once (each waits on its calls, not on the machine); the cases within one in order
// (node:test hands a suite's concurrency down to its children unless they set their own).
describe('every carrier', { concurrency: true }, () => {
  for (const provider of PROVIDERS) {
    describe(`${provider} conforms`, { concurrency: 1 }, () => {
      let tn: Tenant;
      before(() => {
        tn = tenants.get(provider)!;
      });
      const hangup = (callId: string) => t.http.post(`/api/v1/calls/${callId}/hangup`).set(bearer(tn.apiKey));
      const phoneAgent = async (body: Record<string, unknown> = {}) => createPhoneAgent(t, tn, provider, { ...(await accountFor(tn, provider)), ...body });

      it('dials; media flows both ways; hangs up after the answer', async () => {
        const agentId = await phoneAgent({ first_message: 'Hello from Acme Dental.' });
        const to = sandboxNumber();
        sandbox().setScript(to, [{ waitForAgent: true }, { say: 'Hello, this is Sam.' }, { pause: 60_000 }]);
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: to, provider });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        const live = await waitForCall(t, tn, res.body.call_id, (c) =>
          (c.transcript as Entry[]).some((e) => e.role === 'user' && e.text === 'Hello, this is Sam.'),
        );
        assert.equal(live.status, 'in_progress');
        const sim = simOf(live.call_sid);
        assert.ok(sim.agentPlayedMs > 0, 'the person heard the agent');
        assert.ok(sim.mediaFramesSent > 0, 'the person was heard');
        assert.equal((await hangup(live.call_id)).status, 200);
        const call = await waitForCall(t, tn, live.call_id);
        assert.equal(call.status, 'completed');
        assert.equal(sim.hangupBy, 'service');
        assert.notEqual(sim.answeredAt, null);
      });

      it('hangs up before the answer: the carrier cancels the ringing call', async () => {
        const agentId = await phoneAgent();
        // 0003 rings until the ring timeout: time enough to hang up while it rings.
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0003'), provider });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        // At the carrier (its call id known), not answered: provider_a and sip report `ringing`, provider_b only `initiated`.
        const ringing = await waitForCall(t, tn, res.body.call_id, (c) => Boolean(c.call_sid) && ['initiated', 'ringing'].includes(c.status));
        assert.equal((await hangup(ringing.call_id)).status, 200);
        const call = await waitForCall(t, tn, ringing.call_id);
        assert.equal(call.status, 'canceled');
        assert.equal(call.answered_at, null);
        const sim = simOf(call.call_sid);
        assert.equal(sim.hangupBy, 'service');
        assert.equal(sim.answeredAt, null);
        assert.equal(sim.outcome, 'canceled');
      });

      it('transfers through the carrier; the record, call.completed and the live events say which destination, when and why', async () => {
        const agentId = await phoneAgent({ transfer_phone_number: '+14155550199', transfer_criteria: 'The caller asks for a person.' });
        const to = sandboxNumber();
        sandbox().setScript(to, [{ waitForAgent: true }, { say: 'Please transfer call to a person.' }, { pause: 5000 }]);
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: to, provider });
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.end_reason, 'transferred');
        assert.equal(simOf(call.call_sid).transferredTo, '+14155550199');

        assert.equal(call.transfers.length, 1, JSON.stringify(call.transfers));
        const [xfr] = call.transfers;
        assert.match(xfr.transfer_id, /^xfr_[0-9A-Z]{26}$/);
        const toolCall = call.tool_calls.find((r: Record<string, any>) => r.name === 'transfer_call');
        assert.deepEqual(
          { ...xfr, transfer_id: 'x', started_at: 'x', ended_at: 'x' },
          {
            transfer_id: 'x',
            destination: 'default',
            to: '+14155550199',
            reason: toolCall.arguments.reason ?? null,
            outcome: 'transferred',
            refusal_code: null,
            started_at: 'x',
            ended_at: 'x',
          },
        );
        assert.ok(Date.parse(xfr.started_at) <= Date.parse(xfr.ended_at), JSON.stringify(xfr));

        const [completed] = await t.service.db.knex('webhook_events').where({ call_id: call.call_id, kind: 'call.completed' });
        assert.deepEqual(JSON.parse(completed.body).transfers, call.transfers, 'call.completed carries the same transfers');

        const sse = await openSse(`${t.url}/api/v1/calls/${call.call_id}/events`, bearer(tn.apiKey));
        await sse.ended;
        const events = sse.messages.filter((m) => m.event === 'transfer' || (m.event === 'status' && m.data.status === 'transferring'));
        assert.deepEqual(
          events.map((m) =>
            m.event === 'status' ? ['status', m.data.status] : ['transfer', m.data.transfer_id, m.data.destination, m.data.to, m.data.status, m.data.outcome],
          ),
          [
            ['transfer', xfr.transfer_id, 'default', '+14155550199', 'started', null],
            ['status', 'transferring'],
          ],
        );
      });

      it('carries keys both ways: the person presses keys, and the agent presses the menu keys (0005)', async () => {
        const agentId = await phoneAgent({ instruction: 'You are the scheduling assistant of Acme Dental, calling a clinic.' });
        const to = sandboxNumber();
        sandbox().setScript(to, [{ waitForAgent: true }, { pressDigits: '42#' }, { waitForAgent: true }, { hangup: true }]);
        const [pressed, menu] = await Promise.all(
          [to, sandboxNumber('0005')].map(async (number) => {
            const res = await placeCall(t, tn, { agent_id: agentId, to_number: number, provider });
            assert.equal(res.status, 201, JSON.stringify(res.body));
            return waitForCall(t, tn, res.body.call_id);
          }),
        );
        assert.ok(
          (pressed.transcript as Entry[]).some((e) => e.role === 'user' && e.dtmf === '42#'),
          JSON.stringify(pressed.transcript),
        );
        assert.equal(simOf(menu.call_sid).dtmfReceived, '1#', 'the menu heard the agent press its keys');
        assert.deepEqual(simOf(menu.call_sid).protocolErrors, []);
      });

      it('takes inbound calls while inbound is on, and none once it is off', async () => {
        const number = sandboxNumber();
        const account = await accountFor(tn, provider, number);
        const agentId = await createPhoneAgent(t, tn, provider, account);
        const agentPath = `/api/v1/agents/${agentId}`;
        // sip's switch is the agent's `sip_config` (the trunk delivers the number; the binding takes its calls).
        const toggle = (on: boolean) =>
          provider === 'sip'
            ? t.http
                .patch(agentPath)
                .set(bearer(tn.apiKey))
                .send({ sip_config: on ? account.sip_config : null })
            : t.http[on ? 'post' : 'delete'](`${agentPath}/telephony/${provider}/inbound`).set(bearer(tn.apiKey));
        const ring = () => t.http.post('/api/v1/sandbox/inbound-calls').set(bearer(tn.apiKey)).send({ to_number: number, provider });
        assert.equal((await toggle(true)).status, 200);
        const res = await ring();
        assert.equal(res.status, 201, JSON.stringify(res.body));
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.direction, 'inbound');
        assert.equal(call.status, 'completed');
        assert.ok((call.transcript as Entry[]).some((e) => e.role === 'user' && e.text === 'Hello, this is Sam.'));
        assert.equal((await toggle(false)).status, 200);
        const refused = await ring();
        assert.equal(refused.status, 404);
        assert.equal(refused.body.error.code, 'no_agent_for_number');
      });

      it('maps every outcome its carrier reports', async () => {
        const agentId = await phoneAgent({ voicemail_config: { enabled: false, message: 'Never said.' } });
        // SIP has no answering-machine detection (a trunk reports none): a machine answers as a person
        // does, and neither is told apart (answered_by null). SIP alone tells a decline (603), busy as
        // provider_b's call_rejected.
        const sip = provider === 'sip';
        const expected: Array<[string, string, string | null]> = [
          [sandboxNumber(), 'completed', sip ? null : 'human'],
          [sandboxNumber('0001'), sip ? 'completed' : 'voicemail', sip ? null : 'machine'],
          [sandboxNumber('0002'), 'busy', null],
          [sandboxNumber('0003'), 'no_answer', null],
          [sandboxNumber('0004'), 'failed', null],
          ...(sip ? [[sandboxNumber('0008'), 'busy', null] as [string, string, null]] : []),
        ];
        const calls = [];
        // Five at a time: the workspace's concurrency slots.
        for (let i = 0; i < expected.length; i += 5) {
          const batch = expected.slice(i, i + 5).map(async ([to]) => {
            const res = await placeCall(t, tn, { agent_id: agentId, to_number: to, provider });
            assert.equal(res.status, 201, JSON.stringify(res.body));
            return waitForCall(t, tn, res.body.call_id);
          });
          calls.push(...(await Promise.all(batch)));
        }
        assert.deepEqual(
          calls.map((c) => [c.to_number, c.status, c.answered_by]),
          expected,
        );
      });
    });
  }
});
