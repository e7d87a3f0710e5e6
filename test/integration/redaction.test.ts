/**
 * Redaction (issue 36) through the real service, PostgreSQL, HTTP, the sandbox carriers and voice
 * service: an agent's `redaction` setting written and read back, invalid settings refused with 422
 * naming the field and nothing stored; a carrier call whose caller says a card number (and keys one
 * in) and whose agent repeats it, with the stored transcript, the webhooks (`call.completed`,
 * `call.transcript`), the live events and the recording redacted (the caller's and the agent's
 * utterances silence in their channels, the rest of the recording intact); the analysis target alone
 * (the extracted data redacted, the transcript kept whole); and a web session's record, live events
 * and `call.completed`.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { bearer, connect, createAgent, mintSession, waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { openSse } from '../helpers/sse.js';
import {
  assertSamplesAt,
  decodeWav,
  downloadRecording,
  downloadSessionRecording,
  fence,
  heldClock,
  loud,
  sendPcm,
  sessionRecord,
} from '../helpers/recordings.js';
import { encodeSpokenText } from '../../src/sandbox/spoken-text.js';
import { mulawToPcm16, Upsampler8kTo16k } from '../../src/audio/pcm16.js';
import { spokenText } from '../../src/sandbox/carriers/audio.js';

let t: TestService;
let tn: Tenant;
let hooks: Receiver;
/** Web sessions' recordings are placed by this clock: held and moved by the test, so where audio lands is exact. */
const rec = heldClock();

before(async () => {
  t = await startTestService({ ...FAST_CALLS, RECORDING_FLUSH_MS: '200' }, { recordingClock: rec.clock });
  tn = await tenant(t);
  hooks = await startReceiver();
  const res = await t.http
    .post('/api/v1/webhooks')
    .set(bearer(tn.apiKey))
    .send({ url: hooks.url, events: ['call.completed', 'call.transcript'] });
  assert.equal(res.status, 201, JSON.stringify(res.body));
});
after(async () => {
  await hooks.close();
  await t.close();
});

const CARD = '4111 1111 1111 1111';
const FULL = {
  entities: ['card_number', 'email'],
  custom_patterns: [{ name: 'order_id', pattern: 'ORD-[0-9]{6}' }],
  targets: ['transcript', 'webhooks', 'live_events', 'recordings'],
};
const bodiesFor = (id: string) => hooks.requests.map((q) => JSON.parse(q.rawBody.toString())).filter((b) => b.call_id === id || b.conversation_id === id);
const agentCount = async () => Number((await t.service.db.knex('agents').where({ workspace_id: tn.workspaceId }).count({ n: '*' }))[0].n);

describe('the redaction setting', () => {
  it('is stored as sent, defaults filled, and cleared with null', async () => {
    const agentId = await createAgent(t, tn, { redaction: { targets: ['transcript'], entities: ['us_ssn'], phone_country: 'GB' } });
    const got = await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey));
    assert.deepEqual(got.body.redaction, { entities: ['us_ssn'], custom_patterns: [], targets: ['transcript'], phone_country: 'GB' });
    const cleared = await t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send({ redaction: null });
    assert.equal(cleared.status, 200);
    assert.equal(cleared.body.redaction, null);
  });

  it('invalid settings are refused with 422 naming the field, and nothing is stored', async () => {
    const before = await agentCount();
    const cases: Array<[Record<string, unknown>, string, string | null]> = [
      [{ targets: ['transcript'], custom_patterns: [{ name: 'x', pattern: '(?<=a)b' }] }, 'redaction.custom_patterns[0].pattern', 'invalid_redaction_pattern'],
      [
        { targets: ['transcript'], custom_patterns: [{ name: 'x', pattern: '[a-z]{1,999}[0-9]{1,999}' }] },
        'redaction.custom_patterns[0].pattern',
        'redaction_pattern_too_complex',
      ],
      [
        {
          targets: ['transcript'],
          custom_patterns: [
            { name: 'x', pattern: 'a' },
            { name: 'x', pattern: 'b' },
          ],
        },
        'redaction.custom_patterns[1].name',
        'redaction_pattern_name_taken',
      ],
      [{ targets: ['transcript'], phone_country: 'XX' }, 'redaction.phone_country', 'invalid_redaction_country'],
      [{ targets: ['transcript'], entities: ['passport'] }, 'redaction.entities', null],
      [{ targets: [] }, 'redaction.targets', null],
      [{ entities: ['email'] }, 'redaction.targets', null],
    ];
    for (const [redaction, param, code] of cases) {
      const res = await t.http.post('/api/v1/agents').set(bearer(tn.apiKey)).send({ name: 'Bad', redaction });
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.ok(String(res.body.error.param).startsWith(param), `${res.body.error.param} names ${param}`);
      if (code) assert.equal(res.body.error.code, code);
    }
    assert.equal(await agentCount(), before, 'no agent was stored');
    const agentId = await createAgent(t, tn, { redaction: { targets: ['webhooks'], entities: ['email'] } });
    const patched = await t.http
      .patch(`/api/v1/agents/${agentId}`)
      .set(bearer(tn.apiKey))
      .send({ redaction: { targets: ['webhooks'], custom_patterns: [{ name: 'x', pattern: '\\1' }] } });
    assert.equal(patched.status, 422);
    assert.equal(patched.body.error.param, 'redaction.custom_patterns[0].pattern');
    const got = await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey));
    assert.deepEqual(got.body.redaction.entities, ['email'], 'the stored setting is unchanged');
  });
});

