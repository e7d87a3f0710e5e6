/**
 * The sandbox voice service hears texts spoken as encoded audio (src/sandbox/spoken-text.ts), as the
 * sandbox carrier's simulated caller speaks them, through the real Gemini Live adapter: the input
 * transcript is the text and the model's rules apply to it (tool call by name, "what did I say",
 * goodbye -> end_conversation); real speech still gets the `[speech n.ns]` placeholder.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createLogger } from '../../src/log.js';
import { Upsampler8kTo16k, mulawToPcm16, pcm16ToMulaw } from '../../src/audio/pcm16.js';
import { createGeminiLiveService } from '../../src/voice/gemini-live.js';
import { startSandboxVoiceService, type SandboxVoiceService } from '../../src/sandbox/voice/server.js';
import { encodeSpokenText } from '../../src/sandbox/spoken-text.js';
import type { VoiceEvent, VoiceService, VoiceSession, VoiceSessionConfig } from '../../src/voice/types.js';
import { Recorder } from '../helpers/voice.js';

const FIXTURES = new URL('../fixtures/audio/', import.meta.url);
const fixture = (name: string) => readFileSync(new URL(name, FIXTURES));
const ROLE = 'a friendly receptionist for Acme Dental';

function agent(overrides: Partial<VoiceSessionConfig> = {}): VoiceSessionConfig {
  return {
    instruction: 'You are a friendly receptionist for Acme Dental. Book appointments for the Main Street clinic.',
    firstMessage: 'Hello, thanks for calling Acme Dental!',
    voiceId: null,
    language: null,
    languageCode: null,
    tools: [
      {
        name: 'lookup_order',
        description: 'Looks an order up',
        parameters: { type: 'object', properties: { order_id: { type: 'string' }, rush: { type: 'boolean' } }, required: ['order_id'] },
      },
    ],
    canEndConversation: true,
    source: 'phone',
    ...overrides,
  };
}

/** A caller's line as the carrier delivers it: 8 kHz, mu-law on the wire, upsampled to 16 kHz. */
function onTheLine(pcm8k: Buffer, leadSamples: number): Buffer {
  const line = Buffer.concat([Buffer.alloc(leadSamples * 2), pcm8k]);
  return new Upsampler8kTo16k().process(mulawToPcm16(pcm16ToMulaw(line)));
}

/** 20 ms frames (the last one may be short), sent faster than real time. */
function sendFrames(session: VoiceSession, pcm16k: Buffer): void {
  for (let i = 0; i < pcm16k.length; i += 640) session.sendAudio(pcm16k.subarray(i, Math.min(pcm16k.length, i + 640)));
}

/** Speaks `text` as encoded audio after an unaligned stretch of silence, then silence to end the turn. */
function speak(session: VoiceSession, text: string, leadSamples = 1237): void {
  sendFrames(session, onTheLine(encodeSpokenText(text), leadSamples));
  sendFrames(session, fixture('silence-1s.pcm16le-16k.raw'));
}

