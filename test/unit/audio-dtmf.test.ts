/**
 * Keypad keys as in-band tones (src/audio/dtmf.ts) and the sandbox callee's ear for them: every key
 * played as tones is heard back once, in order, pauses take their time, and speech-like agent audio
 * is never heard as a key. Also the send_dtmf tool's argument checks, the runs the person's keys
 * are gathered into, and the budgets keys (and audio, typed messages, images) are held to.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { dtmfDurationMs, dtmfTonesUlaw } from '../../src/audio/dtmf.js';
import { DtmfDetector } from '../../src/sandbox/carriers/dtmf-detector.js';
import { Downsampler24kTo8k, pcm16ToMulaw } from '../../src/audio/pcm16.js';
import { FRAMES_B64 } from '../../src/sandbox/voice/speech.js';
import { dtmfArguments, MAX_DTMF_CHARACTERS } from '../../src/calls/live/dtmf-tool.js';
import { keysAfterPress } from '../../src/sandbox/voice/model.js';
import { KeypadRuns, MAX_RUN_KEYS } from '../../src/calls/live/keypad.js';
import { Budget } from '../../src/lib/budget.js';
import { audioBudget } from '../../src/audio/budget.js';

function heard(ulaw: Buffer): string {
  const d = new DtmfDetector();
  let keys = '';
  for (let at = 0; at < ulaw.length; at += 160) keys += d.push(ulaw.subarray(at, at + 160)) ?? '';
  return keys;
}

describe('DTMF tones', () => {
  it('every key of the keypad is heard back once, in order, repeated keys included', () => {
    const keys = '0123456789*#ABCD11##';
    const tones = dtmfTonesUlaw(keys);
    assert.equal(tones.length % 160, 0, 'whole 20 ms frames');
    assert.equal(heard(tones), keys);
  });

  it('pauses: w is 0.5 s and W 1 s of silence, and are not keys', () => {
    assert.equal(dtmfDurationMs('1') + 500, dtmfDurationMs('1w'));
    assert.equal(dtmfDurationMs('1') + 1000, dtmfDurationMs('1W'));
    assert.equal(dtmfTonesUlaw('1wW2').length, (dtmfDurationMs('1wW2') * 8000) / 1000);
    assert.equal(heard(dtmfTonesUlaw('1wW2')), '12');
  });

  it("the sandbox agent's speech is never heard as a key", () => {
    const down = new Downsampler24kTo8k();
    const speech = Buffer.concat(Array.from({ length: 4 }, () => FRAMES_B64.map((b) => pcm16ToMulaw(down.process(Buffer.from(b, 'base64'))))).flat());
    assert.ok(speech.length > 160 * 100);
    assert.equal(heard(speech), '');
  });
});

describe('send_dtmf arguments', () => {
  it('takes keys and pauses', () => {
    assert.deepEqual(dtmfArguments({ digits: '1w#' }), { keys: '1w#' });
    assert.deepEqual(dtmfArguments({ digits: 'A*0D' }), { keys: 'A*0D' });
  });

  it('refuses a missing, empty, too long, pause-only or non-key argument with a message naming the problem', () => {
    for (const [args, words] of [
      [{}, 'digits'],
      [{ digits: '' }, 'digits'],
      [{ digits: 12 }, 'digits'],
      [{ digits: '1'.repeat(MAX_DTMF_CHARACTERS + 1) }, 'at most 64'],
      [{ digits: 'ww' }, 'at least one key'],
      [{ digits: '12x#' }, "'x' at position 3"],
      [{ digits: '1 2' }, "' ' at position 2"],
    ] as Array<[Record<string, unknown>, string]>) {
      const r = dtmfArguments(args);
      assert.ok('error' in r && r.error.includes(words), `${JSON.stringify(args)} -> ${JSON.stringify(r)}`);
    }
  });
});

describe('sandbox model: the keys a menu prompt asks for', () => {
  it('reads keys after the first "press", word by word', () => {
    assert.equal(keysAfterPress('To reach the front desk, press 1 then #.'), '1#');
    assert.equal(keysAfterPress('Press 2 and pound, or hold.'), '2#');
    assert.equal(keysAfterPress('press star 9 for more'), '*9');
    assert.equal(keysAfterPress('Keys pressed on the phone keypad: 12'), null);
    assert.equal(keysAfterPress('press here'), null);
  });
});

describe('keypad runs', () => {
  it('a run ends at #, at 64 keys, or when flushed; anything but a key is ignored', () => {
    const runs: string[] = [];
    const keypad = new KeypadRuns(60_000, (keys) => runs.push(keys));
    for (const k of '12x3#') keypad.press(k);
    for (const k of ['4', '', '55', 'w', '*']) keypad.press(k);
    keypad.flush();
    keypad.flush();
    for (let i = 0; i < MAX_RUN_KEYS + 1; i++) keypad.press('9');
    keypad.flush();
    assert.deepEqual(runs, ['123#', '4*', '9'.repeat(MAX_RUN_KEYS), '9']);
  });
});

describe('the budgets of live streams (keys, audio, typed messages, images)', () => {
  it('a burst at once, then the rate: what does not fit is refused and nothing taken; fits() takes nothing', () => {
    let now = 1_000;
    const keys = new Budget({ perSecond: 10, burst: 20 }, () => now);
    assert.equal(keys.fits(20), true);
    assert.equal(keys.fits(20), true, 'fits() took nothing');
    let taken = 0;
    for (let i = 0; i < 1000; i++) if (keys.take(1)) taken++;
    assert.equal(taken, 20, 'the burst, with the clock standing still');
    now += 500;
    assert.equal(keys.take(5), true, '10 a second: 5 after half a second');
    assert.equal(keys.take(1), false);
    now += 60_000;
    taken = 0;
    for (let i = 0; i < 1000; i++) if (keys.take(1)) taken++;
    assert.equal(taken, 20, 'never more than the burst after a long pause');
    now -= 10_000;
    assert.equal(keys.take(1), false, 'a clock going back adds nothing');
  });

  it('audio is budgeted in milliseconds of audio: real time times the rate, plus the burst', () => {
    let now = 0;
    const audio = audioBudget({ rate: 4, burstMs: 2000 }, () => now);
    assert.equal(audio.take(8000), true);
    assert.equal(audio.take(1), false);
    now += 1000;
    assert.equal(audio.take(4000), true);
    assert.equal(audio.fits(1), false);
  });
});
