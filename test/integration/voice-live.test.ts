/**
 * The Gemini Live adapter against the sandbox voice service, over real sockets: first message, text and audio
 * turns, tools, end of conversation, barge-in, goAway resumption, unavailability and refused starts.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { Writable } from 'node:stream';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { createVoiceService, type VoiceService } from '../../src/voice/index.js';
import { createGeminiLiveService } from '../../src/voice/gemini-live.js';
import { startSandboxVoiceService, type SandboxVoiceService } from '../../src/sandbox/voice/server.js';
import { analyzeTranscript } from '../../src/voice/analysis.js';
import { VoiceModelRefusedError, type VoiceEvent, type VoiceSession, type VoiceSessionConfig } from '../../src/voice/types.js';
import { REFUSED_MODEL } from '../../src/sandbox/voice/connection.js';
import { Recorder } from '../helpers/voice.js';

const FIXTURES = new URL('../fixtures/audio/', import.meta.url);
const fixture = (name: string) => readFileSync(new URL(name, FIXTURES));
const quietLog = createLogger('silent');

const FAST_ENV = {
  VOICE_SANDBOX_MS_PER_CHAR: '10',
  VOICE_SANDBOX_SPEED: '50',
  VOICE_RETRY_MAX: '2',
  VOICE_RETRY_BASE_MS: '20',
  VOICE_RETRY_MAX_DELAY_MS: '50',
  VOICE_CONNECT_TIMEOUT_MS: '2000',
};

function agent(overrides: Partial<VoiceSessionConfig> = {}): VoiceSessionConfig {
  return {
    instruction: 'You are a friendly receptionist for Acme Dental. Book appointments for the Main Street clinic.',
    firstMessage: 'Hello, thanks for calling Acme Dental!',
    voiceId: null,
    language: null,
    languageCode: null,
    tools: [],
    canEndConversation: false,
    source: 'voice',
    ...overrides,
  };
}

function sendFrames(session: VoiceSession, pcm: Buffer): void {
  for (let i = 0; i + 640 <= pcm.length; i += 640) session.sendAudio(pcm.subarray(i, i + 640));
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

describe('voice service: Gemini Live adapter with the sandbox voice service', () => {
  let voice: VoiceService;
  let sandbox: SandboxVoiceService;
  const sessions: VoiceSession[] = [];
  const open = async (config: VoiceSessionConfig) => {
    const s = await voice.open(config);
    sessions.push(s);
    return { session: s, rec: new Recorder(s) };
  };

  before(async () => {
    const config = loadConfig(FAST_ENV);
    sandbox = await startSandboxVoiceService({
      endOfTurnMs: config.VOICE_SANDBOX_END_OF_TURN_MS,
      msPerChar: config.VOICE_SANDBOX_MS_PER_CHAR,
      speed: config.VOICE_SANDBOX_SPEED,
    });
    voice = createVoiceService(config, { url: sandbox.url, sandbox: true }, quietLog);
  });
  after(async () => {
    await Promise.all(sessions.map((s) => s.close()));
    await voice.close();
    await sandbox.close();
  });

  it('greets with the first message in 20 ms PCM16 24 kHz frames and its transcript', async () => {
    const { rec } = await open(agent());
    assert.equal(await rec.agentTurn(0), 'Hello, thanks for calling Acme Dental!');
    const audio = rec.events.filter((e): e is Extract<VoiceEvent, { type: 'audio' }> => e.type === 'audio');
    assert.ok(audio.length >= 5);
    for (const a of audio) assert.equal(a.pcm.length, 960);
    assert.ok(rec.events.findIndex((e) => e.type === 'audio') < rec.events.findIndex((e) => e.type === 'turn_complete'));
  });

  it('waits for the user when there is no first message: the first agent turn answers the user', async () => {
    const { session, rec } = await open(agent({ firstMessage: null }));
    session.sendText('Hello?');
    assert.equal(await rec.agentTurn(0), 'As a friendly receptionist for Acme Dental, I heard: "Hello?".');
    assert.equal(rec.events[0].type, 'input_transcript', 'nothing came from the agent before the user spoke');
  });

  it('answers a text turn from the instruction, with the user transcript', async () => {
    const { session, rec } = await open(agent());
    await rec.next('turn_complete');
    const from = rec.events.length;
    session.sendText('I would like a cleaning next week');
    const input = await rec.next('input_transcript', (e) => e.final, from);
    assert.equal(input.text, 'I would like a cleaning next week');
    assert.equal(await rec.agentTurn(from), 'As a friendly receptionist for Acme Dental, I heard: "I would like a cleaning next week".');
  });

  it('takes a spoken turn from a real recording, and silence is not a turn', async () => {
    const { session, rec } = await open(agent());
    await rec.next('turn_complete');
    let from = rec.events.length;
    sendFrames(session, fixture('silence-1s.pcm16le-16k.raw'));
    sendFrames(session, fixture('silence-1s.pcm16le-16k.raw'));
    await new Promise((r) => setTimeout(r, 900));
    assert.deepEqual(
      rec.events.slice(from).map((e) => e.type),
      [],
      'silence produced events',
    );

    sendFrames(session, fixture('caller-hello.pcm16le-16k.raw'));
    sendFrames(session, fixture('silence-1s.pcm16le-16k.raw'));
    const input = await rec.next('input_transcript', (e) => e.final, from);
    const m = /^\[speech (\d+\.\d)s\]$/.exec(input.text);
    assert.ok(m, input.text);
    assert.ok(Number(m[1]) > 3 && Number(m[1]) < 4.3, input.text);
    const reply = await rec.agentTurn(from);
    assert.equal(reply, `As a friendly receptionist for Acme Dental, I heard ${m[1]} seconds of speech.`);

    from = rec.events.length;
    sendFrames(session, fixture('caller-question.pcm16le-16k.raw'));
    sendFrames(session, fixture('silence-1s.pcm16le-16k.raw'));
    const second = await rec.next('input_transcript', (e) => e.final, from);
    assert.match(second.text, /^\[speech 2\.\ds\]$/);
  });

  it('ends a spoken turn when the audio stops (no trailing silence sent)', async () => {
    const { session, rec } = await open(agent());
    await rec.next('turn_complete');
    const from = rec.events.length;
    sendFrames(session, fixture('caller-goodbye.pcm16le-16k.raw'));
    const input = await rec.next('input_transcript', (e) => e.final, from);
    assert.match(input.text, /^\[speech 2\.\ds\]$/);
  });

  it('calls a declared tool and answers with its result', async () => {
    const { session, rec } = await open(
      agent({
        tools: [
          {
            name: 'lookup_order',
            description: 'Looks an order up',
            parameters: { type: 'object', properties: { order_id: { type: 'string' }, rush: { type: 'boolean' } }, required: ['order_id'] },
          },
        ],
      }),
    );
    await rec.next('turn_complete');
    const from = rec.events.length;
    session.sendText('Please use lookup_order for A-77.');
    const call = await rec.next('tool_call', () => true, from);
    assert.equal(call.calls.length, 1);
    assert.equal(call.calls[0].name, 'lookup_order');
    assert.deepEqual(call.calls[0].args, { order_id: 'A-77', rush: true });
    assert.equal(rec.events.slice(from).filter((e) => e.type === 'turn_complete').length, 0, 'waits for the response');
    const filler = rec.events.length;
    session.say('One moment, please.');
    assert.equal(await rec.agentTurn(filler), 'One moment, please.');
    session.sendToolResponses([{ id: call.calls[0].id, name: 'lookup_order', response: { result: 'shipped on Monday' } }]);
    const afterFiller = rec.events.length;
    assert.equal(await rec.agentTurn(afterFiller), 'lookup_order returned: shipped on Monday');
    assert.deepEqual(
      rec.events.slice(rec.events.indexOf(call)).filter((e) => e.type === 'input_transcript' || e.type === 'tool_call_cancellation'),
      [],
      'the filler is neither a user turn nor a cancellation',
    );

    const again = rec.events.length;
    session.sendText('lookup order B-1 please');
    const second = await rec.next('tool_call', () => true, again);
    assert.deepEqual(second.calls[0].args, { order_id: 'B-1 please', rush: true });
    session.sendText('never mind');
    const cancelled = await rec.next('tool_call_cancellation', () => true, again);
    assert.deepEqual(cancelled.ids, [second.calls[0].id]);
    assert.equal(await rec.agentTurn(again), 'As a friendly receptionist for Acme Dental, I heard: "never mind".');
  });

  it('ends the conversation after goodbye only when the agent may', async () => {
    const may = await open(agent({ canEndConversation: true }));
    await may.rec.next('turn_complete');
    let from = may.rec.events.length;
    may.session.sendText('That is all, goodbye!');
    await may.rec.next('end_conversation', () => true, from);
    const farewell = may.rec.events
      .slice(from)
      .filter((e) => e.type === 'output_transcript')
      .pop();
    assert.deepEqual(farewell, { type: 'output_transcript', text: 'Goodbye! Thank you for talking with a friendly receptionist for Acme Dental.' });
    await may.rec.next('turn_complete', () => true, from);

    const mayNot = await open(agent({ canEndConversation: false }));
    await mayNot.rec.next('turn_complete');
    from = mayNot.rec.events.length;
    mayNot.session.sendText('That is all, goodbye!');
    assert.match(await mayNot.rec.agentTurn(from), /^Goodbye!/);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(mayNot.rec.events.filter((e) => e.type === 'end_conversation').length, 0);

    from = may.rec.events.length;
    may.session.sendText('hello again');
    await may.rec.agentTurn(from);
    assert.equal(may.rec.events.filter((e) => e.type === 'end_conversation').length, 1, 'no goodbye, no end');
  });

  it('answers as text in a text session', async () => {
    const { session, rec } = await open(agent({ source: 'text' }));
    assert.equal(await rec.agentTurn(0), 'Hello, thanks for calling Acme Dental!');
    const from = rec.events.length;
    session.sendText('hi');
    assert.equal(await rec.agentTurn(from), 'As a friendly receptionist for Acme Dental, I heard: "hi".');
    assert.equal(rec.events.filter((e) => e.type === 'audio').length, 0);
  });

  it('reconnects on goAway with the resumption handle and the conversation continues', async () => {
    const { session, rec } = await open(agent());
    await rec.next('turn_complete');
    let from = rec.events.length;
    session.sendText('My name is Ada');
    await rec.agentTurn(from);
    const setupsBefore = sandbox.setups.length;
    sandbox.goAway(50);
    const deadline = Date.now() + 3000;
    while (!sandbox.setups.slice(setupsBefore).some((s) => s.resumedFrom) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const resumed = sandbox.setups.slice(setupsBefore).filter((s) => s.resumedFrom);
    assert.ok(resumed.length >= 1, 'a setup carried a resumption handle');
    from = rec.events.length;
    session.sendText('what did I say?');
    assert.equal(await rec.agentTurn(from), 'You said: "My name is Ada".');
    assert.equal(rec.events.filter((e) => e.type === 'unavailable' || e.type === 'closed').length, 0);
  });

  it('resumes after the connection is cut without a close frame, and queued input is delivered', async () => {
    const { session, rec } = await open(agent());
    await rec.next('turn_complete');
    let from = rec.events.length;
    session.sendText('Remember the word zebra');
    await rec.agentTurn(from);
    const setupsBefore = sandbox.setups.length;
    sandbox.dropConnections();
    from = rec.events.length;
    // Sent while the adapter has not yet noticed or is reconnecting: held, then delivered.
    session.sendText('what did I say?');
    assert.equal(await rec.agentTurn(from), 'You said: "Remember the word zebra".');
    assert.ok(sandbox.setups.slice(setupsBefore).some((s) => s.resumedFrom));
    assert.equal(rec.events.filter((e) => e.type === 'unavailable' || e.type === 'closed').length, 0);
  });

  it('turns the analysis request into the deterministic analysis of the transcript', async () => {
    const transcript = [
      { role: 'model' as const, text: 'Hello, how can I help?', timestamp: 1 },
      { role: 'user' as const, text: 'Thanks, can you book me for Tuesday?', timestamp: 2 },
      { role: 'model' as const, text: 'Booked for Tuesday at 10.', timestamp: 3 },
    ];
    const result = await voice.analyze({ instruction: 'You are a receptionist.', transcript });
    assert.deepEqual(result, analyzeTranscript(transcript));
    assert.equal(result.goal_met, true);
    assert.equal(result.sentiment, 'positive');
  });
});

describe('voice service: barge-in, outages and refused starts', () => {
  let sandbox: SandboxVoiceService;
  const adapter = (url: string, retryMax = 2, log = quietLog) =>
    createGeminiLiveService({
      url,
      model: 'test-model',
      analysisModel: 'test-model',
      connectTimeoutMs: 1000,
      retryMax,
      retryBaseMs: 20,
      retryMaxDelayMs: 40,
      log,
    });

  before(async () => {
    // Real-time playout, so a reply is still being spoken when the caller talks over it.
    sandbox = await startSandboxVoiceService({ msPerChar: 60, speed: 1 });
  });
  after(() => sandbox.close());

  it('reports an interruption when the caller speaks over the agent', async () => {
    const service = adapter(sandbox.url);
    const session = await service.open(agent());
    const rec = new Recorder(session);
    await rec.next('audio');
    sendFrames(session, fixture('caller-hello.pcm16le-16k.raw').subarray(0, 640 * 15));
    const interrupted = await rec.next('interrupted');
    const at = rec.events.indexOf(interrupted);
    assert.ok(!rec.events.slice(0, at).some((e) => e.type === 'turn_complete'), 'interrupted before the greeting completed');
    const greeting = rec.events
      .slice(0, at)
      .filter((e) => e.type === 'output_transcript')
      .pop();
    assert.ok(greeting && greeting.type === 'output_transcript' && greeting.text.length < 'Hello, thanks for calling Acme Dental!'.length);
    await service.close();
  });

  it('retries a lost connection a bounded number of times, then reports unavailable once', async () => {
    const service = adapter(sandbox.url, 2);
    const session = await service.open(agent());
    const rec = new Recorder(session);
    const refusedBefore = sandbox.refusedConnections();
    sandbox.setUnavailable(true);
    try {
      sandbox.dropConnections();
      const unavailable = await rec.next('unavailable');
      assert.match(unavailable.message, /unavailable/);
      await rec.next('closed');
      assert.equal(sandbox.refusedConnections() - refusedBefore, 3, 'first attempt + 2 retries');
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(rec.events.filter((e) => e.type === 'unavailable').length, 1);
      assert.equal(rec.events.filter((e) => e.type === 'closed').length, 1);
    } finally {
      sandbox.setUnavailable(false);
    }
  });

  it('gives up when every new connection is dropped again', async () => {
    const service = adapter(sandbox.url, 1);
    const session = await service.open(agent());
    const rec = new Recorder(session);
    for (let drops = 0; drops < 3; drops++) {
      const setups = sandbox.setups.length;
      sandbox.dropConnections();
      if (drops < 2) {
        const deadline = Date.now() + 3000;
        while (sandbox.setups.length === setups && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
        assert.ok(sandbox.setups.length > setups, `reconnected after drop ${drops + 1}`);
      }
    }
    const unavailable = await rec.next('unavailable');
    assert.match(unavailable.message, /keeps dropping/);
    await rec.next('closed');
  });

  it('rejects open() when the voice service refuses every attempt', async () => {
    sandbox.setUnavailable(true);
    try {
      const before = sandbox.refusedConnections();
      await assert.rejects(adapter(sandbox.url, 1).open(agent()), /could not start/);
      assert.equal(sandbox.refusedConnections() - before, 2);
    } finally {
      sandbox.setUnavailable(false);
    }
  });

  it("sets the session up with the agent's model, and rejects open() at once with VoiceModelRefusedError when the service refuses it (issue 34)", async () => {
    const service = adapter(sandbox.url, 3);
    const chosen = await service.open(agent({ model: 'gemini-2.0-flash-live-001' }));
    assert.equal(sandbox.setups.at(-1)?.model, 'models/gemini-2.0-flash-live-001');
    await chosen.close();
    const plain = await service.open(agent());
    assert.equal(sandbox.setups.at(-1)?.model, 'models/test-model', 'no model of its own: the service-wide one');
    await plain.close();
    const before = sandbox.setups.length;
    await assert.rejects(service.open(agent({ model: REFUSED_MODEL })), (err: Error) => {
      assert.ok(err instanceof VoiceModelRefusedError, String(err));
      assert.match(err.message, /1008 models\/sandbox-refused-model is not found/);
      return true;
    });
    assert.equal(sandbox.setups.length, before, 'refused, not set up');
  });

  it('rejects open() when nothing listens, without logging the API key', async () => {
    const lines: string[] = [];
    const log = createLogger('info', new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) }));
    const port = await freePort();
    const service = createGeminiLiveService({
      url: `ws://127.0.0.1:${port}`,
      apiKey: 'AIza-secret-key-for-test',
      model: 'm',
      analysisModel: 'm',
      connectTimeoutMs: 500,
      retryMax: 2,
      retryBaseMs: 10,
      retryMaxDelayMs: 20,
      log,
    });
    await assert.rejects(service.open(agent()), /could not start/);
    assert.equal(lines.length, 3, 'one warning per attempt');
    assert.ok(!lines.join('').includes('AIza-secret-key-for-test'));
  });
});
