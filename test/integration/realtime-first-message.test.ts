/**
 * A web session's first message is recorded and reported as the agent said it: with its placeholders
 * filled from the agent's defaults (the contract says "after variable substitution"); an agent with
 * none waits for the person to speak.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { connect, createAgent, fixture, mintSession, sessionRecord, type Client } from '../helpers/realtime.js';

let t: TestService;
let tn: Tenant;

before(async () => {
  t = await startTestService({ VOICE_SANDBOX_SPEED: '4', VOICE_SANDBOX_MS_PER_CHAR: '20' });
  tn = await tenant(t);
});

after(async () => {
  await t.close();
});

const record = (sessionId: unknown) => sessionRecord(t, tn, sessionId);

function sendAudio(c: Client, clip: Buffer): void {
  for (let i = 0; i < clip.length; i += 640) c.sendFrame('audio/pcm', clip.subarray(i, i + 640));
}

describe('web session first message', () => {
  it("is stored and read back with its placeholders filled from the agent's defaults and their own", async () => {
    const agentId = await createAgent(t, tn, {
      first_message: 'Hello {{visitor}}, welcome to {{clinic|Acme Dental}}!',
      variable_placeholders: { visitor: 'friend' },
    });
    const c = connect((await mintSession(t, tn, agentId, 'text')).ws_url);
    const started = await c.next('session_started');
    const first = await c.next('text');
    assert.equal(first.text, 'Hello friend, welcome to Acme Dental!');
    await c.next('turn_complete');
    await c.close();
    const saved = await record(started.session_id);
    assert.equal(saved.first_message, 'Hello friend, welcome to Acme Dental!');
    assert.equal(saved.first_message_delivered, true);
  });

  for (const none of [null, '']) {
    it(`an agent whose first message is ${JSON.stringify(none)} is silent until the person speaks, then answers (issue 34)`, async () => {
      const agentId = await createAgent(t, tn, { first_message: none });
      const c = connect((await mintSession(t, tn, agentId, 'voice')).ws_url);
      const started = await c.next('session_started');
      // A microphone sends silence before the person speaks: a second of it, then speech.
      sendAudio(c, fixture('audio/silence-1s.pcm16le-16k.raw'));
      sendAudio(c, fixture('audio/caller-hello.pcm16le-16k.raw'));
      sendAudio(c, fixture('audio/silence-1s.pcm16le-16k.raw'));
      const heard = await c.next((m) => m.type === 'transcript' && m.role === 'user' && m.final === true, 15_000);
      const reply = await c.next((m) => m.type === 'transcript' && m.role === 'model' && m.final === true, 15_000);
      await c.next('turn_complete');
      await c.close();
      const before = c.messages.slice(0, c.messages.indexOf(heard));
      assert.deepEqual(
        before.filter((m) => m.type !== 'session_started' && !(m.type === 'transcript' && m.role === 'user')),
        [],
        'the agent said nothing before the person spoke',
      );
      assert.match(String(reply.text), /^As the receptionist of Acme Dental, I heard \d+\.\d seconds of speech\.$/);
      const saved = await record(started.session_id);
      assert.deepEqual(
        saved.transcript.map((e: { role: string }) => e.role),
        ['user', 'model'],
      );
      assert.equal(saved.first_message, null);
      assert.equal(saved.first_message_delivered, false);
    });
  }
});
