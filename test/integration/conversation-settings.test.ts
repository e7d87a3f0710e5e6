/**
 * An agent's conversation settings (issue 34), end to end: written, read back and refused through the
 * API (nothing stored); overridden by a call, a batch and a web session; and honoured in conversations
 * on both carriers and in web sessions, through the sandbox voice service's documented rules
 * (src/sandbox/voice/turn-rules.ts): the silence that ends a turn, interruptions never and not during
 * the first message, the idle ladder (reminders, goodbye, `idle_timeout`, `idle` live events) and the
 * maximum duration (`time_limit`).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, connect, createAgent, fixture, sessionRecord, tokenCount, waitFor, type Client } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall, type Provider } from '../helpers/calls.js';
import { createBatch, sandboxNumbers } from '../helpers/batches.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';

let t: TestService;
const sandbox = (): SandboxCarriers => t.service.sandbox.carriers!.server;
const knex = () => t.service.db.knex;

before(async () => {
  t = await startTestService(FAST_CALLS);
});

after(async () => {
  await t.close();
});

const LONG_GREETING = 'Hello! This is Acme Dental, calling about your appointment next week with doctor Smith at our Main Street clinic.';
const answerTo = (text: string) => `As the receptionist of Acme Dental, I heard: ${JSON.stringify(text)}.`;
type Entry = { role: string; text: string };
const said = (call: Record<string, any>) => (call.transcript as Entry[]).map((e) => [e.role, e.text]);
const userTexts = (call: Record<string, any>) => (call.transcript as Entry[]).filter((e) => e.role === 'user').map((e) => e.text);
const simOf = (call: Record<string, any>) =>
  sandbox()
    .calls()
    .find((c) => c.callSid === call.call_sid)!;
const idleEvents = async (conversationId: string) =>
  (await knex()('conversation_events').where({ conversation_id: conversationId, type: 'idle' }).orderBy('seq')).map((e) => [
    e.data.action,
    e.data.count,
    e.data.text,
  ]);

type Script = Parameters<SandboxCarriers['setScript']>[1];

/**
 * A call from an agent with `agent` (on top of createPhoneAgent's) to a sandbox person following
 * `script`, the call body given `call` besides; the call once finished.
 */
async function callWith(s: TestService, ten: Tenant, provider: Provider, agent: Record<string, unknown>, script: Script, call: Record<string, unknown> = {}) {
  const agentId = await createPhoneAgent(s, ten, provider, agent);
  const to = sandboxNumber('6110');
  s.service.sandbox.carriers!.server.setScript(to, script);
  const res = await placeCall(s, ten, { agent_id: agentId, to_number: to, ...call });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return waitForCall(s, ten, res.body.call_id);
}

const SETTINGS = {
  turn_detection: { start_sensitivity: 'high', end_sensitivity: 'low', silence_ms: 700, prefix_padding_ms: 40 },
  interruptions: 'after_first_message',
  idle: { idle_ms: 8000, reminders: ['Are you still there?'], max_reminders: 2, goodbye_message: 'Goodbye for now.' },
  max_duration_seconds: 900,
};

async function session(tn: Tenant, agentId: string, source: string, conversation?: unknown): Promise<Client> {
  const res = await t.http
    .post('/api/v1/realtime/sessions')
    .set(bearer(tn.apiKey))
    .send({ agent_id: agentId, user_id: 'visitor-1', source, ...(conversation === undefined ? {} : { conversation }) });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return connect(res.body.ws_url);
}

const record = (tn: Tenant, sessionId: unknown) => sessionRecord(t, tn, sessionId, 10_000);

