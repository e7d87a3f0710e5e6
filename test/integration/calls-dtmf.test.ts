/**
 * The phone keypad, both ways, through both carriers and their sandboxes (real sockets, the sandbox
 * voice service): keys the person presses reach the model and the transcript (entries marked `dtmf`),
 * and the agent's built-in `send_dtmf` tool gets it through the sandbox phone menu (0005) by each
 * carrier's own means (provider_b's `send_dtmf` command, tones in the agent audio on provider_a's
 * stream); wrong keys never reach a person, and keys that are not keys are refused to the model with
 * nothing pressed. A flood of keys (issue 32) gets the key budget's burst through to the model; the
 * rest is dropped and counted, and the call goes on.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { metricValue, startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, providerConfig, sandboxNumber, waitForCall, type Provider } from '../helpers/calls.js';
import type { SandboxCallRecord, SandboxCarriers } from '../../src/sandbox/carriers/server.js';

let t: TestService;
const sandbox = (): SandboxCarriers => t.service.sandbox.carriers!.server;
const simOf = (callSid: string): SandboxCallRecord => sandbox().call(callSid)!;

type Entry = { role: string; text: string; dtmf?: string; timestamp: number };
type ToolCall = { name: string; ok: boolean; arguments: Record<string, unknown>; result: unknown; error: string | null };

/** Keys a call may press at once (CALL_DTMF_BURST). */
const KEY_BURST = 12;

before(async () => {
  // The budgets' clock stands still, so a call's keys are its burst and never more, however fast or
  // slow the machine runs the call; caller audio gets a burst of 10 minutes so it never runs out.
  t = await startTestService(
    { ...FAST_CALLS, CALL_DTMF_GAP_MS: '400', CALL_DTMF_BURST: String(KEY_BURST), CALL_AUDIO_BURST_MS: '600000' },
    { budgetClock: () => 0 },
  );
});

after(async () => {
  await t.close();
});

const MENU_INSTRUCTION = 'You are the scheduling assistant of Acme Dental, calling a clinic.';

// These groups run at once, each in a workspace of its own (its call slots); each waits on its calls,
// not on the machine. The cases within a group run in order.
describe('keys both ways', { concurrency: true }, () => {
  for (const provider of ['provider_a', 'provider_b'] as Provider[]) {
    describe(`${provider}: keys the person presses`, { concurrency: 1 }, () => {
      let tn: Tenant;
      before(async () => {
        tn = await tenant(t);
      });
      it('the PIN caller (inbound from ...0006): its keys are one transcript entry marked dtmf and reach the model', async () => {
        const number = sandboxNumber();
        const agentId = await createPhoneAgent(t, tn, provider, providerConfig(provider, number));
        const on = await t.http.post(`/api/v1/agents/${agentId}/telephony/${provider}/inbound`).set(bearer(tn.apiKey));
        assert.equal(on.status, 200, JSON.stringify(on.body));
        const res = await t.http
          .post('/api/v1/sandbox/inbound-calls')
          .set(bearer(tn.apiKey))
          .send({ to_number: number, from_number: sandboxNumber('0006'), provider });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, 'completed');
        const transcript = call.transcript as Entry[];
        const keys = transcript.filter((e) => e.dtmf !== undefined);
        assert.deepEqual(keys, [{ role: 'user', text: '1234#', dtmf: '1234#', timestamp: keys[0]?.timestamp }], JSON.stringify(transcript));
        const at = transcript.indexOf(keys[0]);
        assert.ok(
          transcript.slice(at + 1).some((e) => e.role === 'model' && e.text.includes('Keys pressed on the phone keypad: 1234#')),
          `the model answered the keys: ${JSON.stringify(transcript)}`,
        );
        assert.ok(transcript.some((e) => e.role === 'user' && e.text === 'I would like to check my account.'));
        assert.equal(simOf(call.call_sid).dtmfSent, '1234#');
      });

      it('keys without # end their run after CALL_DTMF_GAP_MS', async () => {
        const agentId = await createPhoneAgent(t, tn, provider);
        const to = sandboxNumber('6701');
        sandbox().setScript(to, [
          { waitForAgent: true },
          { pressDigits: '42' },
          { waitForAgent: true },
          { say: 'Thanks, goodbye.' },
          { waitForAgent: true, startWithinMs: 2000 },
          { hangup: true },
        ]);
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, 'completed');
        const transcript = call.transcript as Entry[];
        assert.deepEqual(
          transcript.filter((e) => e.dtmf !== undefined).map((e) => [e.role, e.text, e.dtmf]),
          [['user', '42', '42']],
        );
        assert.ok(transcript.some((e) => e.role === 'model' && e.text.includes('Keys pressed on the phone keypad: 42')));
      });
    });

    describe(`${provider}: the agent presses keys (send_dtmf)`, { concurrency: 1 }, () => {
      let tn: Tenant;
      before(async () => {
        tn = await tenant(t);
      });
      it('the phone menu (0005): the agent presses the keys its prompt asks for and reaches the person', async () => {
        const agentId = await createPhoneAgent(t, tn, provider, { instruction: MENU_INSTRUCTION });
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0005') });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, 'completed');
        const sim = simOf(call.call_sid);
        assert.equal(sim.dtmfReceived, '1#', 'the menu heard the keys');
        assert.deepEqual(sim.protocolErrors, [], 'nothing the real carrier would refuse');
        assert.ok(sim.spoken.includes('Connecting you to the front desk.'), JSON.stringify(sim.spoken));
        const tools = call.tool_calls as ToolCall[];
        assert.deepEqual(
          tools.map((c) => [c.name, c.ok, c.arguments, c.result]),
          [['send_dtmf', true, { digits: '1#' }, 'Pressed 1#.']],
        );
        const transcript = call.transcript as Entry[];
        assert.ok(
          transcript.some((e) => e.role === 'model' && e.dtmf === '1#' && e.text === '1#'),
          JSON.stringify(transcript),
        );
        assert.ok(
          transcript.some((e) => e.role === 'user' && e.text === 'Front desk, this is Sam speaking.'),
          'a person answered',
        );
      });

      it('a menu that never answers: wrong keys three times, then it hangs up and no person ever speaks', async () => {
        const agentId = await createPhoneAgent(t, tn, provider, { instruction: `${MENU_INSTRUCTION} At a phone menu press "2#".` });
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0005') });
        const call = await waitForCall(t, tn, res.body.call_id, undefined, 40_000);
        assert.equal(call.status, 'completed');
        const sim = simOf(call.call_sid);
        assert.equal(sim.dtmfReceived, '2#2#2#');
        assert.equal(sim.spoken.at(-1), 'Goodbye.');
        assert.ok(!sim.spoken.includes('Connecting you to the front desk.'));
        const transcript = call.transcript as Entry[];
        assert.ok(!transcript.some((e) => e.text === 'Front desk, this is Sam speaking.'));
        assert.deepEqual(
          transcript.filter((e) => e.dtmf !== undefined).map((e) => [e.role, e.dtmf]),
          [
            ['model', '2#'],
            ['model', '2#'],
            ['model', '2#'],
          ],
        );
      });

      it('keys that are not keys are refused: the model is told why, nothing is pressed, nothing enters the transcript', async () => {
        const agentId = await createPhoneAgent(t, tn, provider, { instruction: `${MENU_INSTRUCTION} At a phone menu press "1x#".` });
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0005') });
        const call = await waitForCall(t, tn, res.body.call_id, undefined, 40_000);
        assert.equal(call.status, 'completed');
        const tools = call.tool_calls as ToolCall[];
        assert.ok(tools.length >= 1);
        for (const c of tools) {
          assert.equal(c.name, 'send_dtmf');
          assert.equal(c.ok, false);
          assert.match(c.error ?? '', /'x' at position 2 is not a key.*Nothing was pressed/);
        }
        assert.ok(
          (call.transcript as Entry[]).some((e) => e.role === 'model' && e.text.includes('is not a key')),
          'the agent heard the refusal (the sandbox model speaks tool results)',
        );
        assert.equal(simOf(call.call_sid).dtmfReceived, '');
        assert.ok(!(call.transcript as Entry[]).some((e) => e.dtmf !== undefined));
      });
    });
  }
});

