/**
 * PCM16 LE mono helpers shared by the voice service, the carriers and the simulators: energy (speech detection), G.711 mu-law
 * (via `alawmulaw`), the resamplers the carriers need (8 kHz -> 16 kHz in, 24 kHz -> 8 kHz out) and the
 * 24 kHz -> 16 kHz of web sessions' recordings (both on one polyphase FIR, `FirResampler`).
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

/** Mu-law's code for a zero sample. */
export const MULAW_SILENCE = 0xff;

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

// A-law likewise (SIP peers may choose PCMA).
const ALAW_DECODE = alawmulaw.alaw.decode(Uint8Array.from({ length: 256 }, (_, i) => i));
const ALAW_ENCODE = (() => {
  const samples = new Int16Array(65536);
  for (let i = 0; i < 65536; i++) samples[i] = i - 32768;
  return alawmulaw.alaw.encode(samples);
})();

/** A-law's code for a zero sample. */
export const ALAW_SILENCE = 0xd5;

export function alawToPcm16(alaw: Buffer): Buffer {
  const out = Buffer.allocUnsafe(alaw.length * 2);
  const view = new Int16Array(out.buffer, out.byteOffset, alaw.length);
  for (let i = 0; i < alaw.length; i++) view[i] = ALAW_DECODE[alaw[i]];
  return out;
}

export function pcm16ToAlaw(pcm: Buffer): Buffer {
  const samples = int16View(pcm);
  const out = Buffer.allocUnsafe(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = ALAW_ENCODE[samples[i] + 32768];
  return out;
}

// One G.711 law to the other, byte for byte: each entry is the other law's code for the sample the
// byte decodes to, so the result is exactly decoding to PCM16 and encoding again, without the PCM16.
const ALAW_TO_MULAW = Uint8Array.from({ length: 256 }, (_, i) => MULAW_ENCODE[ALAW_DECODE[i] + 32768]);
const MULAW_TO_ALAW = Uint8Array.from({ length: 256 }, (_, i) => ALAW_ENCODE[MULAW_DECODE[i] + 32768]);

export function alawToMulaw(alaw: Buffer): Buffer {
  const out = Buffer.allocUnsafe(alaw.length);
  for (let i = 0; i < alaw.length; i++) out[i] = ALAW_TO_MULAW[alaw[i]];
  return out;
}

export function mulawToAlaw(ulaw: Buffer): Buffer {
  const out = Buffer.allocUnsafe(ulaw.length);
  for (let i = 0; i < ulaw.length; i++) out[i] = MULAW_TO_ALAW[ulaw[i]];
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

/**
 * Rational resampling by `up`/`down`: the input with `up - 1` zeros after each sample, low-passed by
 * `filter` (designed at `up` times the input rate, unity gain at DC: each phase is scaled by `up`),
 * keeping every `down`-th sample. Polyphase: only the kept outputs are computed, each from the taps
 * that meet non-zero inputs. The last inputs the filter still needs and the position of the next
 * output carry over to the next chunk, so chunk-by-chunk output equals whole-buffer output.
 */
export class FirResampler {
  /** Per phase r (the output's position modulo `up`), the taps r, r + up, ... times `up`. */
  private readonly phases: Float64Array[];
  private readonly keep: number;
  private readonly history: Float64Array;
  private scratch = new Float64Array(0);
  /** The next output's position in upsampled samples, counted from the next chunk's first input. */
  private position = 0;

  constructor(
    private readonly up: number,
    private readonly down: number,
    private readonly filter: Float64Array,
  ) {
    this.phases = Array.from({ length: up }, (_, r) => {
      const taps: number[] = [];
      for (let k = r; k < filter.length; k += up) taps.push(filter[k] * up);
      return Float64Array.from(taps);
    });
    this.keep = Math.ceil(filter.length / up) - 1;
    this.history = new Float64Array(this.keep);
  }

  /** Output samples for `n` more input samples (what `process` of that many returns). */
  private outputs(n: number): number {
    const span = n * this.up;
    return span > this.position ? Math.ceil((span - this.position) / this.down) : 0;
  }

  process(pcm: Buffer): Buffer {
    const n = pcm.length >> 1;
    const keep = this.keep;
    if (this.scratch.length < keep + n) this.scratch = new Float64Array(keep + n);
    const x = this.scratch;
    x.set(this.history, 0);
    const input = int16View(pcm);
    for (let i = 0; i < n; i++) x[keep + i] = input[i];
    const outCount = this.outputs(n);
    const out = Buffer.allocUnsafe(outCount * 2);
    const y = new Int16Array(out.buffer, out.byteOffset, outCount);
    const span = n * this.up;
    let p = this.position;
    let o = 0;
    if (this.up === 1) {
      // One phase, the whole (symmetric, linear-phase) filter: fold its two halves, half the multiplications.
      const h = this.filter;
      const last = h.length - 1;
      const mid = last / 2;
      for (; p < span; p += this.down) {
        const end = keep + p;
        let acc = h[mid] * x[end - mid];
        for (let k = 0; k < mid; k++) acc += h[k] * (x[end - k] + x[end - last + k]);
        y[o++] = clamp16(acc);
      }
    } else {
      for (; p < span; p += this.down) {
        const r = p % this.up;
        const h = this.phases[r];
        const at = keep + (p - r) / this.up;
        let acc = 0;
        for (let t = 0; t < h.length; t++) acc += h[t] * x[at - t];
        y[o++] = clamp16(acc);
      }
    }
    this.position = p - span;
    this.history.set(x.subarray(n, n + keep));
    return out;
  }
}

function clamp16(v: number): number {
  const r = Math.round(v);
  return r > 32767 ? 32767 : r < -32768 ? -32768 : r;
}

const DOWN_FILTER = lowPassTaps(DOWN_TAPS, 3400, 24_000);

/** 24 kHz -> 8 kHz (agent audio to a phone call): low-pass at 3.4 kHz, then every 3rd sample. */
export class Downsampler24kTo8k extends FirResampler {
  constructor() {
    super(1, 3, DOWN_FILTER);
  }
}

// 97 taps at 48 kHz (24 kHz doubled), cut off at 7 kHz: 1 kHz flat; from 8.4 kHz on (what would fold
// below 8 kHz at 16 kHz) over 70 dB down. 48 samples of delay at 48 kHz: exactly 1 ms.
const TO_16K_TAPS = 97;
const TO_16K_FILTER = lowPassTaps(TO_16K_TAPS, 7000, 48_000);

/**
 * 24 kHz -> 16 kHz (agent audio in a web session's recording): doubled with zeros, low-passed at
 * 7 kHz, every 3rd sample kept (the same windowed-sinc design as the phone path's 24 -> 8 kHz).
 */
export class Resampler24kTo16k extends FirResampler {
  constructor() {
    super(2, 3, TO_16K_FILTER);
  }
}
