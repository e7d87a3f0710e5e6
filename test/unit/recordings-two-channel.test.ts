/** The recording's parts that need no service: Range parsing, the WAV header, and the two channels' playout models (a phone call's, a web session's on a clock). */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseRange } from '../../src/recordings/range.js';
import { wavHeader } from '../../src/recordings/wav.js';
import { TwoChannelRecorder } from '../../src/recordings/two-channel.js';
import { MULAW_SILENCE, mulawToPcm16 } from '../../src/audio/pcm16.js';
import { ClockedTwoChannelRecorder, LATE_MS } from '../../src/recordings/clocked.js';
import type { RecordingWriter } from '../../src/recordings/writer.js';

/** The left and right samples of what a recorder wrote (interleaved PCM16). */
function channels(out: Buffer[]): { left: number[]; right: number[] } {
  const all = Buffer.concat(out);
  const left: number[] = [];
  const right: number[] = [];
  for (let i = 0; i < all.length; i += 4) {
    left.push(all.readInt16LE(i));
    right.push(all.readInt16LE(i + 2));
  }
  return { left, right };
}

describe('Range', () => {
  it('first-last, first-, -suffix, clamped to the file; several ranges: the first', () => {
    assert.deepEqual(parseRange('bytes=0-99', 1000), { start: 0, end: 99 });
    assert.deepEqual(parseRange('bytes=900-', 1000), { start: 900, end: 999 });
    assert.deepEqual(parseRange('bytes=-100', 1000), { start: 900, end: 999 });
    assert.deepEqual(parseRange('bytes=-5000', 1000), { start: 0, end: 999 });
    assert.deepEqual(parseRange('bytes=990-5000', 1000), { start: 990, end: 999 });
    assert.deepEqual(parseRange('bytes=0-0, 5-9', 1000), { start: 0, end: 0 });
  });

  it('beyond the end is unsatisfiable; what cannot be read is ignored (the whole file)', () => {
    assert.equal(parseRange('bytes=1000-', 1000), 'unsatisfiable');
    assert.equal(parseRange('bytes=-0', 1000), 'unsatisfiable');
    for (const h of [undefined, '', 'items=0-1', 'bytes=a-b', 'bytes=5-1', 'bytes=1', `bytes=${'9'.repeat(5000)}-`, 'bytes=--1']) {
      assert.equal(parseRange(h, 1000), null, String(h));
    }
  });
});

describe('WAV header', () => {
  it('PCM16, the channels, rate and sizes stated', () => {
    const h = wavHeader(32000, 8000, 2);
    assert.equal(h.length, 44);
    assert.equal(h.toString('ascii', 0, 4), 'RIFF');
    assert.equal(h.readUInt32LE(4), 36 + 32000);
    assert.equal(h.readUInt16LE(22), 2);
    assert.equal(h.readUInt32LE(24), 8000);
    assert.equal(h.readUInt32LE(28), 32000);
    assert.equal(h.readUInt32LE(40), 32000);
  });
});

describe('two channels as heard (a phone call, mu-law as carried)', () => {
  /** `n` samples of mu-law code `code`. */
  const codes = (n: number, code: number) => Buffer.alloc(n, code);
  const recorder = () => {
    const out: Buffer[] = [];
    const writer = { append: (b: Buffer) => out.push(Buffer.from(b)), close: async () => undefined } as unknown as RecordingWriter;
    const stereo = () => {
      const all = Buffer.concat(out);
      const left: number[] = [];
      const right: number[] = [];
      for (let i = 0; i < all.length; i += 2) {
        left.push(all[i]);
        right.push(all[i + 1]);
      }
      return { left, right };
    };
    return { rec: new TwoChannelRecorder(writer, 8000), stereo };
  };

  it('agent audio plays out one sample per person sample from when it arrives, silence when none is queued', () => {
    const { rec, stereo } = recorder();
    rec.person(codes(160, 1));
    rec.agent(codes(240, 7));
    rec.person(codes(160, 2));
    rec.person(codes(160, 3));
    rec.person(codes(160, 4));
    const { left, right } = stereo();
    assert.equal(left.length, 640);
    assert.deepEqual(left.slice(0, 160), Array(160).fill(1));
    assert.deepEqual(right.slice(0, 160), Array(160).fill(MULAW_SILENCE), 'nothing played before it arrived');
    assert.deepEqual(right.slice(160, 400), Array(240).fill(7));
    assert.deepEqual(right.slice(400), Array(240).fill(MULAW_SILENCE));
    assert.equal(mulawToPcm16(Buffer.from([MULAW_SILENCE])).readInt16LE(0), 0, 'silence decodes to zero');
  });

  it('an interruption drops what was queued and not yet played', () => {
    const { rec, stereo } = recorder();
    rec.agent(codes(800, 5));
    rec.person(codes(160, 1));
    rec.interrupted();
    rec.person(codes(160, 1));
    const { right } = stereo();
    assert.deepEqual(right.slice(0, 160), Array(160).fill(5));
    assert.deepEqual(right.slice(160), Array(160).fill(MULAW_SILENCE), 'cut where the person barged in');
  });
});

