import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { analysisPrompt, analyzeTranscript, analyzeWithModel, parseAnalysisPrompt } from '../../src/voice/analysis.js';
import type { TranscriptTurn } from '../../src/voice/types.js';

const t = (role: 'user' | 'model', text: string, timestamp: number): TranscriptTurn => ({ role, text, timestamp });

describe('deterministic post-call analysis', () => {
  it('summarises a helpful conversation as positive, goal met, no review', () => {
    const result = analyzeTranscript([
      t('model', 'Hello, thanks for calling Acme Dental!', 1),
      t('user', 'Hi, can you book me a cleaning on Tuesday?', 2),
      t('model', 'Done: Tuesday at 10 am.', 3),
      t('user', 'Perfect, thank you!', 4),
      t('model', 'Goodbye!', 5),
    ]);
    assert.deepEqual(result, {
      summary: 'Conversation of 2 user and 3 agent turns. The user opened with "Hi, can you book me a cleaning on Tuesday?". The agent last said "Goodbye!".',
      sentiment: 'positive',
      goal_met: true,
      needs_review: false,
      unanswered_questions: [],
    });
  });

  it('lists questions with no answer, or a non-answer, and flags the conversation', () => {
    const result = analyzeTranscript([
      t('model', 'Hi!', 1),
      t('user', 'What are your opening hours? Do you take walk-ins?', 2),
      t('model', "I'm not sure, sorry.", 3),
      t('user', 'This is frustrating. Where is the clinic', 4),
    ]);
    assert.deepEqual(result.unanswered_questions, ['What are your opening hours?', 'Do you take walk-ins?', 'Where is the clinic']);
    assert.equal(result.sentiment, 'negative');
    assert.equal(result.goal_met, false);
    assert.equal(result.needs_review, true);
  });

  it('counts an answered question as answered and stays neutral without lexicon words', () => {
    const result = analyzeTranscript([t('user', 'Is the clinic open on Sunday?', 1), t('model', 'No, we open Monday to Friday.', 2)]);
    assert.deepEqual(result.unanswered_questions, []);
    assert.equal(result.sentiment, 'neutral');
    assert.equal(result.goal_met, true);
  });

  it('flags a conversation where the user never spoke', () => {
    assert.deepEqual(analyzeTranscript([]), {
      summary: 'No conversation took place.',
      sentiment: 'neutral',
      goal_met: false,
      needs_review: true,
      unanswered_questions: [],
    });
    const greetedOnly = analyzeTranscript([t('model', 'Hello?', 1)]);
    assert.equal(greetedOnly.goal_met, false);
    assert.equal(greetedOnly.needs_review, true);
  });

  it('carries instruction and transcript through the model prompt', () => {
    const transcript = [t('user', 'Line one\nwith "quotes"', 0), t('model', 'ok', 0)];
    assert.deepEqual(parseAnalysisPrompt(analysisPrompt({ instruction: 'You are "X".\nBe brief.', transcript })), {
      instruction: 'You are "X".\nBe brief.',
      transcript,
      successCriteria: null,
    });
    assert.equal(
      parseAnalysisPrompt(analysisPrompt({ instruction: '', transcript, successCriteria: 'The caller says "yes".\nTwice.' }))?.successCriteria,
      'The caller says "yes".\nTwice.',
    );
    assert.equal(parseAnalysisPrompt('no markers here'), null);
  });
});

