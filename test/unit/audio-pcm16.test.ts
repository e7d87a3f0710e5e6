import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Downsampler24kTo8k, Resampler24kTo16k, Upsampler8kTo16k, isSpeech, mulawToPcm16, pcm16ToMulaw, rms } from '../../src/audio/pcm16.js';

const FIXTURES = new URL('../fixtures/audio/', import.meta.url);
const fixture = (name: string) => readFileSync(new URL(name, FIXTURES));

function tone(freq: number, rate: number, seconds: number, amplitude = 10_000): Buffer {
  const n = Math.round(rate * seconds);
  const out = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) out.writeInt16LE(Math.round(amplitude * Math.sin((2 * Math.PI * freq * i) / rate)), i * 2);
  return out;
}

function frames(buf: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < buf.length; i += size) out.push(buf.subarray(i, Math.min(buf.length, i + size)));
  return out;
}

/** RMS ignoring the filter's start-up transient. */
const steadyRms = (pcm: Buffer) => rms(pcm.subarray(Math.floor(pcm.length / 4) & ~1));

describe('PCM16 energy', () => {
  it('measures the RMS of a sine as amplitude / sqrt(2)', () => {
    assert.ok(Math.abs(rms(tone(440, 16_000, 0.5)) - 10_000 / Math.SQRT2) < 20);
  });

  it('finds speech in the caller recordings and none in digital silence', () => {
    const speechFrames = frames(fixture('caller-hello.pcm16le-16k.raw'), 640).filter((f) => isSpeech(f)).length;
    assert.ok(speechFrames > 100, `speech frames: ${speechFrames}`);
    assert.equal(frames(fixture('silence-1s.pcm16le-16k.raw'), 640).filter((f) => isSpeech(f)).length, 0);
  });

  it('reads frames at odd byte offsets', () => {
    const t = tone(440, 16_000, 0.1);
    const shifted = Buffer.alloc(t.length + 1);
    t.copy(shifted, 1);
    assert.equal(rms(shifted.subarray(1)), rms(t));
  });
});

describe('G.711 mu-law', () => {
  it('round-trips PCM16 within the codec error', () => {
    const pcm = tone(1000, 8000, 0.1);
    const ulaw = pcm16ToMulaw(pcm);
    assert.equal(ulaw.length, pcm.length / 2);
    const back = mulawToPcm16(ulaw);
    assert.equal(back.length, pcm.length);
    let maxErr = 0;
    for (let i = 0; i < pcm.length; i += 2) maxErr = Math.max(maxErr, Math.abs(pcm.readInt16LE(i) - back.readInt16LE(i)));
    assert.ok(maxErr < 10_000 * 0.04, `max error ${maxErr}`);
  });

  it('decodes the carrier recording to speech', () => {
    const pcm = mulawToPcm16(fixture('caller-hello.ulaw-8k.raw'));
    assert.equal(pcm.length, fixture('caller-hello.ulaw-8k.raw').length * 2);
    assert.ok(frames(pcm, 320).filter((f) => isSpeech(f)).length > 100);
  });
});

describe('8 kHz -> 16 kHz', () => {
  it('doubles the samples and keeps a 1 kHz tone', () => {
    const input = tone(1000, 8000, 0.5);
    const out = new Upsampler8kTo16k().process(input);
    assert.equal(out.length, input.length * 2);
    const ratio = steadyRms(out) / steadyRms(input);
    assert.ok(ratio > 0.9 && ratio < 1.05, `ratio ${ratio}`);
  });

  it('gives the same samples frame by frame as for the whole buffer', () => {
    const input = mulawToPcm16(fixture('caller-question.ulaw-8k.raw'));
    const whole = new Upsampler8kTo16k().process(input);
    const up = new Upsampler8kTo16k();
    assert.deepEqual(Buffer.concat(frames(input, 320).map((f) => up.process(f))), whole);
  });
});

