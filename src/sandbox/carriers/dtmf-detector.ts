/**
 * The sandbox callee's ear for keypad tones in the audio it hears (how a person or a phone menu hears
 * keys played in-band, as provider_a's calls carry them): the Goertzel power of the eight DTMF
 * frequencies in each 20 ms mu-law frame. A frame holds a key when one row and one column tone each
 * carry at least a quarter of its energy and together at least 70 % (speech spreads its energy over
 * many frequencies); a key is heard once it held for two frames in a row, and again only after a frame
 * without it.
 */
import { mulawToPcm16 } from '../../audio/pcm16.js';
import { DTMF_COLUMNS, DTMF_ROWS, KEYPAD } from '../../audio/dtmf.js';

const RATE = 8000;
const MIN_MEAN_SQUARE = 100 * 100;
const MIN_TONE_SHARE = 0.25;
const MIN_PAIR_SHARE = 0.7;

function goertzelPower(samples: Float64Array, frequency: number): number {
  const coeff = 2 * Math.cos((2 * Math.PI * frequency) / RATE);
  let s1 = 0;
  let s2 = 0;
  for (let i = 0; i < samples.length; i++) {
    const s0 = samples[i] + coeff * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  return s1 * s1 + s2 * s2 - coeff * s1 * s2;
}

/** The key a frame holds, or null. */
export function frameKey(ulaw: Buffer): string | null {
  const pcm = mulawToPcm16(ulaw);
  const n = pcm.length / 2;
  if (n < 80) return null;
  const samples = new Float64Array(n);
  let energy = 0;
  for (let i = 0; i < n; i++) {
    samples[i] = pcm.readInt16LE(i * 2);
    energy += samples[i] * samples[i];
  }
  if (energy / n < MIN_MEAN_SQUARE) return null;
  // A sine of energy E over n samples has Goertzel power n * E / 2: the share of the frame's energy.
  const share = (f: number) => goertzelPower(samples, f) / ((n * energy) / 2);
  const best = (freqs: readonly number[]) => {
    let at = 0;
    let value = -1;
    freqs.forEach((f, i) => {
      const s = share(f);
      if (s > value) [at, value] = [i, s];
    });
    return { at, value };
  };
  const row = best(DTMF_ROWS);
  const column = best(DTMF_COLUMNS);
  if (row.value < MIN_TONE_SHARE || column.value < MIN_TONE_SHARE || row.value + column.value < MIN_PAIR_SHARE) return null;
  return KEYPAD[row.at][column.at];
}

export class DtmfDetector {
  private last: string | null = null;
  private run = 0;

  /** Feeds one played frame; returns a key when it has just been heard. */
  push(ulaw: Buffer): string | null {
    const key = ulaw.length ? frameKey(ulaw) : null;
    if (key === null || key !== this.last) {
      this.last = key;
      this.run = key === null ? 0 : 1;
      return null;
    }
    this.run += 1;
    return this.run === 2 ? key : null;
  }
}