/** A generateContent peer on a real socket: records each request body and answers with `reply`. */
async function peer(reply: (body: Record<string, any>) => { status: number; body: unknown }) {
  const bodies: Array<Record<string, any>> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString()) as Record<string, any>;
      bodies.push({ ...body, path: req.url, key: req.headers['x-goog-api-key'] });
      const r = reply(body);
      res.writeHead(r.status, { 'content-type': 'application/json' }).end(JSON.stringify(r.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { origin, bodies, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const candidate = (value: unknown) => ({
  status: 200,
  body: { candidates: [{ content: { role: 'model', parts: [{ text: typeof value === 'string' ? value : JSON.stringify(value) }] }, finishReason: 'STOP' }] },
});
const quiet = pino({ level: 'silent' });
const FIXED = { summary: 'A short call.', sentiment: 'neutral', goal_met: true, needs_review: false, unanswered_questions: [] };
const transcript = [t('model', 'Hello!', 1), t('user', 'Lead score is 8.', 2)];
const dataSchema = {
  type: 'object',
  properties: { lead_score: { type: 'integer', maximum: 10 }, ref: { $ref: '#/$defs/code' } },
  $defs: { code: { type: 'string', pattern: '^[A-Z]{3}$' } },
};

describe('the analysis request (generateContent with structured output)', () => {
  it('asks for the fixed fields, data under the agent schema and success, in one request', async () => {
    const p = await peer(() => candidate({ ...FIXED, data: { lead_score: 8 }, success: { met: true, reason: 'Booked.' } }));
    try {
      const answer = await analyzeWithModel(
        { origin: p.origin, apiKey: 'k-1', model: 'gemini-x', timeoutMs: 2000, log: quiet },
        { instruction: 'Qualify leads.', transcript, dataSchema, successCriteria: 'The caller books.' },
      );
      assert.deepEqual(answer, { ...FIXED, data: { ok: true, value: { lead_score: 8 } }, success: { ok: true, value: { met: true, reason: 'Booked.' } } });
      assert.equal(p.bodies.length, 1, 'one request for everything');
      const [body] = p.bodies;
      assert.equal(body.path, '/v1beta/models/gemini-x:generateContent');
      assert.equal(body.key, 'k-1');
      assert.equal(body.generationConfig.responseMimeType, 'application/json');
      assert.equal(body.generationConfig.responseSchema, undefined);
      const schema = body.generationConfig.responseJsonSchema;
      assert.deepEqual(schema.required, ['summary', 'sentiment', 'goal_met', 'needs_review', 'unanswered_questions', 'data', 'success']);
      // The agent's schema under `data`, its references rebased there, its pattern told in words.
      assert.deepEqual(schema.properties.data, {
        type: 'object',
        properties: { lead_score: { type: 'integer', maximum: 10 }, ref: { $ref: '#/properties/data/$defs/code' } },
        $defs: { code: { type: 'string', description: 'Constraints: pattern "^[A-Z]{3}$".' } },
      });
      assert.deepEqual(schema.properties.success.required, ['met', 'reason']);
      assert.equal(parseAnalysisPrompt(body.contents[0].parts[0].text)?.successCriteria, 'The caller books.');
    } finally {
      await p.close();
    }
  });

  it('without a setting asks only for the fixed fields and answers only them', async () => {
    const p = await peer(() => candidate(FIXED));
    try {
      const answer = await analyzeWithModel({ origin: p.origin, model: 'models/m', timeoutMs: 2000, log: quiet }, { instruction: '', transcript });
      assert.deepEqual(answer, FIXED);
      assert.deepEqual(Object.keys(p.bodies[0].generationConfig.responseJsonSchema.properties), [
        'summary',
        'sentiment',
        'goal_met',
        'needs_review',
        'unanswered_questions',
      ]);
      assert.equal(p.bodies[0].path, '/v1beta/models/m:generateContent');
    } finally {
      await p.close();
    }
  });

  const failures: Array<[string, () => { status: number; body: unknown }, { code: string; message: string }, boolean]> = [
    ['an HTTP error', () => ({ status: 500, body: { error: { code: 500 } } }), { code: 'analysis_failed', message: 'generateContent answered 500' }, true],
    [
      'a blocked prompt',
      () => ({ status: 200, body: { promptFeedback: { blockReason: 'SAFETY' } } }),
      { code: 'analysis_failed', message: 'the model gave no answer (blocked: SAFETY)' },
      true,
    ],
    [
      'an answer cut short with nothing in it',
      () => ({ status: 200, body: { candidates: [{ content: { parts: [] }, finishReason: 'MAX_TOKENS' }] } }),
      { code: 'analysis_failed', message: 'the model stopped without an answer (MAX_TOKENS)' },
      true,
    ],
    ['an answer that is not JSON', () => candidate('{"summary": "cut'), { code: 'invalid_output', message: "the model's answer is not JSON" }, true],
    ['an answer without the asked-for parts', () => candidate(FIXED), { code: 'invalid_output', message: `the model's answer has no "data"` }, false],
  ];
  for (const [what, reply, error, fallback] of failures) {
    it(`${what}: the asked-for parts fail with ${error.code}${fallback ? ', the fixed fields come from the transcript, flagged' : ''}`, async () => {
      const p = await peer(reply);
      try {
        const answer = await analyzeWithModel(
          { origin: p.origin, model: 'm', timeoutMs: 2000, log: quiet },
          { instruction: '', transcript, dataSchema, successCriteria: 'x' },
        );
        assert.deepEqual(answer.data, { ok: false, ...error });
        if (fallback) {
          assert.deepEqual(answer.success, { ok: false, ...error });
          assert.deepEqual(
            { ...answer, data: undefined, success: undefined },
            { ...analyzeTranscript(transcript), needs_review: true, data: undefined, success: undefined },
          );
        } else {
          assert.deepEqual(answer.success, { ok: false, code: 'invalid_output', message: `the model's answer has no "success"` });
          assert.equal(answer.summary, FIXED.summary);
        }
      } finally {
        await p.close();
      }
    });
  }
});
