/**
 * Outbound calls end to end through both real carrier adapters and both sandbox carriers: the outcome
 * follows the last four digits of `to_number` (a person, `0001` voicemail, `0002` busy, `0003` no
 * answer, `0004` the carrier refuses the number). Every call ends terminal, its record matches its
 * `call.completed`, and the event reaches the call's `webhook_url` and the registered webhooks once
 * each, signed.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { bearer, waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall, type Provider } from '../helpers/calls.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';
import { newId } from '../../src/lib/ids.js';

let t: TestService;
let tn: Tenant;
let sandbox: SandboxCarriers;
let own: Receiver;
let registered: Receiver;
let secret: string;

before(async () => {
  t = await startTestService(FAST_CALLS);
  tn = await tenant(t);
  sandbox = t.service.sandbox.carriers!.server;
  own = await startReceiver();
  registered = await startReceiver();
  for (const url of [own.url, registered.url]) {
    const res = await t.http
      .post('/api/v1/webhooks')
      .set(bearer(tn.apiKey))
      .send({ url, events: ['call.completed'] });
    assert.ok(res.status === 201 || res.status === 200, JSON.stringify(res.body));
  }
  secret = (await t.http.get('/api/v1/webhooks/secret').set(bearer(tn.apiKey))).body.webhook_secret;
});

after(async () => {
  await t.close();
  await own.close();
  await registered.close();
});

/** The call.completed events for `callId` each receiver got (signature checked). */
async function eventsFor(callId: string): Promise<{ own: Array<Record<string, any>>; registered: Array<Record<string, any>> }> {
  const pick = (r: Receiver) =>
    r.requests
      .filter((q) => {
        assert.equal(q.headers['x-webhook-signature'], createHmac('sha256', secret).update(q.rawBody).digest('hex'), 'signed with the workspace secret');
        return JSON.parse(q.rawBody.toString()).conversation_id === callId;
      })
      .map((q) => JSON.parse(q.rawBody.toString()));
  await waitFor(async () => pick(own).length >= 1 && pick(registered).length >= 1, 10_000, 'call.completed deliveries');
  // A delivery that would come twice would be sent by now.
  await new Promise((r) => setTimeout(r, 200));
  return { own: pick(own), registered: pick(registered) };
}

const PROVIDERS: Provider[] = ['provider_a', 'provider_b'];

