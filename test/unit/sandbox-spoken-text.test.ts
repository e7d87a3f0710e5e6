/**
 * The sandbox's acoustic text codec (src/sandbox/spoken-text.ts): texts survive the telephone path
 * (8 kHz, G.711 mu-law, the linear 8 -> 16 kHz upsampler, arbitrary chunking, unaligned leading and
 * trailing silence, low noise), and nothing else decodes: real speech, silence, noise, a tone, a cut or
 * altered signal. Random choices come from a seeded PRNG; a failure names its seed.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { Upsampler8kTo16k, mulawToPcm16, pcm16ToMulaw, rms } from '../../src/audio/pcm16.js';
import { SPOKEN_TEXT_MS_PER_BYTE, decodeSpokenText, encodeSpokenText, spokenTextCutShort } from '../../src/sandbox/spoken-text.js';

const FIXTURES = new URL('../fixtures/audio/', import.meta.url);
const fixture = (name: string) => readFileSync(new URL(name, FIXTURES));

/** mulberry32: a small seeded PRNG in [0, 1). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const int = (rnd: () => number, lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));

/** Gaussian noise of standard deviation `sigma` added to PCM16 (a copy). */
function withNoise(pcm: Buffer, sigma: number, rnd: () => number): Buffer {
  const out = Buffer.alloc(pcm.length);
  for (let i = 0; i + 1 < pcm.length; i += 2) {
    const g = Math.sqrt(-2 * Math.log(1 - rnd())) * Math.cos(2 * Math.PI * rnd());
    out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(pcm.readInt16LE(i) + sigma * g))), i);
  }
  return out;
}

/** Splits a buffer into pieces of random sizes (1..max bytes, even when `even`). */
function chunks(buf: Buffer, rnd: () => number, max: number, even: boolean): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < buf.length;) {
    let size = int(rnd, 1, max);
    if (even) size = Math.max(2, size & ~1);
    out.push(buf.subarray(i, Math.min(buf.length, i + size)));
    i += size;
  }
  return out;
}

/**
 * The carrier path: leading silence (any sample count) and trailing silence at 8 kHz, optional noise,
 * mu-law out and back in random chunks, upsampled chunk by chunk, then the 16 kHz stream re-chunked
 * at random and concatenated as the sandbox voice service does.
 */
function telephonePath(pcm8k: Buffer, rnd: () => number, noiseSigma = 0): Buffer {
  let line: Buffer = Buffer.concat([Buffer.alloc(2 * int(rnd, 0, 4000)), pcm8k, Buffer.alloc(2 * int(rnd, 0, 4000))]);
  if (noiseSigma) line = withNoise(line, noiseSigma, rnd);
  const ulaw = Buffer.concat(chunks(line, rnd, 400, true).map(pcm16ToMulaw));
  const up = new Upsampler8kTo16k();
  const pcm16k = Buffer.concat(chunks(ulaw, rnd, 300, false).map((c) => up.process(mulawToPcm16(c))));
  // A leading sample at 16 kHz shifts the pairing of samples too.
  const shifted = rnd() < 0.5 ? pcm16k : Buffer.concat([Buffer.alloc(2), pcm16k]);
  return Buffer.concat(chunks(shifted, rnd, 1500, true));
}

function tone(freq: number, rate: number, seconds: number, amplitude = 10_000): Buffer {
  const n = Math.round(rate * seconds);
  const out = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) out.writeInt16LE(Math.round(amplitude * Math.sin((2 * Math.PI * freq * i) / rate)), i * 2);
  return out;
}

const TEXTS = [
  '',
  'Hello, I would like to book a cleaning for next Tuesday.',
  'My order number is 4471-2209; the zip code is 94107.',
  'Punctuation: !"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~',
  'Zoë ünïcode ✓ — 日本語 and emoji 🙂',
  'goodbye',
  ' leading and trailing spaces ',
  'line one\nline two\ttabbed',
  'x',
  'The quick brown fox jumps over the lazy dog. '.repeat(7).slice(0, 300),
];