describe('24 kHz -> 8 kHz', () => {
  it('keeps a third of the samples', () => {
    assert.equal(new Downsampler24kTo8k().process(tone(1000, 24_000, 0.02)).length, 320);
  });

  it('passes a 1 kHz tone', () => {
    const ratio = steadyRms(new Downsampler24kTo8k().process(tone(1000, 24_000, 0.5))) / (10_000 / Math.SQRT2);
    assert.ok(ratio > 0.95 && ratio < 1.05, `1 kHz gain ${ratio}`);
  });

  it('attenuates a 6 kHz tone instead of folding it to 2 kHz', () => {
    const ratio = steadyRms(new Downsampler24kTo8k().process(tone(6000, 24_000, 0.5))) / (10_000 / Math.SQRT2);
    assert.ok(ratio < 0.01, `6 kHz gain ${ratio}`);
  });

  it('gives the same samples frame by frame (any frame size) as for the whole buffer', () => {
    const input = Buffer.concat([tone(700, 24_000, 0.3), tone(2500, 24_000, 0.3, 5000)]);
    const whole = new Downsampler24kTo8k().process(input);
    for (const size of [960, 962, 322]) {
      const down = new Downsampler24kTo8k();
      assert.deepEqual(Buffer.concat(frames(input, size).map((f) => down.process(f))), whole, `frame size ${size}`);
    }
  });
});

/** The frequency of a steady tone from its zero crossings (the first quarter, the filter's start-up, left out). */
function frequencyOf(pcm: Buffer, rate: number): number {
  const from = Math.floor(pcm.length / 8);
  const n = (pcm.length >> 1) - from;
  let crossings = 0;
  let prev = pcm.readInt16LE(from * 2);
  for (let i = from + 1; i < from + n; i++) {
    const v = pcm.readInt16LE(i * 2);
    if ((prev < 0 && v >= 0) || (prev >= 0 && v < 0)) crossings++;
    prev = v;
  }
  return crossings / 2 / (n / rate);
}

describe('24 kHz -> 16 kHz (web session recordings)', () => {
  it('keeps two samples in three: half a second in, half a second out', () => {
    const out = new Resampler24kTo16k().process(tone(1000, 24_000, 0.5));
    assert.equal(out.length / 2, 8000);
    assert.equal(new Resampler24kTo16k().process(tone(1000, 24_000, 0.02)).length / 2, 320, 'a 20 ms frame gives 20 ms');
  });

  it('a 1 kHz tone comes out as a 1 kHz tone at 16 kHz, at the same level', () => {
    const out = new Resampler24kTo16k().process(tone(1000, 24_000, 0.5));
    const f = frequencyOf(out, 16_000);
    assert.ok(Math.abs(f - 1000) < 5, `frequency ${f} Hz`);
    const ratio = steadyRms(out) / (10_000 / Math.SQRT2);
    assert.ok(ratio > 0.97 && ratio < 1.03, `1 kHz gain ${ratio}`);
  });

  it('passes speech frequencies up to 5 kHz', () => {
    for (const freq of [300, 3000, 5000]) {
      const out = new Resampler24kTo16k().process(tone(freq, 24_000, 0.5));
      const ratio = steadyRms(out) / (10_000 / Math.SQRT2);
      assert.ok(ratio > 0.9 && ratio < 1.05, `${freq} Hz gain ${ratio}`);
      assert.ok(Math.abs(frequencyOf(out, 16_000) - freq) < freq * 0.01, `${freq} Hz stays ${freq} Hz`);
    }
  });

  it('attenuates an 11 kHz tone instead of folding it to 5 kHz, and a 9 kHz one instead of 7 kHz', () => {
    for (const freq of [11_000, 9000]) {
      const ratio = steadyRms(new Resampler24kTo16k().process(tone(freq, 24_000, 0.5))) / (10_000 / Math.SQRT2);
      assert.ok(ratio < 0.001, `${freq} Hz gain ${ratio}`);
    }
  });

  it('gives the same samples frame by frame (any frame size) as for the whole buffer', () => {
    const input = Buffer.concat([tone(700, 24_000, 0.3), tone(2500, 24_000, 0.3, 5000), tone(6000, 24_000, 0.1, 3000)]);
    const whole = new Resampler24kTo16k().process(input);
    assert.equal(whole.length / 2, Math.ceil((input.length / 2) * (2 / 3)));
    for (const size of [960, 962, 322, 2, 4800]) {
      const down = new Resampler24kTo16k();
      assert.deepEqual(Buffer.concat(frames(input, size).map((f) => down.process(f))), whole, `frame size ${size}`);
    }
  });
});
