/**
 * G.711 mu-law against the standard, and the call transcoder's framing. The reference codec below is
 * the ITU-T G.711 mu-law law written out independently (bias 0x84, clip 32635, eight segments of 16
 * steps, code bits inverted), as in the standard's reference implementations; the spot values are
 * decoder outputs of the standard's table (14-bit magnitudes 0, 2, 30, 33, 93, 8031, times 4).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mulawToPcm16, pcm16ToMulaw } from '../../src/audio/pcm16.js';
import { CallTranscoder, FRAME_BYTES } from '../../src/carriers/transcode.js';

const BIAS = 0x84;
const CLIP = 32635;

function refEncode(sample: number): number {
  let pcm = sample;
  const sign = pcm < 0 ? 0x80 : 0;
  if (sign) pcm = -pcm;
  if (pcm > CLIP) pcm = CLIP;
  pcm += BIAS;
  let exponent = 7;
  for (let mask = 0x4000; (pcm & mask) === 0 && exponent > 0; mask >>= 1) exponent--;
  const mantissa = (pcm >> (exponent + 3)) & 0x0f;
  return ~(sign | (exponent << 4) | mantissa) & 0xff;
}

function refDecode(code: number): number {
  const u = ~code & 0xff;
  const t = (((u & 0x0f) << 3) + BIAS) << ((u & 0x70) >> 4);
  return u & 0x80 ? BIAS - t : t - BIAS;
}

const decode1 = (code: number) => mulawToPcm16(Buffer.from([code])).readInt16LE(0);

describe('G.711 mu-law against the standard', () => {
  it('decodes every one of the 256 codes as the standard does', () => {
    for (let code = 0; code < 256; code++) assert.equal(decode1(code), refDecode(code), `code 0x${code.toString(16)}`);
  });

  it('matches the decoder values of the standard table', () => {
    const table: Array<[number, number]> = [
      [0xff, 0],
      [0xfe, 8],
      [0xf0, 120],
      [0xef, 132],
      [0xe0, 372],
      [0x80, 32124],
      [0x7f, 0],
      [0x7e, -8],
      [0x70, -120],
      [0x6f, -132],
      [0x00, -32124],
    ];
    for (const [code, value] of table) assert.equal(decode1(code), value, `code 0x${code.toString(16)}`);
  });

  it('encodes every 16-bit sample to the code the standard gives', () => {
    const all = Buffer.alloc(65536 * 2);
    for (let i = 0; i < 65536; i++) all.writeInt16LE(i - 32768, i * 2);
    const codes = pcm16ToMulaw(all);
    let mismatches = 0;
    let first = '';
    for (let i = 0; i < 65536; i++) {
      const expected = refEncode(i - 32768);
      if (codes[i] !== expected) {
        mismatches++;
        first ||= `sample ${i - 32768}: got 0x${codes[i].toString(16)}, standard 0x${expected.toString(16)}`;
      }
    }
    assert.equal(mismatches, 0, first);
  });

  it('re-encodes every decoded code to itself (except the two zeros, which share one level)', () => {
    for (let code = 0; code < 256; code++) {
      const back = pcm16ToMulaw(mulawToPcm16(Buffer.from([code])))[0];
      if (code === 0x7f) assert.equal(back, 0xff);
      else assert.equal(back, code);
    }
  });
});

describe('call transcoder', () => {
  it('turns 20 ms of caller audio into 20 ms at 16 kHz', () => {
    const t = new CallTranscoder();
    assert.equal(t.toModel(Buffer.alloc(FRAME_BYTES, 0xff)).length, 640);
  });

  it('cuts agent audio of any chunk size into whole 160-byte frames and keeps the remainder', () => {
    const t = new CallTranscoder();
    const sizes = [480 * 2, 7 * 2, 1000 * 2, 3 * 2, 2400 * 2];
    let frames = 0;
    let samplesIn = 0;
    for (const n of sizes) {
      samplesIn += n / 2;
      for (const f of t.toCaller(Buffer.alloc(n))) {
        assert.equal(f.length, FRAME_BYTES);
        frames++;
      }
    }
    const last = t.flush();
    const outSamples = frames * FRAME_BYTES + (last ? FRAME_BYTES : 0);
    assert.ok(Math.abs(outSamples - samplesIn / 3) < FRAME_BYTES, `${outSamples} samples out for ${samplesIn / 3} expected`);
    assert.equal(t.flush(), null, 'nothing left after a flush');
  });

  it('discards the remainder on barge-in', () => {
    const t = new CallTranscoder();
    t.toCaller(Buffer.alloc(500 * 2));
    t.discard();
    assert.equal(t.flush(), null);
  });
});