describe('a carrier call', () => {
  it('redacts the stored transcript, the webhooks, the live events and the recording; the rest is intact', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a', {
      instruction: 'You are the billing desk.',
      recording: { enabled: true },
      redaction: FULL,
    });
    const to = sandboxNumber('7301');
    const cardSaid = spokenText(`My card is ${CARD}.`);
    const hello = spokenText('Hello, this is Sam.');
    t.service.sandbox.carriers!.server.setScript(to, [
      { waitForAgent: true },
      { play: cardSaid, label: 'card' },
      { waitForAgent: true },
      { play: hello, label: 'hello' },
      { waitForAgent: true },
      { pressDigits: '4111111111111111#', gapMs: 40 },
      { waitForAgent: true },
      { say: 'Thanks, goodbye.' },
      { waitForAgent: true, startWithinMs: 2000 },
      { hangup: true },
    ]);
    const placed = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const call = await waitForCall(t, tn, placed.body.call_id);
    assert.equal(call.status, 'completed');

    // The stored transcript: the caller's words, the agent repeating them and the keys, redacted.
    const texts = call.transcript.map((e: { role: string; text: string }) => `${e.role}: ${e.text}`);
    assert.ok(texts.includes('user: My card is [REDACTED:card_number].'), texts.join('\n'));
    assert.ok(
      texts.some((x: string) => x.startsWith('model: ') && x.includes('[REDACTED:card_number]')),
      texts.join('\n'),
    );
    const keys = call.transcript.find((e: { dtmf?: string }) => e.dtmf);
    assert.deepEqual([keys.text, keys.dtmf], ['[REDACTED:card_number]#', '[REDACTED:card_number]#']);
    assert.ok(texts.includes('user: Hello, this is Sam.'), 'what has nothing to redact is kept as said');
    const raw = /4111/;
    assert.doesNotMatch(JSON.stringify(call), raw);
    const stored = await t.service.db.knex('calls').where({ id: call.call_id }).first();
    assert.doesNotMatch(JSON.stringify(stored.transcript), raw);

    // Webhooks: call.completed and every call.transcript.
    await waitFor(async () => bodiesFor(call.call_id).some((b) => b.event === 'call.completed'), 10_000, 'call.completed');
    const bodies = bodiesFor(call.call_id);
    assert.ok(bodies.filter((b) => b.event === 'call.transcript').length >= 4);
    for (const b of bodies) assert.doesNotMatch(JSON.stringify(b), raw, `${b.event} carries no card number`);
    assert.ok(bodies.some((b) => b.event === 'call.transcript' && b.text === 'My card is [REDACTED:card_number].'));

    // Live events: finals redacted, no partial streamed.
    const sse = await openSse(`${t.url}/api/v1/calls/${call.call_id}/events`, bearer(tn.apiKey));
    await sse.ended;
    assert.doesNotMatch(JSON.stringify(sse.messages), raw);
    assert.equal(sse.messages.filter((m) => m.event === 'transcript' && m.data.final === false).length, 0);
    assert.ok(sse.messages.some((m) => m.event === 'dtmf' && m.data.keys === '[REDACTED:card_number]#'));
    assert.ok(sse.messages.some((m) => m.event === 'transcript' && m.data.text === 'My card is [REDACTED:card_number].'));

    // The recording: the caller's card utterance is silence in the left channel, the agent's answer
    // repeating it silence in the right; the caller's hello and the agent's other lines as they were.
    const sim = t.service.sandbox.carriers!.server.calls().find((c) => c.callSid === call.call_sid)!;
    const at = (label: string) => sim.clips.find((c) => c.label === label)!.streamMs * 8;
    const wav = decodeWav((await downloadRecording(t, tn, call.call_id)).body as Buffer);
    const cardAt = at('card');
    const cardEnd = cardAt + cardSaid.length;
    const helloAt = at('hello');
    assert.ok(cardEnd < helloAt);
    assert.ok(cardAt > 0 && cardEnd <= wav.left.length);
    for (let i = cardAt; i < cardEnd; i++) if (wav.left[i] !== 0) assert.fail(`left sample ${i} of the card utterance is ${wav.left[i]}, not silence`);
    for (let i = cardEnd; i < helloAt; i++) if (wav.right[i] !== 0) assert.fail(`right sample ${i} of the agent's answer is ${wav.right[i]}, not silence`);
    assertSamplesAt(wav.left, mulawToPcm16(hello), helloAt, "the caller's hello");
    assert.ok(loud(wav.right, 0, cardAt) > 8000 * 0.3, 'the first message is in the right channel');
    assert.ok(loud(wav.right, helloAt + hello.length, helloAt + hello.length + 8000 * 5) > 0, 'the answer to hello is in the right channel');
  });

  it('analysis alone: the data extracted is redacted, the transcript kept as said', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_b', {
      redaction: { entities: ['email'], targets: ['analysis'] },
      analysis: { schema: { type: 'object', properties: { email: { type: 'string' } } } },
    });
    const to = sandboxNumber('7302');
    t.service.sandbox.carriers!.server.setScript(to, [
      { waitForAgent: true },
      { say: 'My email is ada@example.com.' },
      { waitForAgent: true },
      { hangup: true },
    ]);
    const placed = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    const call = await waitForCall(t, tn, placed.body.call_id);
    assert.deepEqual(call.data, { email: '[REDACTED:email]' });
    assert.ok(call.transcript.some((e: { text: string }) => e.text === 'My email is ada@example.com.'));
    await waitFor(async () => bodiesFor(call.call_id).find((b) => b.event === 'call.completed'), 10_000, 'call.completed');
    assert.deepEqual(bodiesFor(call.call_id).find((b) => b.event === 'call.completed').data, { email: '[REDACTED:email]' });
  });
});