describe('sandbox voice service: texts spoken as encoded audio', () => {
  let sandbox: SandboxVoiceService;
  let service: VoiceService;
  const sessions: VoiceSession[] = [];
  const open = async (config: VoiceSessionConfig = agent()) => {
    const session = await service.open(config);
    sessions.push(session);
    const rec = new Recorder(session);
    await rec.next('turn_complete');
    return { session, rec };
  };

  before(async () => {
    sandbox = await startSandboxVoiceService({ msPerChar: 10, speed: 50 });
    service = createGeminiLiveService({
      url: sandbox.url,
      model: 'test-model',
      analysisModel: 'test-model',
      connectTimeoutMs: 2000,
      retryMax: 1,
      retryBaseMs: 20,
      retryMaxDelayMs: 40,
      log: createLogger('silent'),
    });
  });
  after(async () => {
    await Promise.all(sessions.map((s) => s.close()));
    await service.close();
    await sandbox.close();
  });

  it('transcribes the spoken text and answers it like a typed turn', async () => {
    const { session, rec } = await open();
    for (const [text, lead] of [
      ['I would like a cleaning next week', 1237],
      ['Zoë ünïcode ✓', 8001],
      ['My number is 555-0199, extension 12.', 3],
    ] as const) {
      const from = rec.events.length;
      speak(session, text, lead);
      const input = await rec.next('input_transcript', (e) => e.final, from);
      assert.equal(input.text, text);
      assert.equal(await rec.agentTurn(from), `As ${ROLE}, I heard: "${text}".`);
    }
  });

  it('calls a tool named in the spoken text, with arguments derived from it', async () => {
    const { session, rec } = await open();
    const from = rec.events.length;
    speak(session, 'Please use lookup_order for A-77.');
    const input = await rec.next('input_transcript', (e) => e.final, from);
    assert.equal(input.text, 'Please use lookup_order for A-77.');
    const call = await rec.next('tool_call', () => true, from);
    assert.equal(call.calls.length, 1);
    assert.equal(call.calls[0].name, 'lookup_order');
    assert.deepEqual(call.calls[0].args, { order_id: 'A-77', rush: true });
    const answer = rec.events.length;
    session.sendToolResponses([{ id: call.calls[0].id, name: 'lookup_order', response: { result: 'shipped on Monday' } }]);
    assert.equal(await rec.agentTurn(answer), 'lookup_order returned: shipped on Monday');
  });

  it('remembers what was said, and says exactly what it is asked to', async () => {
    const { session, rec } = await open();
    let from = rec.events.length;
    speak(session, 'My name is Ada');
    await rec.agentTurn(from);
    from = rec.events.length;
    speak(session, 'what did I say?');
    assert.equal(await rec.agentTurn(from), 'You said: "My name is Ada".');
    from = rec.events.length;
    speak(session, 'Please say exactly: "Your table is ready."');
    assert.equal(await rec.agentTurn(from), 'Your table is ready.');
  });

  it('ends the conversation after a spoken goodbye', async () => {
    const { session, rec } = await open();
    const from = rec.events.length;
    speak(session, 'That is all, goodbye!');
    assert.equal((await rec.next('input_transcript', (e) => e.final, from)).text, 'That is all, goodbye!');
    await rec.next('end_conversation', () => true, from);
    const farewell = rec.events
      .slice(from)
      .filter((e) => e.type === 'output_transcript')
      .pop();
    assert.deepEqual(farewell, { type: 'output_transcript', text: `Goodbye! Thank you for talking with ${ROLE}.` });
  });

  it('hears texts spoken back to back as one turn, up to 60 s of audio; a longer turn is speech', async () => {
    const { session, rec } = await open();
    const part = (n: number) => `Part ${n}: ${'blah '.repeat(140)}`.trim();
    const pause = Buffer.alloc(2 * 1600);
    const utterance = (parts: number) => Buffer.concat(Array.from({ length: parts }, (_, i) => [encodeSpokenText(part(i + 1)), pause]).flat());

    let from = rec.events.length;
    sendFrames(session, onTheLine(utterance(2), 77));
    sendFrames(session, fixture('silence-1s.pcm16le-16k.raw'));
    const two = await rec.next('input_transcript', (e) => e.final, from);
    assert.equal(two.text, `${part(1)} ${part(2)}`);
    await rec.agentTurn(from);

    from = rec.events.length;
    const long = onTheLine(utterance(3), 77);
    assert.ok(long.length / 32 > 62_000, `${long.length / 32} ms`);
    sendFrames(session, long);
    sendFrames(session, fixture('silence-1s.pcm16le-16k.raw'));
    const three = await rec.next('input_transcript', (e) => e.final, from);
    const m = /^\[speech (\d+\.\d)s\]$/.exec(three.text);
    assert.ok(m && Number(m[1]) > 60, three.text);
  });

  it('still hears real speech as speech', async () => {
    const { session, rec } = await open();
    let from = rec.events.length;
    sendFrames(session, onTheLine(mulawToPcm16(fixture('caller-question.ulaw-8k.raw')), 0));
    sendFrames(session, fixture('silence-1s.pcm16le-16k.raw'));
    const input = await rec.next('input_transcript', (e) => e.final, from);
    const m = /^\[speech (\d+\.\d)s\]$/.exec(input.text);
    assert.ok(m, input.text);
    assert.equal(await rec.agentTurn(from), `As ${ROLE}, I heard ${m[1]} seconds of speech.`);

    // A spoken text right after speech, in a turn of its own, is a text again.
    from = rec.events.length;
    sendFrames(session, fixture('caller-hello.pcm16le-16k.raw'));
    sendFrames(session, fixture('silence-1s.pcm16le-16k.raw'));
    speak(session, 'what did I say?', 411);
    const question = await rec.next('input_transcript', (e) => e.final && e.text === 'what did I say?', from);
    const at = rec.events.indexOf(question);
    const heard = rec.events.slice(from, at).filter((e) => e.type === 'input_transcript' && e.final);
    assert.ok(heard.length >= 1);
    const speech = heard[heard.length - 1] as Extract<VoiceEvent, { type: 'input_transcript' }>;
    assert.match(speech.text, /^\[speech \d+\.\ds\]$/);
    assert.equal(await rec.agentTurn(at), `You said: "${speech.text}".`);
  });
});
