/** The status rules of a call (src/calls/lifecycle.ts: the contract's transition table). */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { finalState, movableFrom } from '../../src/calls/lifecycle.js';

describe('call status rules', () => {
  it('only moves a call forward', () => {
    assert.deepEqual(movableFrom('ringing'), ['queued', 'initiated']);
    assert.deepEqual(movableFrom('in_progress'), ['queued', 'initiated', 'ringing']);
  });

  const base = { answered_at: null, answered_by: null, carrier_outcome: null, end_reason_hint: null, media_started_at: null, media_ended_at: null } as const;
  const answered = { ...base, answered_at: new Date(), media_started_at: new Date(), media_ended_at: new Date() };

  it('ends answered calls as completed or voicemail with the reason known', () => {
    assert.deepEqual(finalState({ ...answered }, false), { status: 'completed', endReason: 'remote_hangup' });
    assert.deepEqual(finalState({ ...answered, answered_by: 'machine', end_reason_hint: 'agent_hangup' }, false), {
      status: 'voicemail',
      endReason: 'agent_hangup',
    });
    assert.deepEqual(finalState({ ...answered, carrier_outcome: 'time_limit' }, false), { status: 'completed', endReason: 'time_limit' });
    assert.deepEqual(finalState({ ...answered, end_reason_hint: 'transferred' }, false), { status: 'completed', endReason: 'transferred' });
    assert.deepEqual(finalState({ ...answered, end_reason_hint: 'service_error' }, false), { status: 'failed', endReason: 'service_error' });
  });

  it('ends unanswered calls by the carrier outcome, and forced ones as failed', () => {
    assert.deepEqual(finalState({ ...base, carrier_outcome: 'busy' }, false), { status: 'busy', endReason: 'not_answered' });
    assert.deepEqual(finalState({ ...base, carrier_outcome: 'no_answer' }, false), { status: 'no_answer', endReason: 'not_answered' });
    assert.deepEqual(finalState({ ...base, carrier_outcome: 'canceled' }, false), { status: 'canceled', endReason: 'canceled' });
    assert.deepEqual(finalState({ ...base, end_reason_hint: 'canceled' }, false), { status: 'canceled', endReason: 'canceled' });
    assert.deepEqual(finalState({ ...base, end_reason_hint: 'not_allowed' }, false), { status: 'failed', endReason: 'not_allowed' });
    assert.deepEqual(finalState({ ...base }, true), { status: 'failed', endReason: 'carrier_error' });
    // Answered, media started, never ended: the instance running it died.
    assert.deepEqual(finalState({ ...answered, media_ended_at: null }, true), { status: 'failed', endReason: 'service_error' });
  });
});