describe('a web session', () => {
  it('redacts its record, live events, call.completed and analysis', async () => {
    const agentId = await createAgent(t, tn, {
      instruction: 'You are the order desk.',
      redaction: {
        entities: ['us_ssn'],
        custom_patterns: [{ name: 'order_id', pattern: 'ORD-[0-9]{6}' }],
        targets: ['transcript', 'webhooks', 'live_events', 'analysis'],
      },
      analysis: { schema: { type: 'object', properties: { order: { type: 'string' } } } },
    });
    const c = connect((await mintSession(t, tn, agentId, 'text')).ws_url);
    const sessionId = String((await c.next('session_started')).session_id);
    const sse = await openSse(`${t.url}/api/v1/realtime/conversations/${sessionId}/events`, bearer(tn.apiKey));
    await c.next('turn_complete');
    const greeted = c.messages.length;
    c.sendFrame('text/plain', Buffer.from('My order is ORD-123456; my SSN is 123-45-6789.').toString('base64'));
    await c.next('turn_complete');
    // The person sees the agent's answer as it was said: redaction is of what is kept and sent.
    const reply = c.messages
      .slice(greeted)
      .filter((m) => m.type === 'text')
      .map((m) => m.text)
      .join('');
    assert.match(reply, /ORD-123456/);
    await c.close();
    await sse.ended;
    const raw = /ORD-123456|123-45-6789/;
    assert.doesNotMatch(JSON.stringify(sse.messages), raw);
    assert.ok(sse.messages.some((m) => m.event === 'transcript' && m.data.text === 'My order is [REDACTED:order_id]; my SSN is [REDACTED:us_ssn].'));
    const record = await sessionRecord(t, tn, sessionId);
    assert.doesNotMatch(JSON.stringify(record), raw);
    assert.ok(
      record.transcript.some(
        (e: { role: string; text: string }) => e.role === 'user' && e.text === 'My order is [REDACTED:order_id]; my SSN is [REDACTED:us_ssn].',
      ),
    );
    assert.ok(record.transcript.some((e: { role: string; text: string }) => e.role === 'model' && e.text.includes('[REDACTED:order_id]')));
    await waitFor(async () => bodiesFor(sessionId).find((b) => b.event === 'call.completed'), 10_000, 'call.completed');
    assert.doesNotMatch(JSON.stringify(bodiesFor(sessionId)), raw);
  });
});

