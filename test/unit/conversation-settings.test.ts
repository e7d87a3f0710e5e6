/**
 * Conversation settings (issue 34) without a service: the agent's setting and a call's override,
 * their mapping onto the Gemini Live setup (`realtimeInputConfig`, field names as the SDK's), the
 * sandbox voice service's documented rules for them, the idle ladder's steps, and the engine holding
 * the person's audio back during a first message they may not interrupt.
 */
import { describe, it, mock } from 'node:test';
import assert from 'node:assert/strict';
import type { LiveClientMessage } from '@google/genai';
import { buildSetup, realtimeInputConfig } from '../../src/voice/gemini-live.js';
import { agentSettings, applySettings, DEFAULT_SETTINGS, effectiveSettings, maxDurationMs } from '../../src/voice/conversation-settings.js';
import type { ConversationSettings } from '../../src/voice/conversation-settings.js';
import type { VoiceSessionConfig } from '../../src/voice/types.js';
import { turnRules } from '../../src/sandbox/voice/turn-rules.js';
import { IdleLadder } from '../../src/conversation/idle-ladder.js';
import { Conversation } from '../../src/conversation/engine.js';
import { NO_LINKS } from '../../src/agents/service.js';
import { systemClock } from '../../src/lib/clock.js';
import type { VoiceEvent, VoiceSession } from '../../src/voice/types.js';
import pino from 'pino';
import { ApiError } from '../../src/errors/api-error.js';

const config: VoiceSessionConfig = {
  instruction: 'You are the booking assistant of Acme.',
  firstMessage: 'Welcome to Acme!',
  voiceId: null,
  language: null,
  languageCode: null,
  tools: [],
  canEndConversation: false,
  source: 'phone',
};

const every: ConversationSettings = {
  turn_detection: { start_sensitivity: 'low', end_sensitivity: 'high', silence_ms: 800, prefix_padding_ms: 120 },
  interruptions: 'never',
  idle: null,
  max_duration_seconds: null,
};

describe('conversation settings: the agent setting and overrides', () => {
  it('an agent setting fills every field, defaults where none is given', () => {
    assert.equal(agentSettings(null), null);
    assert.deepEqual(agentSettings({ interruptions: 'after_first_message', idle: { idle_ms: 5000, reminders: ['Still there?', 'Hello?'] } }), {
      turn_detection: null,
      interruptions: 'after_first_message',
      idle: { idle_ms: 5000, reminders: ['Still there?', 'Hello?'], max_reminders: 2, goodbye_message: null },
      max_duration_seconds: null,
    });
    assert.deepEqual(agentSettings({ turn_detection: { silence_ms: null } }), DEFAULT_SETTINGS, 'a turn detection setting nothing: none');
  });

  it('a call overrides field by field: a field given replaces the agent`s (null: the default), one left out keeps it', () => {
    const agent = agentSettings({ ...every, idle: { idle_ms: 4000, reminders: ['Hello?'], goodbye_message: 'Bye.' }, max_duration_seconds: 600 })!;
    assert.deepEqual(effectiveSettings(agent, null), agent);
    assert.deepEqual(effectiveSettings(agent, { max_duration_seconds: 60, interruptions: null }), {
      ...agent,
      max_duration_seconds: 60,
      interruptions: 'always',
    });
    assert.deepEqual(effectiveSettings(agent, { idle: null, turn_detection: { silence_ms: 300 } }), {
      ...agent,
      idle: null,
      turn_detection: { start_sensitivity: null, end_sensitivity: null, silence_ms: 300, prefix_padding_ms: null },
    });
    assert.deepEqual(effectiveSettings(null, {}), DEFAULT_SETTINGS);
  });

  it('refuses reminders asked for without any to say: 422 invalid_value naming the field', () => {
    for (const idle of [
      { idle_ms: 2000, max_reminders: 1 },
      { idle_ms: 2000, reminders: [], max_reminders: 3 },
    ]) {
      assert.throws(
        () => applySettings(null, { idle }),
        (err: unknown) => err instanceof ApiError && err.status === 422 && err.code === 'invalid_value' && err.param === 'conversation.idle.reminders',
      );
    }
    assert.deepEqual(applySettings(null, { idle: { idle_ms: 2000, max_reminders: 0 } }).idle, {
      idle_ms: 2000,
      reminders: [],
      max_reminders: 0,
      goodbye_message: null,
    });
  });

  it('the maximum duration is the conversation`s own within the deployment`s', () => {
    assert.equal(maxDurationMs(null, 3_600_000), 3_600_000);
    assert.equal(maxDurationMs({ ...DEFAULT_SETTINGS, max_duration_seconds: 90 }, 3_600_000), 90_000);
    assert.equal(maxDurationMs({ ...DEFAULT_SETTINGS, max_duration_seconds: 7200 }, 3_600_000), 3_600_000);
  });
});