for (const provider of PROVIDERS) {
  describe(`${provider}: outbound outcomes`, () => {
    it('a person answers: a conversation, completed, with its transcript, latency and one signed call.completed per target', async () => {
      const agentId = await createPhoneAgent(t, tn, provider, { first_message: 'Hello {{name}}! This is Acme Dental.' });
      const to = sandboxNumber('5555');
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: to, webhook_url: own.url, variables: { name: 'Ada' } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.status, 'queued');
      assert.match(res.body.call_id, /^call_[0-9A-Z]{26}$/);
      assert.equal(res.body.first_message, 'Hello Ada! This is Acme Dental.', 'the first message as it is said');
      const call = await waitForCall(t, tn, res.body.call_id);
      assert.equal(call.status, 'completed');
      assert.equal(call.direction, 'outbound');
      assert.equal(call.provider, provider);
      assert.equal(call.to_number, to);
      assert.equal(call.answered_by, 'human');
      assert.equal(call.end_reason, 'agent_hangup', 'the agent said goodbye and hung up');
      assert.equal(call.first_message_delivered, true);
      assert.ok(call.call_sid, 'the carrier id is recorded');
      const said = call.transcript.map((e: { role: string; text: string }) => `${e.role}: ${e.text}`);
      assert.equal(said[0], 'model: Hello Ada! This is Acme Dental.', 'the first message is spoken first');
      for (const line of ['user: Hello, this is Sam.', 'user: Can you tell me about my appointment?', 'user: Thanks, goodbye.'])
        assert.ok(said.includes(line), `${line} in ${said.join(' | ')}`);
      assert.equal(call.message_count, call.transcript.length);
      assert.ok(call.latency_avg_ms > 0, 'turn latency measured');
      assert.ok(call.answered_at && call.ended_at);
      assert.ok(typeof call.summary === 'string' && call.summary.length > 0);

      const sim = sandbox.calls().find((c) => c.callSid === call.call_sid)!;
      assert.deepEqual(sim.protocolErrors, [], 'the service spoke the carrier protocol');
      assert.ok(sim.marksEchoed.length >= 3, 'marks after agent turns came back');
      assert.ok(sim.agentAudioMs > 500, 'the callee heard the agent');

      const events = await eventsFor(call.call_id);
      assert.equal(events.own.length, 1, 'the call webhook_url gets it once');
      assert.equal(events.registered.length, 1, 'the registered webhook gets it once');
      const e = events.own[0];
      const {
        call_id: _id,
        batch_id: _b,
        direction: _d,
        from_number: _f,
        answered_by: _a,
        end_reason: _r,
        webhook_url: _w,
        answered_at: _aa,
        ended_at: _e,
        tool_calls: _tc,
        inbound_setup: _is,
        // Null on the record of an unrecorded call; absent from its event (recordings.test.ts).
        recording: _rec,
        recording_url: _recUrl,
        // The record's own: null until the call is erased (erasure.test.ts).
        erased_at: _erased,
        // Null on the record of a call without an opt-out; absent from its event (privacy-dnc's rule).
        opt_out: _optOut,
        // The conversation settings the call ran with are the record's (Call.conversation), not call.completed's.
        conversation: _conversation,
        // Always on the record (empty without a transfer attempt); on call.completed only after an attempt (carriers-conformance).
        transfers: _transfers,
        ...shared
      } = call;
      assert.deepEqual(call.transfers, []);
      assert.equal('transfers' in e, false);
      assert.equal(call.recording, null);
      assert.equal('recording' in e, false);
      const { event, tool_calls: _etc, ...fromEvent } = e;
      assert.equal(event, 'call.completed');
      assert.deepEqual(fromEvent, shared, 'the record carries the same values as the event');
      assert.equal(e.call_sid, call.call_sid);
      assert.equal(e.created_at, res.body.created_at, "created_at is the call's creation time");
    });

    it('0001 voicemail: the agent leaves its message after the beep and the call ends as voicemail', async () => {
      const agentId = await createPhoneAgent(t, tn, provider, { voicemail_config: { enabled: true, message: 'Hi {{name}}, please call Acme Dental back.' } });
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0001'), variables: { name: 'Ada' } });
      assert.equal(res.status, 201);
      const call = await waitForCall(t, tn, res.body.call_id);
      assert.equal(call.status, 'voicemail');
      assert.equal(call.answered_by, 'machine');
      assert.equal(call.end_reason, 'agent_hangup');
      const last = call.transcript.filter((e: { role: string }) => e.role === 'model').at(-1);
      assert.equal(last?.text, 'Hi Ada, please call Acme Dental back.');
      const sim = sandbox.calls().find((c) => c.callSid === call.call_sid)!;
      assert.ok(sim.agentAudioAfterBeepMs > 500, `the machine recorded the message (${sim.agentAudioAfterBeepMs} ms)`);
      assert.equal(sim.hangupBy, 'service', 'the agent hung up after leaving it');
      const events = await eventsFor(call.call_id);
      assert.equal(events.registered[0].status, 'voicemail');
    });

    it('0001 voicemail with voicemail disabled: the agent hangs up without a message', async () => {
      const agentId = await createPhoneAgent(t, tn, provider, { voicemail_config: { enabled: false, message: 'Never said.' } });
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0001') });
      const call = await waitForCall(t, tn, res.body.call_id);
      assert.equal(call.status, 'voicemail');
      assert.ok(!call.transcript.some((e: { text: string }) => e.text === 'Never said.'));
      const sim = sandbox.calls().find((c) => c.callSid === call.call_sid)!;
      assert.equal(sim.agentAudioAfterBeepMs, 0, 'nothing was recorded after the beep');
    });

    for (const [suffix, status, endReason] of [
      ['0002', 'busy', 'not_answered'],
      ['0003', 'no_answer', 'not_answered'],
      ['0004', 'failed', 'carrier_error'],
    ] as const) {
      it(`${suffix}: ${status}, never answered, reported with its own status`, async () => {
        const agentId = await createPhoneAgent(t, tn, provider);
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber(suffix), webhook_url: own.url });
        assert.equal(res.status, 201);
        const call = await waitForCall(t, tn, res.body.call_id);
        assert.equal(call.status, status);
        assert.equal(call.end_reason, endReason);
        assert.equal(call.duration, 0);
        assert.equal(call.answered_at, null);
        assert.equal(call.first_message_delivered, false);
        assert.deepEqual(call.transcript, []);
        const events = await eventsFor(call.call_id);
        assert.equal(events.own.length, 1);
        assert.equal(events.own[0].status, status);
      });
    }
  });
}