// After the groups above and one provider after the other: the service's count of dropped keys and the
// sandbox model's count of text inputs are the whole process's, so a flood's figures are exact only
// while no other call runs, and its keys' webhooks must not slow another test's key windows.
for (const provider of ['provider_a', 'provider_b'] as Provider[]) {
  describe(`${provider}: a flood of keys`, () => {
    let tn: Tenant;
    before(async () => {
      tn = await tenant(t);
    });
    it('reaches the model as the budget allows (the burst); the rest is dropped and counted; the call goes on', async () => {
      const FLOOD = 200;
      const agentId = await createPhoneAgent(t, tn, provider);
      const to = sandboxNumber('6702');
      sandbox().setScript(to, [
        { waitForAgent: true },
        { pressDigits: '#'.repeat(FLOOD), gapMs: 0 },
        { waitForAgent: true, maxMs: 60_000 },
        { say: 'Thanks, goodbye.' },
        { waitForAgent: true, startWithinMs: 2000 },
        { hangup: true },
      ]);
      const dropped = () => metricValue(t, 'media_input_dropped_total', { stream: 'call', kind: 'keys', reason: 'rate' });
      const droppedBefore = await dropped();
      const textsBefore = t.service.sandbox.voice!.inputsReceived().texts;
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const call = await waitForCall(t, tn, res.body.call_id, undefined, 60_000);
      assert.equal(call.status, 'completed');
      assert.equal(simOf(call.call_sid).dtmfSent, '#'.repeat(FLOOD), 'the carrier sent every key');
      const transcript = call.transcript as Entry[];
      const keys = transcript.filter((e) => e.dtmf !== undefined);
      assert.deepEqual(
        keys.map((e) => e.dtmf),
        Array.from({ length: KEY_BURST }, () => '#'),
        'each # ends a run: one model input per key taken',
      );
      assert.equal(t.service.sandbox.voice!.inputsReceived().texts - textsBefore, KEY_BURST, 'model turns from keys');
      assert.equal((await dropped()) - droppedBefore, FLOOD - KEY_BURST);
      // The call went on: the person spoke after the flood, was heard and answered.
      const bye = transcript.findIndex((e) => e.role === 'user' && e.text === 'Thanks, goodbye.');
      assert.ok(bye > transcript.indexOf(keys.at(-1)!), JSON.stringify(transcript));
      assert.ok(
        transcript.slice(bye + 1).some((e) => e.role === 'model'),
        `the agent answered: ${JSON.stringify(transcript.slice(bye))}`,
      );
      // provider_b also posts a webhook a key, one at a time: the next test runs once they are all in.
      const last = provider === 'provider_b' ? 'call.hangup' : null;
      if (last) await waitFor(async () => simOf(call.call_sid).callbacks.some((c) => c.event === last), 60_000, 'the carrier webhooks');
    });
  });
}