describe('conversation settings: the Gemini Live setup', () => {
  it('maps turn detection and interruptions onto realtimeInputConfig with the Live API`s field names', () => {
    const setup = buildSetup({ ...config, conversation: every }, 'gemini-live-2.5-flash-preview', null).setup!;
    assert.deepEqual(setup.realtimeInputConfig, {
      automaticActivityDetection: {
        startOfSpeechSensitivity: 'START_SENSITIVITY_LOW',
        endOfSpeechSensitivity: 'END_SENSITIVITY_HIGH',
        prefixPaddingMs: 120,
        silenceDurationMs: 800,
      },
      activityHandling: 'NO_INTERRUPTION',
    });
    // The whole message as sent is the SDK's shape.
    const wire: LiveClientMessage = JSON.parse(JSON.stringify(buildSetup({ ...config, conversation: every }, 'm', null)));
    assert.equal(wire.setup?.realtimeInputConfig?.automaticActivityDetection?.silenceDurationMs, 800);
  });

  it('sends only what is set; the defaults send nothing; after_first_message keeps barge-in on', () => {
    assert.equal(realtimeInputConfig(null), undefined);
    assert.equal(realtimeInputConfig(DEFAULT_SETTINGS), undefined);
    assert.equal(buildSetup({ ...config, conversation: DEFAULT_SETTINGS }, 'm', null).setup!.realtimeInputConfig, undefined);
    assert.deepEqual(realtimeInputConfig({ ...DEFAULT_SETTINGS, interruptions: 'after_first_message' }), { activityHandling: 'START_OF_ACTIVITY_INTERRUPTS' });
    assert.deepEqual(
      realtimeInputConfig({ ...DEFAULT_SETTINGS, turn_detection: { start_sensitivity: null, end_sensitivity: 'low', silence_ms: null, prefix_padding_ms: 0 } }),
      { automaticActivityDetection: { endOfSpeechSensitivity: 'END_SENSITIVITY_LOW', prefixPaddingMs: 0 } },
    );
  });

  it('a text session sends no realtimeInputConfig (it has no audio)', () => {
    assert.equal(buildSetup({ ...config, source: 'text', conversation: every }, 'm', null).setup!.realtimeInputConfig, undefined);
  });
});

describe('conversation settings: the sandbox voice service`s rules', () => {
  const base = { endOfTurnMs: 600, minSpeechMs: 100, speechRms: 300 };

  it('without realtimeInputConfig: its own timing, barge-in on', () => {
    assert.deepEqual(turnRules(base, undefined), { ...base, interrupts: true });
  });

  it('silence and padding replace its timing; low end sensitivity doubles the silence, low start sensitivity the energy', () => {
    const setup = (s: ConversationSettings) => buildSetup({ ...config, conversation: s }, 'm', null).setup!.realtimeInputConfig;
    assert.deepEqual(turnRules(base, setup(every)), { endOfTurnMs: 800, minSpeechMs: 120, speechRms: 600, interrupts: false });
    assert.deepEqual(
      turnRules(
        base,
        setup({
          ...every,
          interruptions: 'after_first_message',
          turn_detection: { ...every.turn_detection!, end_sensitivity: 'low', start_sensitivity: 'high' },
        }),
      ),
      { endOfTurnMs: 1600, minSpeechMs: 120, speechRms: 300, interrupts: true },
    );
  });
});

