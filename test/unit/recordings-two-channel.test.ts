/** The recording's parts that need no service: Range parsing, the WAV header, and the two channels' playout model. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseRange } from '../../src/recordings/range.js';
import { wavHeader } from '../../src/recordings/wav.js';
import { TwoChannelRecorder } from '../../src/recordings/two-channel.js';
import type { RecordingWriter } from '../../src/recordings/writer.js';

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

describe('two channels as heard', () => {
  const samples = (n: number, v: number) => {
    const b = Buffer.alloc(n * 2);
    for (let i = 0; i < n; i++) b.writeInt16LE(v, i * 2);
    return b;
  };
  const recorder = () => {
    const out: Buffer[] = [];
    const writer = { append: (b: Buffer) => out.push(Buffer.from(b)), close: async () => undefined } as unknown as RecordingWriter;
    const stereo = () => {
      const all = Buffer.concat(out);
      const left: number[] = [];
      const right: number[] = [];
      for (let i = 0; i < all.length; i += 4) {
        left.push(all.readInt16LE(i));
        right.push(all.readInt16LE(i + 2));
      }
      return { left, right };
    };
    return { rec: new TwoChannelRecorder(writer, 8000), stereo };
  };

  it('agent audio plays out one sample per person sample from when it arrives, silence when none is queued', () => {
    const { rec, stereo } = recorder();
    rec.person(samples(160, 1));
    rec.agent(samples(240, 7));
    rec.person(samples(160, 2));
    rec.person(samples(160, 3));
    rec.person(samples(160, 4));
    const { left, right } = stereo();
    assert.equal(left.length, 640);
    assert.deepEqual(left.slice(0, 160), Array(160).fill(1));
    assert.deepEqual(right.slice(0, 160), Array(160).fill(0), 'nothing played before it arrived');
    assert.deepEqual(right.slice(160, 400), Array(240).fill(7));
    assert.deepEqual(right.slice(400), Array(240).fill(0));
  });

  it('an interruption drops what was queued and not yet played', () => {
    const { rec, stereo } = recorder();
    rec.agent(samples(800, 5));
    rec.person(samples(160, 1));
    rec.interrupted();
    rec.person(samples(160, 1));
    const { right } = stereo();
    assert.deepEqual(right.slice(0, 160), Array(160).fill(5));
    assert.deepEqual(right.slice(160), Array(160).fill(0), 'cut where the person barged in');
  });
});