describe('two channels on a clock (web sessions)', () => {
  // 1000 Hz: a sample a millisecond, so positions read as milliseconds.
  const RATE = 1000;
  const samples = (n: number, v: number) => {
    const b = Buffer.alloc(n * 2);
    for (let i = 0; i < n; i++) b.writeInt16LE(v, i * 2);
    return b;
  };
  const setup = () => {
    let now = 1_000_000;
    const out: Buffer[] = [];
    const writer = {
      beforeFlush: null as null | (() => void),
      append: (b: Buffer) => out.push(Buffer.from(b)),
      flush() {
        this.beforeFlush?.();
      },
      close: async () => undefined,
    };
    const rec = new ClockedTwoChannelRecorder(writer as unknown as RecordingWriter, RATE, { now: () => new Date(now) });
    return { rec, writer, stereo: () => channels(out), move: (ms: number) => (now += ms) };
  };
  const run = (values: number[], from: number, to: number) => values.slice(from, to);

  it('person audio lands where it arrived, silence where none came; both channels on the clock', async () => {
    const { rec, stereo, move } = setup();
    move(100);
    rec.personAudio(samples(50, 1));
    move(400);
    rec.personAudio(samples(50, 2));
    move(500);
    await rec.close();
    const { left, right } = stereo();
    assert.equal(left.length, 1000, 'as long as the session');
    assert.deepEqual(run(left, 0, 100), Array(100).fill(0));
    assert.deepEqual(run(left, 100, 150), Array(50).fill(1));
    assert.deepEqual(run(left, 150, 500), Array(350).fill(0), 'muted: silence');
    assert.deepEqual(run(left, 500, 550), Array(50).fill(2));
    assert.deepEqual(right, Array(1000).fill(0));
  });

  it('a burst queues after the audio before it; audio a little late joins it without a gap', async () => {
    const { rec, stereo, move } = setup();
    move(100);
    rec.personAudio(samples(300, 1));
    rec.personAudio(samples(300, 2));
    move(LATE_MS + 600 - 10);
    rec.personAudio(samples(20, 3));
    await rec.close();
    const { left } = stereo();
    assert.deepEqual(run(left, 100, 400), Array(300).fill(1));
    assert.deepEqual(run(left, 400, 700), Array(300).fill(2), 'queued behind the first');
    assert.deepEqual(run(left, 700, 720), Array(20).fill(3), 'late by less than LATE_MS: straight after');
    assert.equal(left.length, LATE_MS + 700 - 10, 'up to the end of the session');
  });

  it('agent audio plays out from its arrival, after what is still playing', async () => {
    const { rec, stereo, move } = setup();
    move(10);
    rec.agentAudio(samples(100, 7));
    rec.agentAudio(samples(100, 8));
    move(300);
    rec.agentAudio(samples(50, 9));
    move(200);
    await rec.close();
    const { right } = stereo();
    assert.deepEqual(run(right, 0, 10), Array(10).fill(0));
    assert.deepEqual(run(right, 10, 110), Array(100).fill(7));
    assert.deepEqual(run(right, 110, 210), Array(100).fill(8));
    assert.deepEqual(run(right, 210, 310), Array(100).fill(0));
    assert.deepEqual(run(right, 310, 360), Array(50).fill(9));
    assert.equal(right.length, 510);
  });

  it('an interruption drops the agent audio not yet played; at the end, what had not played is not kept', async () => {
    const { rec, stereo, move } = setup();
    rec.agentAudio(samples(1000, 5));
    move(300);
    rec.interrupted();
    rec.agentAudio(samples(100, 6));
    move(600);
    rec.agentAudio(samples(1000, 4));
    move(100);
    await rec.close();
    const { right } = stereo();
    assert.deepEqual(run(right, 0, 300), Array(300).fill(5));
    assert.deepEqual(run(right, 300, 400), Array(100).fill(6), 'what came after plays from the cut');
    assert.deepEqual(run(right, 400, 900), Array(500).fill(0));
    assert.deepEqual(run(right, 900, 1000), Array(100).fill(4));
    assert.equal(right.length, 1000, 'the rest of the last turn was never heard');
  });

  it('each flush writes what is older than LATE_MS; the rest waits, so late audio still finds its place', () => {
    const { rec, writer, stereo, move } = setup();
    move(1000);
    writer.flush();
    assert.equal(stereo().left.length, 1000 - LATE_MS);
    rec.personAudio(samples(10, 3));
    move(LATE_MS + 100);
    writer.flush();
    const { left } = stereo();
    assert.equal(left.length, 1100);
    assert.deepEqual(run(left, 1000, 1010), Array(10).fill(3));
  });
});
