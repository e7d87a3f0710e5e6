import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { analysisPrompt, analyzeTranscript, parseAnalysisPrompt } from '../../src/voice/analysis.js';
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
    assert.deepEqual(parseAnalysisPrompt(analysisPrompt('You are "X".\nBe brief.', transcript)), {
      instruction: 'You are "X".\nBe brief.',
      transcript,
    });
    assert.equal(parseAnalysisPrompt('no markers here'), null);
  });
});