describe('spoken text: round trips', () => {
  it('decodes every text through mu-law, the upsampler, random chunks and unaligned silence', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const rnd = prng(seed);
      for (const text of TEXTS) {
        const heard = decodeSpokenText(telephonePath(encodeSpokenText(text), rnd), 16_000);
        assert.equal(heard, text, `seed ${seed}`);
      }
    }
  });

  it('decodes through low-level line noise', () => {
    for (let seed = 100; seed < 120; seed++) {
      const rnd = prng(seed);
      const text = TEXTS[seed % TEXTS.length];
      assert.equal(decodeSpokenText(telephonePath(encodeSpokenText(text), rnd, 250), 16_000), text, `seed ${seed}`);
    }
  });

  it('decodes at 8 kHz directly, with and without mu-law and leading silence', () => {
    const rnd = prng(7);
    for (const text of TEXTS) {
      const pcm = encodeSpokenText(text);
      assert.equal(decodeSpokenText(pcm, 8000), text);
      const line = Buffer.concat([Buffer.alloc(2 * int(rnd, 0, 999)), pcm]);
      assert.equal(decodeSpokenText(mulawToPcm16(pcm16ToMulaw(line)), 8000), text);
    }
  });

  it('reads a buffer at an odd byte offset', () => {
    const pcm = encodeSpokenText('odd offset');
    const shifted = Buffer.alloc(pcm.length + 1);
    pcm.copy(shifted, 1);
    assert.equal(decodeSpokenText(shifted.subarray(1), 8000), 'odd offset');
  });

  it('joins texts spoken one after another in the same turn', () => {
    const rnd = prng(11);
    const pcm = Buffer.concat([encodeSpokenText('first part'), Buffer.alloc(2 * 1234), encodeSpokenText('second part')]);
    assert.equal(decodeSpokenText(telephonePath(pcm, rnd), 16_000), 'first part second part');
  });

  it('carries up to 1000 UTF-8 bytes and refuses more', () => {
    const rnd = prng(3);
    const longest = 'é'.repeat(500);
    assert.equal(decodeSpokenText(telephonePath(encodeSpokenText(longest), rnd), 16_000), longest);
    assert.throws(() => encodeSpokenText('a'.repeat(1001)), RangeError);
    assert.throws(() => encodeSpokenText('✓'.repeat(334)), RangeError);
  });
});

describe('spoken text: the signal', () => {
  it('is PCM16 8 kHz framed by 40 ms of digital silence, SPOKEN_TEXT_MS_PER_BYTE per byte', () => {
    const a = encodeSpokenText('abc');
    const b = encodeSpokenText('abcdefghij');
    assert.equal(a.length % 2, 0);
    const msOf = (pcm: Buffer) => pcm.length / 2 / 8;
    assert.equal(msOf(b) - msOf(a), 7 * SPOKEN_TEXT_MS_PER_BYTE);
    assert.ok(SPOKEN_TEXT_MS_PER_BYTE <= 40);
    const sentence = encodeSpokenText('I would like to book an appointment please');
    assert.ok(msOf(sentence) >= 1000 && msOf(sentence) <= 2000, `${msOf(sentence)} ms`);
    for (const pcm of [a, b]) {
      assert.ok(pcm.subarray(0, 320 * 2).equals(Buffer.alloc(640)), 'leading silence');
      assert.ok(pcm.subarray(pcm.length - 640).equals(Buffer.alloc(640)), 'trailing silence');
      assert.notEqual(pcm.readInt16LE(640 + 10), 0);
    }
  });

  it('is loud in every 20 ms window between the silences, and within range', () => {
    for (const text of ['', 'hello there', 'Zoë ünïcode ✓', TEXTS[9]]) {
      const pcm = encodeSpokenText(text);
      const inner = pcm.subarray(640, pcm.length - 640);
      let min = Infinity;
      for (let i = 0; i + 320 <= inner.length; i += 2) min = Math.min(min, rms(inner.subarray(i, i + 320)));
      assert.ok(min >= 1000, `min 20 ms RMS ${min} for ${JSON.stringify(text)}`);
      let peak = 0;
      for (let i = 0; i < pcm.length; i += 2) peak = Math.max(peak, Math.abs(pcm.readInt16LE(i)));
      assert.ok(peak < 0.4 * 32768, `peak ${peak}`);
    }
  });

  it('stays loud through the telephone path, so the sandbox hears one continuous turn', () => {
    const up = new Upsampler8kTo16k();
    const pcm = up.process(mulawToPcm16(pcm16ToMulaw(encodeSpokenText(TEXTS[1]))));
    const inner = pcm.subarray(1280, pcm.length - 1280);
    for (let i = 0; i + 640 <= inner.length; i += 640) assert.ok(rms(inner.subarray(i, i + 640)) >= 1000);
  });
});

