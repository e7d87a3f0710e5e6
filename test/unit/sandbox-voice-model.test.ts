import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { buildSetup, openingTurn } from '../../src/voice/gemini-live.js';
import { bidiUrl, loggableUrl } from '../../src/voice/live-protocol.js';
import { OPT_OUT_FAREWELL, afterResponse, decide, deriveArguments, roleOf } from '../../src/sandbox/voice/model.js';
import type { VoiceSessionConfig } from '../../src/voice/types.js';

const config: VoiceSessionConfig = {
  instruction: 'You are the booking assistant of Acme.',
  firstMessage: 'Welcome to Acme!',
  voiceId: 'Puck',
  language: 'English',
  languageCode: 'en-GB',
  tools: [{ name: 'book', description: 'Books a slot', parameters: { type: 'object', properties: { day: { type: 'string' } } } }],
  canEndConversation: true,
  source: 'voice',
};

describe('Gemini Live setup', () => {
  it('builds the setup message of the BidiGenerateContent protocol', () => {
    assert.deepEqual(buildSetup(config, 'gemini-live-2.5-flash-preview', null), {
      setup: {
        model: 'models/gemini-live-2.5-flash-preview',
        generationConfig: {
          responseModalities: ['AUDIO'],
          speechConfig: { voiceConfig: { prebuiltVoiceConfig: { voiceName: 'Puck' } }, languageCode: 'en-GB' },
        },
        systemInstruction: { parts: [{ text: 'You are the booking assistant of Acme.\n\nSpeak English.' }] },
        tools: [
          {
            functionDeclarations: [
              { name: 'book', description: 'Books a slot', parametersJsonSchema: { type: 'object', properties: { day: { type: 'string' } } } },
              {
                name: 'end_conversation',
                description: 'Ends the conversation. Call it after saying goodbye, when the user says goodbye or the conversation is over.',
                parametersJsonSchema: { type: 'object', properties: {} },
              },
            ],
          },
        ],
        inputAudioTranscription: {},
        outputAudioTranscription: {},
        sessionResumption: {},
      },
    });
  });

  it('resumes with a handle, asks for text in text sessions and declares no tools when there are none', () => {
    const setup = buildSetup({ ...config, source: 'text', tools: [], canEndConversation: false }, 'models/x', 'h1').setup!;
    assert.deepEqual(setup.sessionResumption, { handle: 'h1' });
    assert.deepEqual(setup.generationConfig, { responseModalities: ['TEXT'] });
    assert.equal(setup.tools, undefined);
    assert.equal(setup.outputAudioTranscription, undefined);
  });

  it('asks the model to say the first message, and for nothing when there is none (the user speaks first)', () => {
    assert.deepEqual(openingTurn(config), {
      clientContent: {
        turns: [{ role: 'user', parts: [{ text: '(The conversation has started.) Open it now: say exactly: "Welcome to Acme!"' }] }],
        turnComplete: true,
      },
    });
    assert.equal(openingTurn({ ...config, firstMessage: null }), null);
    assert.equal(openingTurn({ ...config, firstMessage: '' }), null);
  });

  it('puts the key in the query string, adds the standard path to a bare host, and logs neither key', () => {
    const url = bidiUrl('wss://generativelanguage.googleapis.com', 'k-123');
    assert.equal(
      url.toString(),
      'wss://generativelanguage.googleapis.com/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent?key=k-123',
    );
    assert.ok(!loggableUrl(url).includes('k-123'));
    assert.equal(bidiUrl('ws://127.0.0.1:9000/custom/path', undefined).toString(), 'ws://127.0.0.1:9000/custom/path');
  });
});

describe('sandbox model rules', () => {
  const fns = [
    {
      name: 'check_stock',
      description: '',
      parameters: { type: 'object', properties: { item: { type: 'string' }, qty: { type: 'integer' }, size: { type: 'string', enum: ['small', 'large'] } } },
    },
    { name: 'end_conversation', description: '', parameters: null },
  ];
  const base = { instruction: 'You are a shop clerk. Be nice.', functions: fns, previousUserText: null };

  it('takes the role from the instruction', () => {
    assert.equal(roleOf("Be nice. You are a shop clerk at Bob's! Sell."), "a shop clerk at Bob's");
    assert.equal(roleOf('Answer questions about trains.'), 'Answer questions about trains');
    assert.equal(roleOf(''), 'your assistant');
  });

  it('derives tool arguments from the turn', () => {
    assert.deepEqual(deriveArguments(fns[0], 'Can you check stock for red shoes, 3 pairs, large?'), {
      item: 'red shoes, 3 pairs, large',
      qty: 3,
      size: 'large',
    });
  });

  it('applies the rules in order', () => {
    assert.deepEqual(decide({ ...base, turn: { kind: 'text', text: 'say exactly: "Bye \\"now\\""' } }), { kind: 'say', text: 'Bye "now"' });
    assert.deepEqual(decide({ ...base, turn: { kind: 'text', text: 'ok bye' } }), {
      kind: 'farewell',
      text: 'Goodbye! Thank you for talking with a shop clerk.',
      endConversation: true,
    });
    assert.equal(decide({ ...base, turn: { kind: 'text', text: 'use check_stock' } }).kind, 'call');
    assert.deepEqual(decide({ ...base, previousUserText: 'hi', turn: { kind: 'text', text: 'What did I say?' } }), {
      kind: 'say',
      text: 'You said: "hi".',
    });
    assert.deepEqual(decide({ ...base, turn: { kind: 'speech', seconds: 1.26 } }), { kind: 'say', text: 'As a shop clerk, I heard 1.3 seconds of speech.' });
  });

  it('opts out a person who asks not to be called again, before the goodbye rule, only when opt_out is declared (rule 2a)', () => {
    const withOptOut = { ...base, functions: [...fns, { name: 'opt_out', description: '', parameters: null }] };
    for (const text of [
      'Please do not call me again.',
      "Don't call me again, bye.",
      'Stop calling me!',
      'Take me off your list',
      'remove me from the calling list please',
    ]) {
      assert.deepEqual(decide({ ...withOptOut, turn: { kind: 'text', text } }), { kind: 'call', name: 'opt_out', args: {} }, text);
    }
    assert.equal(decide({ ...base, turn: { kind: 'text', text: "Don't call me again, bye." } }).kind, 'farewell');
    assert.equal(decide({ ...withOptOut, turn: { kind: 'text', text: 'Call me again tomorrow.' } }).kind, 'say');
    assert.equal(afterResponse('opt_out', { result: 'listed' }), OPT_OUT_FAREWELL);
    assert.equal(afterResponse('opt_out', { error: 'failed' }), 'opt_out returned: {"error":"failed"}');
  });
});