describe('usage', () => {
  it('an answered call is charged by the minute and counts toward the plan; an unanswered one is free', async () => {
    const other = await tenant(t);
    const agentId = await createPhoneAgent(t, other, 'provider_a');
    const credit = async () => (await t.service.db.knex('workspaces').where({ id: other.workspaceId }).first()).credit_balance_cents as number;
    const before = await credit();
    const busy = await placeCall(t, other, { agent_id: agentId, to_number: sandboxNumber('0002') });
    await waitForCall(t, other, busy.body.call_id);
    assert.equal(await credit(), before);
    const talk = await placeCall(t, other, { agent_id: agentId, to_number: sandboxNumber('5555') });
    const call = await waitForCall(t, other, talk.body.call_id);
    assert.equal(await credit(), before - 10, 'one started minute at CALL_CENTS_PER_MINUTE');
    const usage = await t.service.db.knex('usage_records').where({ workspace_id: other.workspaceId, kind: 'phone_call' });
    assert.deepEqual(
      usage.map((u) => [u.ref_id, u.cents, u.seconds]).sort(),
      [
        [busy.body.call_id, 0, 0],
        [call.call_id, 10, call.duration],
      ].sort(),
    );
  });
});

describe('the terminal write', () => {
  it("writes the call's ended status and end once, with the carrier outcome the record has, even one recorded after the finaliser read it", async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const { store, finaliser } = t.service.calls;
    const knex = t.service.db.knex;
    const ringing = async () =>
      (
        await store.insert({
          id: newId('call'),
          workspace_id: tn.workspaceId,
          agent_id: agentId,
          batch_id: null,
          direction: 'outbound',
          provider: 'provider_a',
          from_number: '+14155550100',
          to_number: sandboxNumber('0003'),
          status: 'ringing',
          call_sid: null,
          first_message: null,
          variables: {},
          webhook_url: null,
          instruction: 'Be brief.',
          analysis: null,
          recording_enabled: false,
          stream_token_hash: null,
          deadline_at: new Date(Date.now() + 600_000),
        })
      ).id;
    const events = async (id: string) =>
      (await knex('conversation_events').where({ conversation_id: id }).orderBy('seq')).map((e) => [e.type, e.data.status, e.data.reason ?? null]);
    // As the finaliser read it (no outcome), then finalised.
    const plain = await ringing();
    const done = await finaliser.finaliseClaimed((await store.claimFinalise(plain, 60_000))!);
    assert.equal(done?.status, 'failed');
    assert.deepEqual(await events(plain), [
      ['status', 'ringing', null],
      ['status', 'ended', null],
      ['end', 'failed', null],
    ]);
    // A carrier's busy recorded between the finaliser's claim and its terminal write: the events say what the record says.
    const late = await ringing();
    const claimed = (await store.claimFinalise(late, 60_000))!;
    await knex('calls').where({ id: late }).update({ carrier_outcome: 'busy' });
    const ended = await finaliser.finaliseClaimed(claimed);
    assert.equal(ended?.carrier_outcome, 'busy');
    assert.deepEqual(await events(late), [
      ['status', 'ringing', null],
      ['status', 'ended', 'busy'],
      ['end', 'failed', null],
    ]);
  });
});