describe('spoken text: anything else is not text', () => {
  it('gives null for every real recording, at 16 kHz and from the carrier mu-law', () => {
    const files = readdirSync(FIXTURES);
    assert.ok(files.length >= 5);
    for (const name of files) {
      const audio = fixture(name);
      if (name.endsWith('.pcm16le-16k.raw')) assert.equal(decodeSpokenText(audio, 16_000), null, name);
      else if (name.endsWith('.ulaw-8k.raw')) {
        const pcm = mulawToPcm16(audio);
        assert.equal(decodeSpokenText(pcm, 8000), null, name);
        assert.equal(decodeSpokenText(new Upsampler8kTo16k().process(pcm), 16_000), null, name);
      }
    }
  });

  it('gives null for silence, white noise, a 1 kHz tone and empty input', () => {
    const rnd = prng(5);
    assert.equal(decodeSpokenText(Buffer.alloc(0), 16_000), null);
    assert.equal(decodeSpokenText(Buffer.alloc(1), 8000), null);
    assert.equal(decodeSpokenText(fixture('silence-1s.pcm16le-16k.raw'), 16_000), null);
    assert.equal(decodeSpokenText(Buffer.alloc(32_000), 8000), null);
    for (const sigma of [200, 3000, 10_000]) {
      assert.equal(decodeSpokenText(withNoise(Buffer.alloc(64_000), sigma, rnd), 16_000), null, `noise ${sigma}`);
    }
    assert.equal(decodeSpokenText(tone(1000, 16_000, 2), 16_000), null);
    assert.equal(decodeSpokenText(tone(1000, 8000, 2), 8000), null);
  });

  it('gives null for a cut signal', () => {
    const pcm = encodeSpokenText('This sentence is cut short.');
    const samples = pcm.length / 2;
    for (const keep of [0.1, 0.3, 0.5, 0.8, 0.95]) {
      const cut = Buffer.concat([pcm.subarray(0, Math.round(samples * keep) * 2), Buffer.alloc(8000)]);
      assert.equal(decodeSpokenText(cut, 8000), null, `kept ${keep}`);
      const rnd = prng(Math.round(keep * 100));
      assert.equal(decodeSpokenText(telephonePath(pcm.subarray(0, Math.round(samples * keep) * 2), rnd), 16_000), null, `kept ${keep}`);
    }
    // Without its last symbol and ramp (what is left ends on a CRC nibble).
    const symbolBytes = (SPOKEN_TEXT_MS_PER_BYTE / 2) * 8 * 2;
    assert.equal(decodeSpokenText(pcm.subarray(0, pcm.length - 640 - 48 - symbolBytes), 8000), null);
  });

  it('gives null when one symbol carries a flipped bit (the CRC catches it)', () => {
    // 'o' (0x6F) and 'n' (0x6E) differ in one bit of one symbol; the encodings agree up to its start.
    const good = encodeSpokenText('hello');
    const other = encodeSpokenText('helln');
    assert.equal(decodeSpokenText(other, 8000), 'helln');
    let at = 0;
    while (good.readInt16LE(at) === other.readInt16LE(at)) at += 2;
    at -= 2; // the phase is continuous: the symbols' first samples are equal
    const symbolBytes = (SPOKEN_TEXT_MS_PER_BYTE / 2) * 8 * 2;
    const flipped = Buffer.from(good);
    other.copy(flipped, at, at, at + symbolBytes);
    assert.equal(decodeSpokenText(flipped, 8000), null);
    assert.equal(decodeSpokenText(telephonePath(flipped, prng(9)), 16_000), null);
  });

  it('gives null for a text followed or preceded by speech in the same audio', () => {
    const speech = mulawToPcm16(fixture('caller-hello.ulaw-8k.raw'));
    const text = encodeSpokenText('hello there');
    assert.equal(decodeSpokenText(Buffer.concat([text, speech]), 8000), null);
    assert.equal(decodeSpokenText(Buffer.concat([speech, text]), 8000), null);
  });
});

describe('spoken text: cut short at the end of the audio so far', () => {
  it('is told from a whole text, a cut text followed by quiet, and anything else', () => {
    const pcm = encodeSpokenText('Hello, this is Sam.');
    const samples = pcm.length / 2;
    const preambleOnwards = 320 + 24;
    for (const kept of [preambleOnwards + 60, preambleOnwards + 600, Math.round(samples * 0.5), samples - 400]) {
      const cut = pcm.subarray(0, kept * 2);
      assert.equal(spokenTextCutShort(cut, 8000), true, `kept ${kept} samples`);
      const carried = new Upsampler8kTo16k().process(mulawToPcm16(pcm16ToMulaw(cut)));
      assert.equal(spokenTextCutShort(carried, 16_000), true, `kept ${kept} samples, through mu-law and the upsampler`);
      assert.equal(spokenTextCutShort(Buffer.concat([encodeSpokenText('Hi.'), cut]), 8000), true, `kept ${kept} samples after a whole text`);
      assert.equal(spokenTextCutShort(Buffer.concat([cut, Buffer.alloc(16_000)]), 8000), false, `kept ${kept} samples, then quiet`);
    }
    assert.equal(spokenTextCutShort(pcm, 8000), false);
    assert.equal(spokenTextCutShort(telephonePath(pcm, prng(3)), 16_000), false);
    assert.equal(spokenTextCutShort(Buffer.alloc(0), 8000), false);
    assert.equal(spokenTextCutShort(tone(1000, 8000, 2), 8000), false);
    assert.equal(spokenTextCutShort(mulawToPcm16(fixture('caller-hello.ulaw-8k.raw')), 8000), false);
  });
});
