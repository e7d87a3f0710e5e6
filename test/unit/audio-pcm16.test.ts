import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Downsampler24kTo8k, Upsampler8kTo16k, isSpeech, mulawToPcm16, pcm16ToMulaw, rms } from '../../src/audio/pcm16.js';

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