// The groups below run at once, each in a workspace of its own; each waits on its calls and
// sessions, not on the machine. The cases within a group run in order.
describe('conversation settings', { concurrency: true }, () => {
  describe('conversation settings through the API', { concurrency: 1 }, () => {
    let tn: Tenant;
    before(async () => {
      tn = await tenant(t);
    });
    it('an agent stores them, every field shown; a PATCH replaces them as a whole; null goes back to every default', async () => {
      const created = await t.http.post('/api/v1/agents').set(bearer(tn.apiKey)).send({ name: 'Settings', conversation: SETTINGS });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      assert.deepEqual(created.body.conversation, SETTINGS);
      const id = created.body.agent_id;
      const patched = await t.http
        .patch(`/api/v1/agents/${id}`)
        .set(bearer(tn.apiKey))
        .send({ conversation: { interruptions: 'never', idle: { idle_ms: 5000, reminders: ['Hello?', 'Still with me?'] } } });
      assert.equal(patched.status, 200, JSON.stringify(patched.body));
      assert.deepEqual(patched.body.conversation, {
        turn_detection: null,
        interruptions: 'never',
        idle: { idle_ms: 5000, reminders: ['Hello?', 'Still with me?'], max_reminders: 2, goodbye_message: null },
        max_duration_seconds: null,
      });
      const cleared = await t.http.patch(`/api/v1/agents/${id}`).set(bearer(tn.apiKey)).send({ conversation: null });
      assert.equal(cleared.body.conversation, null);
      const plain = await t.http.post('/api/v1/agents').set(bearer(tn.apiKey)).send({ name: 'Plain' });
      assert.equal(plain.body.conversation, null);
    });

    it('refuses every out-of-bounds or unknown setting with 422 naming the field; nothing is stored or changed', async () => {
      const cases: Array<[unknown, string, string | null]> = [
        ['fast', 'conversation', null],
        [{ pace: 'fast' }, 'conversation', null],
        [{ interruptions: 'sometimes' }, 'conversation.interruptions', null],
        [{ turn_detection: { start_sensitivity: 'medium' } }, 'conversation.turn_detection.start_sensitivity', null],
        [{ turn_detection: { end_sensitivity: 'medium' } }, 'conversation.turn_detection.end_sensitivity', null],
        [{ turn_detection: { silence_ms: 99 } }, 'conversation.turn_detection.silence_ms', null],
        [{ turn_detection: { silence_ms: 5001 } }, 'conversation.turn_detection.silence_ms', null],
        [{ turn_detection: { silence_ms: 250.5 } }, 'conversation.turn_detection.silence_ms', null],
        [{ turn_detection: { prefix_padding_ms: -1 } }, 'conversation.turn_detection.prefix_padding_ms', null],
        [{ turn_detection: { prefix_padding_ms: 2001 } }, 'conversation.turn_detection.prefix_padding_ms', null],
        [{ turn_detection: { disabled: true } }, 'conversation.turn_detection', null],
        [{ idle: { reminders: ['Hello?'] } }, 'conversation.idle', null],
        [{ idle: { idle_ms: 999 } }, 'conversation.idle.idle_ms', null],
        [{ idle: { idle_ms: 600_001 } }, 'conversation.idle.idle_ms', null],
        [{ idle: { idle_ms: 2000, reminders: Array.from({ length: 11 }, () => 'Hello?') } }, 'conversation.idle.reminders', null],
        [{ idle: { idle_ms: 2000, reminders: [''] } }, 'conversation.idle.reminders', null],
        [{ idle: { idle_ms: 2000, reminders: ['x'.repeat(501)] } }, 'conversation.idle.reminders', null],
        [{ idle: { idle_ms: 2000, reminders: ['Hello?'], max_reminders: 11 } }, 'conversation.idle.max_reminders', null],
        [{ idle: { idle_ms: 2000, max_reminders: 2 } }, 'conversation.idle.reminders', 'invalid_value'],
        [{ idle: { idle_ms: 2000, goodbye_message: '' } }, 'conversation.idle.goodbye_message', null],
        [{ idle: { idle_ms: 2000, goodbye_message: 'x'.repeat(501) } }, 'conversation.idle.goodbye_message', null],
        [{ max_duration_seconds: 9 }, 'conversation.max_duration_seconds', null],
        [{ max_duration_seconds: 14_401 }, 'conversation.max_duration_seconds', null],
        [{ max_duration_seconds: 60.5 }, 'conversation.max_duration_seconds', null],
      ];
      const agents = async () => Number((await knex()('agents').where({ workspace_id: tn.workspaceId }).count<{ count: string }[]>('* as count'))[0].count);
      const existing = await createAgent(t, tn, { conversation: { interruptions: 'never' } });
      const count = await agents();
      for (const [conversation, param, code] of cases) {
        const what = JSON.stringify(conversation);
        for (const res of [
          await t.http.post('/api/v1/agents').set(bearer(tn.apiKey)).send({ name: 'Bad', conversation }),
          await t.http.patch(`/api/v1/agents/${existing}`).set(bearer(tn.apiKey)).send({ conversation }),
        ]) {
          assert.equal(res.status, 422, `${what}: ${JSON.stringify(res.body)}`);
          assert.ok(String(res.body.error.param).startsWith(param), `${what}: ${res.body.error.param} names ${param}`);
          if (code) assert.equal(res.body.error.code, code, what);
        }
      }
      assert.equal(await agents(), count, 'no agent was stored');
      const got = await t.http.get(`/api/v1/agents/${existing}`).set(bearer(tn.apiKey));
      assert.equal(got.body.conversation.interruptions, 'never', 'the stored setting is unchanged');
    });

    it('a call, a batch and a web session refuse a bad override with 422 naming the field; nothing is stored', async () => {
      const agentId = await createPhoneAgent(t, tn, 'provider_a');
      const calls = async () => Number((await knex()('calls').where({ workspace_id: tn.workspaceId }).count<{ count: string }[]>('* as count'))[0].count);
      const batches = async () => Number((await knex()('batches').where({ workspace_id: tn.workspaceId }).count<{ count: string }[]>('* as count'))[0].count);
      const before = [await calls(), await batches(), await tokenCount(t, tn.workspaceId)];
      for (const [conversation, param] of [
        [{ max_duration_seconds: 5 }, 'conversation.max_duration_seconds'],
        [{ idle: { idle_ms: 2000, max_reminders: 1 } }, 'conversation.idle.reminders'],
      ] as const) {
        const call = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('6101'), conversation });
        const batch = await createBatch(t, tn, { agent_id: agentId, name: 'Bad', recipients: [{ to_number: sandboxNumbers('6102', 1)[0] }], conversation });
        const session = await t.http
          .post('/api/v1/realtime/sessions')
          .set(bearer(tn.apiKey))
          .send({ agent_id: agentId, user_id: 'visitor-1', source: 'voice', conversation });
        for (const res of [call, batch, session]) {
          assert.equal(res.status, 422, JSON.stringify(res.body));
          // A batch's 422 is list-shaped (`detail[].loc`) when the contract refuses it.
          const named = res.body.error?.param ?? (res.body.detail?.[0]?.loc as string[] | undefined)?.slice(1).join('.');
          assert.ok(String(named).startsWith(param), JSON.stringify(res.body));
        }
      }
      assert.deepEqual([await calls(), await batches(), await tokenCount(t, tn.workspaceId)], before, 'nothing was stored');
    });

    it("a call runs with the agent's settings overridden by its own, field by field; a batch's calls with the batch's", async () => {
      const agentId = await createPhoneAgent(t, tn, 'provider_a', { conversation: SETTINGS });
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('6103'), conversation: { interruptions: 'never', idle: null } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.deepEqual(res.body.conversation, { ...SETTINGS, interruptions: 'never', idle: null }, 'the call shows what it runs with');
      const row = await knex()('calls').where({ id: res.body.call_id }).first();
      assert.deepEqual(row.conversation, res.body.conversation);
      await t.http.post(`/api/v1/calls/${res.body.call_id}/hangup`).set(bearer(tn.apiKey));
      const batch = await createBatch(t, tn, {
        agent_id: agentId,
        name: 'Settings',
        recipients: [{ to_number: sandboxNumbers('6104', 1, 800)[0] }],
        conversation: { max_duration_seconds: 60 },
      });
      assert.equal(batch.status, 201, JSON.stringify(batch.body));
      const batchCall = await waitFor(async () => await knex()('calls').where({ batch_id: batch.body.batch_id }).first(), 10_000, "the batch's call");
      assert.deepEqual(batchCall.conversation, { ...SETTINGS, max_duration_seconds: 60 });
      await t.http.post(`/api/v1/batches/${batch.body.batch_id}/cancel`).set(bearer(tn.apiKey));
      await t.http.post(`/api/v1/calls/${batchCall.id}/hangup`).set(bearer(tn.apiKey));
    });
  });

  for (const provider of ['provider_a', 'provider_b'] as Provider[]) {
    describe(`${provider}: conversation settings in a call`, { concurrency: 1 }, () => {
      let tn: Tenant;
      before(async () => {
        tn = await tenant(t);
      });
      it('interruptions never: the caller talking over the greeting does not cut it; they are answered after it', async () => {
        const call = await callWith(t, tn, provider, { first_message: LONG_GREETING, conversation: { interruptions: 'never' } }, [
          { sayWhileAgentSpeaks: 'Sorry to interrupt, when do you open?' },
          { waitForAgent: true },
          { waitForAgent: true, startWithinMs: 3000 },
          { hangup: true },
        ]);
        assert.equal(call.status, 'completed', JSON.stringify(call));
        assert.equal(call.interruption_count, 0);
        assert.equal(simOf(call).clears, 0, 'the carrier never told to drop agent audio');
        assert.equal(call.first_message_delivered, true);
        assert.deepEqual(said(call), [
          ['model', LONG_GREETING],
          ['user', 'Sorry to interrupt, when do you open?'],
          ['model', answerTo('Sorry to interrupt, when do you open?')],
        ]);
      });

      it('interruptions after_first_message: speech over the greeting is not heard; a later reply can be interrupted', async () => {
        const call = await callWith(t, tn, provider, { first_message: LONG_GREETING, conversation: { interruptions: 'after_first_message' } }, [
          { sayWhileAgentSpeaks: 'Sorry to interrupt, when do you open?' },
          { waitForAgent: true },
          { pause: 600 },
          { say: 'Tell me everything about your clinic.' },
          { sayWhileAgentSpeaks: 'Stop, please.' },
          { waitForAgent: true },
          { hangup: true },
        ]);
        assert.equal(call.status, 'completed', JSON.stringify(call));
        assert.equal(call.first_message_delivered, true, 'the greeting played to its end');
        assert.deepEqual(userTexts(call), ['Tell me everything about your clinic.', 'Stop, please.'], JSON.stringify(call.transcript));
        assert.equal(call.interruption_count, 1, 'the reply after the greeting was interrupted');
        assert.ok(simOf(call).clears >= 1);
        assert.deepEqual(said(call).at(-1), ['model', answerTo('Stop, please.')]);
      });

      for (const [silenceMs, turns] of [
        [150, ['One.', 'Two.']],
        [2000, 1],
      ] as const) {
        it(`turn detection: silence_ms ${silenceMs} makes "One." <400 ms> "Two." ${typeof turns === 'number' ? 'one turn' : 'two turns'}`, async () => {
          const call = await callWith(t, tn, provider, { conversation: { turn_detection: { silence_ms: silenceMs } } }, [
            { waitForAgent: true },
            { say: 'One.' },
            { pause: 400 },
            { say: 'Two.' },
            { waitForAgent: true },
            { waitForAgent: true, startWithinMs: 2000 },
            { hangup: true },
          ]);
          assert.equal(call.status, 'completed', JSON.stringify(call));
          if (typeof turns === 'number') assert.equal(userTexts(call).length, turns, JSON.stringify(call.transcript));
          else assert.deepEqual(userTexts(call), turns);
        });
      }

      it('the idle ladder: reminders in order, then the goodbye and a hang-up with end_reason idle_timeout; each step a live idle event', async () => {
        const idle = { idle_ms: 1000, reminders: ['Are you still there?', 'Hello, can you hear me?'], goodbye_message: 'I will let you go now. Goodbye!' };
        const call = await callWith(t, tn, provider, { conversation: { idle } }, [{ waitForAgent: true }, { pause: 60_000 }]);
        assert.deepEqual([call.status, call.end_reason], ['completed', 'idle_timeout'], JSON.stringify(call));
        assert.deepEqual(said(call), [
          ['model', 'Hello! This is Acme Dental.'],
          ['model', 'Are you still there?'],
          ['model', 'Hello, can you hear me?'],
          ['model', 'I will let you go now. Goodbye!'],
        ]);
        assert.deepEqual(await idleEvents(call.call_id), [
          ['reminder', 1, 'Are you still there?'],
          ['reminder', 2, 'Hello, can you hear me?'],
          ['hangup', 2, 'I will let you go now. Goodbye!'],
        ]);
        assert.ok(simOf(call).agentAudioMs > 0);
      });
    });
  }

  describe('conversation settings: limits of a call', { concurrency: 1 }, () => {
    let tn: Tenant;
    before(async () => {
      tn = await tenant(t);
    });
    it("a call's own max_duration_seconds hangs it up with time_limit", async () => {
      const call = await callWith(t, tn, 'provider_a', {}, [{ waitForAgent: true }, { pause: 60_000 }], { conversation: { max_duration_seconds: 10 } });
      assert.deepEqual([call.status, call.end_reason], ['completed', 'time_limit'], JSON.stringify(call));
      assert.ok(call.duration <= 12, `duration ${call.duration}`);
    });

    it('without idle settings the deployment silence timeout still ends a call: one idle hangup event, no text, silence_timeout', async () => {
      const quiet = await startTestService({ ...FAST_CALLS, CALL_SILENCE_TIMEOUT_MS: '1500' });
      try {
        const call = await callWith(quiet, await tenant(quiet), 'provider_b', {}, [{ waitForAgent: true }, { pause: 30_000 }]);
        assert.equal(call.end_reason, 'silence_timeout');
        const events = await quiet.service.db.knex('conversation_events').where({ conversation_id: call.call_id, type: 'idle' });
        assert.deepEqual(
          events.map((e) => [e.data.action, e.data.count, e.data.text]),
          [['hangup', 0, null]],
        );
      } finally {
        await quiet.close();
      }
    });
  });

  describe('conversation settings in a web session', { concurrency: 1 }, () => {
    let tn: Tenant;
    before(async () => {
      tn = await tenant(t);
    });
    it("the session's idle ladder: reminder, goodbye, session_ended idle_timeout and the server's close", async () => {
      const agentId = await createAgent(t, tn);
      const c = await session(tn, agentId, 'text', { idle: { idle_ms: 1000, reminders: ['Are you still there?'], goodbye_message: 'Goodbye for now.' } });
      const started = await c.next('session_started');
      const ended = await c.next('session_ended', 15_000);
      assert.equal(ended.reason, 'idle_timeout');
      assert.equal((await c.closed).code, 1000);
      assert.deepEqual(
        c.messages.filter((m) => m.type === 'text').map((m) => m.text),
        ['Hello! How can I help you today?', 'Are you still there?', 'Goodbye for now.'],
      );
      const saved = await record(tn, started.session_id);
      assert.equal(saved.end_reason, 'idle_timeout');
      assert.deepEqual(
        saved.transcript.map((e: Entry) => e.text),
        ['Hello! How can I help you today?', 'Are you still there?', 'Goodbye for now.'],
      );
      assert.deepEqual(await idleEvents(String(started.session_id)), [
        ['reminder', 1, 'Are you still there?'],
        ['hangup', 1, 'Goodbye for now.'],
      ]);
    });

    it('max_duration_seconds ends the session: session_ended time_limit, closed with 1000, end_reason time_limit', async () => {
      const agentId = await createAgent(t, tn, { conversation: { max_duration_seconds: 10 } });
      const c = await session(tn, agentId, 'text');
      const started = await c.next('session_started');
      assert.equal((await c.next('session_ended', 15_000)).reason, 'time_limit');
      assert.equal((await c.closed).code, 1000);
      assert.equal((await record(tn, started.session_id)).end_reason, 'time_limit');
    });

    it('interruptions never: speech over the greeting does not interrupt it and is answered after it', async () => {
      const agentId = await createAgent(t, tn, { first_message: LONG_GREETING, conversation: { interruptions: 'never' } });
      const c = await session(tn, agentId, 'voice');
      const started = await c.next('session_started');
      await c.next('audio');
      for (const clip of [fixture('audio/caller-hello.pcm16le-16k.raw'), fixture('audio/silence-1s.pcm16le-16k.raw')]) {
        for (let i = 0; i < clip.length; i += 640) c.sendFrame('audio/pcm', clip.subarray(i, i + 640));
      }
      const finals = () => c.messages.filter((m) => m.type === 'transcript' && m.final === true && m.role === 'model');
      await waitFor(async () => finals().length >= 2, 15_000, 'the answer after the greeting');
      await c.next('turn_complete');
      await c.close();
      assert.equal(
        c.messages.some((m) => m.type === 'interrupted'),
        false,
      );
      assert.equal(finals()[0].text, LONG_GREETING);
      assert.match(String(finals()[1].text), /^As the receptionist of Acme Dental, I heard \d+\.\d seconds of speech\.$/);
      const saved = await record(tn, started.session_id);
      assert.equal(saved.interruption_count, 0);
      assert.equal(saved.first_message_delivered, true);
    });
  });
});
