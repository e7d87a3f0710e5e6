/**
 * PCM16 LE mono helpers shared by the voice service, the carriers and the simulators: energy (speech detection), G.711 mu-law
 * (via `alawmulaw`), and the two resamplers the carriers need (8 kHz -> 16 kHz in, 24 kHz -> 8 kHz out).
 * The resamplers are hand-written: each is a few dozen lines, carries its state across 20 ms frames (so
 * frame-by-frame output equals whole-buffer output) and avoids a native dependency.
 */
import alawmulaw from 'alawmulaw';

/** Below this RMS (about -40 dBFS) a frame is treated as silence. */
export const DEFAULT_SPEECH_RMS = 300;

function int16View(pcm: Buffer): Int16Array {
  if (pcm.byteOffset % 2 === 0) return new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length >> 1);
  const copy = Buffer.from(pcm);
  return new Int16Array(copy.buffer, copy.byteOffset, copy.length >> 1);
}

/** Root mean square of PCM16 LE samples (0..32768). */
export function rms(pcm: Buffer): number {
  const n = pcm.length >> 1;
  if (n === 0) return 0;
  let sum = 0;
  if (pcm.byteOffset % 2 === 0) {
    const s = new Int16Array(pcm.buffer, pcm.byteOffset, n);
    for (let i = 0; i < n; i++) sum += s[i] * s[i];
  } else {
    for (let i = 0; i < n; i++) {
      const v = pcm.readInt16LE(i * 2);
      sum += v * v;
    }
  }
  return Math.sqrt(sum / n);
}

export function isSpeech(pcm: Buffer, threshold = DEFAULT_SPEECH_RMS): boolean {
  return rms(pcm) >= threshold;
}

/** Duration in milliseconds of PCM16 mono at `rate` Hz. */
export function pcmDurationMs(bytes: number, rate: number): number {
  return ((bytes >> 1) / rate) * 1000;
}

// G.711 by lookup: 256 decoded samples and one code per 16-bit sample, computed once from alawmulaw's
// encoder and decoder (so the results are exactly its), since a call transcodes 50 frames a second each way.
const MULAW_DECODE = alawmulaw.mulaw.decode(Uint8Array.from({ length: 256 }, (_, i) => i));
const MULAW_ENCODE = (() => {
  const samples = new Int16Array(65536);
  for (let i = 0; i < 65536; i++) samples[i] = i - 32768;
  return alawmulaw.mulaw.encode(samples);
})();

export function mulawToPcm16(ulaw: Buffer): Buffer {
  const out = Buffer.allocUnsafe(ulaw.length * 2);
  const view = new Int16Array(out.buffer, out.byteOffset, ulaw.length);
  for (let i = 0; i < ulaw.length; i++) view[i] = MULAW_DECODE[ulaw[i]];
  return out;
}

export function pcm16ToMulaw(pcm: Buffer): Buffer {
  const samples = int16View(pcm);
  const out = Buffer.allocUnsafe(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = MULAW_ENCODE[samples[i] + 32768];
  return out;
}

/**
 * 8 kHz -> 16 kHz by linear interpolation (enough for speech going to a recogniser): each input sample
 * yields the midpoint with the previous sample, then itself. Half a sample of delay.
 */
export class Upsampler8kTo16k {
  private last = 0;

  process(pcm8k: Buffer): Buffer {
    const x = int16View(pcm8k);
    const n = x.length;
    const out = Buffer.allocUnsafe(n * 4);
    const y = new Int16Array(out.buffer, out.byteOffset, n * 2);
    let prev = this.last;
    for (let i = 0; i < n; i++) {
      const v = x[i];
      y[2 * i] = (prev + v) >> 1;
      y[2 * i + 1] = v;
      prev = v;
    }
    this.last = prev;
    return out;
  }
}

// 47 taps at 3.4 kHz: 1 kHz flat, 3 kHz -2 dB, 4.6 kHz (which folds onto 3.4 kHz) -50 dB, 6 kHz -79 dB.
const DOWN_TAPS = 47;
const DOWN_FACTOR = 3;

/** Windowed-sinc (Blackman) low-pass, unity gain at DC. `cutoff` in Hz at `rate` Hz. */
export function lowPassTaps(taps: number, cutoff: number, rate: number): Float64Array {
  const h = new Float64Array(taps);
  const fc = cutoff / rate;
  const mid = (taps - 1) / 2;
  let sum = 0;
  for (let k = 0; k < taps; k++) {
    const t = k - mid;
    const sinc = t === 0 ? 2 * fc : Math.sin(2 * Math.PI * fc * t) / (Math.PI * t);
    const w = 0.42 - 0.5 * Math.cos((2 * Math.PI * k) / (taps - 1)) + 0.08 * Math.cos((4 * Math.PI * k) / (taps - 1));
    h[k] = sinc * w;
    sum += h[k];
  }
  for (let k = 0; k < taps; k++) h[k] /= sum;
  return h;
}

const DOWN_FILTER = lowPassTaps(DOWN_TAPS, 3400, 24_000);
const DOWN_MID = (DOWN_TAPS - 1) / 2;

/**
 * 24 kHz -> 8 kHz: low-pass at 3.4 kHz, then every 3rd sample. Only the kept samples are computed; the
 * last TAPS-1 inputs and the decimation phase carry over to the next frame.
 */
export class Downsampler24kTo8k {
  private history = new Float64Array(DOWN_TAPS - 1);
  private scratch = new Float64Array(0);
  private phase = 0;

  process(pcm24k: Buffer): Buffer {
    const n = pcm24k.length >> 1;
    const keep = DOWN_TAPS - 1;
    if (this.scratch.length < keep + n) this.scratch = new Float64Array(keep + n);
    const x = this.scratch;
    x.set(this.history, 0);
    const input = int16View(pcm24k);
    for (let i = 0; i < n; i++) x[keep + i] = input[i];
    const outCount = n > this.phase ? Math.ceil((n - this.phase) / DOWN_FACTOR) : 0;
    const out = Buffer.allocUnsafe(outCount * 2);
    const y = new Int16Array(out.buffer, out.byteOffset, outCount);
    let o = 0;
    let i = this.phase;
    for (; i < n; i += DOWN_FACTOR) {
      const end = keep + i;
      // The filter is symmetric (linear phase): fold the two halves, half the multiplications.
      let acc = DOWN_FILTER[DOWN_MID] * x[end - DOWN_MID];
      for (let k = 0; k < DOWN_MID; k++) acc += DOWN_FILTER[k] * (x[end - k] + x[end - (DOWN_TAPS - 1) + k]);
      const v = Math.round(acc);
      y[o++] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
    }
    this.phase = i - n;
    this.history.set(x.subarray(n, n + keep));
    return out;
  }
}
