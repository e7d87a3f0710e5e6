/** The status rules of a call (src/calls/lifecycle.ts: the contract's transition table). */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { endTime, finalState, movableFrom } from '../../src/calls/lifecycle.js';

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

  it('a hang-up asked while dialing ends a call answered before the carrier took it as a hang-up of a live call (api_hangup)', () => {
    assert.deepEqual(finalState({ ...answered, end_reason_hint: 'canceled' }, false), { status: 'completed', endReason: 'api_hangup' });
    assert.deepEqual(finalState({ ...answered, end_reason_hint: 'canceled', carrier_outcome: 'canceled' }, false), {
      status: 'completed',
      endReason: 'api_hangup',
    });
    assert.deepEqual(finalState({ ...answered, end_reason_hint: 'canceled', media_ended_at: null }, true), { status: 'completed', endReason: 'api_hangup' });
    assert.deepEqual(finalState({ ...base, end_reason_hint: 'canceled', carrier_outcome: 'canceled' }, false), { status: 'canceled', endReason: 'canceled' });
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

  it('ends a call orphaned by its instance at its last heartbeat, not when its deadline found it', () => {
    const t = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));
    const live = { ended_at: null, media_started_at: t(0), media_ended_at: null, alive_at: t(2) };
    assert.deepEqual(endTime(live, true, undefined, t(45)), t(2));
    // The carrier's word, the bridge's, or the stream's end come first.
    assert.deepEqual(endTime({ ...live, ended_at: t(3) }, true, undefined, t(45)), t(3));
    assert.deepEqual(endTime({ ...live, media_ended_at: t(4) }, true, undefined, t(45)), t(4));
    assert.deepEqual(endTime(live, false, t(5), t(45)), t(5));
    // Not forced (a carrier callback ended it), or no stream ever ran: now.
    assert.deepEqual(endTime(live, false, undefined, t(45)), t(45));
    assert.deepEqual(endTime({ ...live, media_started_at: null, alive_at: null }, true, undefined, t(45)), t(45));
  });
});