describe('the idle ladder', () => {
  it('reminds in order at most max_reminders times in a row, then gives up with the goodbye; the person speaking starts again', () => {
    mock.timers.enable({ apis: ['setInterval'] });
    try {
      let now = 0;
      const steps: string[] = [];
      const ladder = new IdleLadder({ idle_ms: 1000, reminders: ['A?', 'B?'], max_reminders: 3, goodbye_message: 'Bye.' }, () => now, {
        remind: (text, n) => steps.push(`remind ${n} ${text}`),
        giveUp: (goodbye, n) => steps.push(`give up after ${n}: ${goodbye}`),
      });
      ladder.start();
      const wait = (ms: number) => {
        for (let i = 0; i < ms / 250; i++) {
          now += 250;
          mock.timers.tick(250);
        }
      };
      wait(750);
      assert.deepEqual(steps, [], 'not yet idle');
      wait(250);
      assert.deepEqual(steps, ['remind 1 A?']);
      wait(500);
      ladder.activity();
      wait(750);
      assert.deepEqual(steps, ['remind 1 A?'], 'the agent speaking restarts the wait');
      ladder.activity(true);
      wait(1000);
      assert.deepEqual(steps, ['remind 1 A?', 'remind 1 A?'], 'the person spoke: the count starts again');
      wait(3000);
      assert.deepEqual(steps, ['remind 1 A?', 'remind 1 A?', 'remind 2 B?', 'remind 3 A?', 'give up after 3: Bye.']);
      wait(5000);
      assert.equal(steps.length, 5, 'nothing after giving up');
    } finally {
      mock.timers.reset();
    }
  });
});

/** A voice session that keeps the audio it is sent and lets the test emit its events. */
function fakeVoice() {
  let listener: (e: VoiceEvent) => void = () => undefined;
  const sent: Buffer[] = [];
  const voice: VoiceSession = {
    sendAudio: (pcm) => void sent.push(Buffer.from(pcm)),
    sendImage: () => undefined,
    sendText: () => undefined,
    sendKeys: () => undefined,
    say: () => undefined,
    sendToolResponses: () => undefined,
    onEvent: (l) => void (listener = l),
    close: async () => undefined,
  };
  return { voice, sent, emit: (e: VoiceEvent) => listener(e) };
}

describe('interruptions after_first_message: the person`s audio during the first message', () => {
  // 20 ms of 16 kHz PCM16: loud (a square wave well above the speech threshold) and quiet.
  const loud = Buffer.alloc(640);
  for (let i = 0; i < 320; i++) loud.writeInt16LE(i % 20 < 10 ? 8000 : -8000, i * 2);
  const quiet = Buffer.alloc(640);
  const isSilence = (b: Buffer) => b.every((x) => x === 0);

  function conversation(
    playoutTracked: boolean,
    interruptions: ConversationSettings['interruptions'] = 'after_first_message',
    firstMessage: string | null = 'Hello!',
  ) {
    const fake = fakeVoice();
    const c = new Conversation(
      fake.voice,
      { id: 'call_x', workspaceId: 'w', agentId: 'a', links: NO_LINKS, firstMessage, textMode: false, interruptions, playoutTracked },
      null,
      systemClock,
      { toolTimeoutMs: 1000, toolFillerMs: 1000, recordMaxBytes: 100_000 },
      {},
      pino({ level: 'silent' }),
    );
    return { c, ...fake };
  }

  it('is silence until the first message has played, then until the person`s first pause (200 ms), then as it is', () => {
    const { c, sent, emit } = conversation(true);
    c.sendAudio(loud);
    emit({ type: 'turn_complete' });
    c.sendAudio(loud);
    assert.deepEqual(sent.map(isSilence), [true, true], 'the transport has not said it played yet');
    c.firstMessagePlayed();
    c.sendAudio(loud);
    for (let i = 0; i < 9; i++) c.sendAudio(quiet);
    c.sendAudio(loud);
    assert.equal(isSilence(sent.at(-1)!), true, 'still the tail of what was said over the first message');
    for (let i = 0; i < 10; i++) c.sendAudio(quiet);
    c.sendAudio(loud);
    assert.equal(isSilence(sent.at(-1)!), false, 'after a 200 ms pause the person is heard');
  });

  it('without playout tracking the first message counts as played when its turn completes', () => {
    const { c, sent, emit } = conversation(false);
    c.sendAudio(loud);
    emit({ type: 'turn_complete' });
    for (let i = 0; i < 10; i++) c.sendAudio(quiet);
    c.sendAudio(loud);
    assert.deepEqual([isSilence(sent[0]), isSilence(sent.at(-1)!)], [true, false]);
  });

  it('always, never, or no first message: the audio goes through as it is', () => {
    for (const [interruptions, first] of [
      ['always', 'Hello!'],
      ['never', 'Hello!'],
      ['after_first_message', null],
    ] as const) {
      const { c, sent } = conversation(true, interruptions, first);
      c.sendAudio(loud);
      assert.equal(isSilence(sent[0]), false, `${interruptions}, first message ${first}`);
    }
  });
});