describe('a web voice session', () => {
  it("is recorded with the user's card number and the agent repeating it as silence, the rest as sent", async () => {
    const agentId = await createAgent(t, tn, {
      instruction: 'You are the billing desk.',
      recording: { enabled: true },
      redaction: { entities: ['card_number'], targets: ['recordings'] },
    });
    // What a browser would send: the sandbox's spoken text (8 kHz) at the microphone's 16 kHz.
    const card = new Upsampler8kTo16k().process(encodeSpokenText(`My card is ${CARD}.`));
    const hello = new Upsampler8kTo16k().process(encodeSpokenText('Hello, this is Sam.'));
    const ms = (pcm: Buffer) => pcm.length / 32;
    /** Resolves once the agent's n-th answer (the sandbox's `I heard: "..."`) has been sent in full. */
    const answered = (c: ReturnType<typeof connect>, n: number) =>
      waitFor(
        async () => {
          const finals = c.messages.flatMap((m, i) =>
            m.type === 'transcript' && m.role === 'model' && m.final === true && /I heard/.test(String(m.text)) ? [i] : [],
          );
          return finals.length >= n && c.messages.slice(finals[n - 1]).some((m) => m.type === 'turn_complete');
        },
        15_000,
        `answer ${n}`,
      );
    let sessionId: string;
    const cardAt = 1000;
    let helloAt: number;
    rec.hold();
    try {
      const c = connect((await mintSession(t, tn, agentId, 'voice')).ws_url);
      sessionId = String((await c.next('session_started')).session_id);
      await c.next('turn_complete');
      rec.move(cardAt);
      sendPcm(c, card);
      await fence(c);
      rec.move(ms(card));
      await answered(c, 1);
      rec.move(4000);
      helloAt = cardAt + ms(card) + 4000;
      sendPcm(c, hello);
      await fence(c);
      rec.move(ms(hello));
      await answered(c, 2);
      rec.move(4000);
      await c.close();
      await sessionRecord(t, tn, sessionId);
    } finally {
      rec.release();
    }
    const wav = decodeWav((await downloadSessionRecording(t, tn, sessionId)).body as Buffer);
    const at = (msAt: number) => msAt * 16;
    const cardEnd = at(cardAt) + card.length / 2;
    for (let i = at(cardAt); i < cardEnd; i++) if (wav.left[i] !== 0) assert.fail(`left sample ${i} of the card utterance is ${wav.left[i]}`);
    // The agent's answer repeating it played from the end of the utterance until the user spoke again.
    for (let i = cardEnd; i < at(helloAt); i++) if (wav.right[i] !== 0) assert.fail(`right sample ${i} of the answer is ${wav.right[i]}`);
    assertSamplesAt(wav.left, hello, at(helloAt), "the user's hello");
    assert.ok(loud(wav.right, 0, at(cardAt)) > 0, 'the first message is in the right channel');
    assert.ok(loud(wav.right, at(helloAt) + hello.length / 2, wav.right.length) > 0, 'the answer to hello is in the right channel');
  });
});
