/**
 * A closed-loop acoustic text codec for the sandboxes: the sandbox telephony carrier "speaks" a text as a
 * speech-like audio signal (`encodeSpokenText`), and the sandbox voice service, which has no speech
 * recogniser, reads the text back from a spoken turn (`decodeSpokenText`), so phone-call tests get real
 * transcripts, tool calls by name and a "goodbye" that ends the call. Anything else (real speech, noise,
 * tones, silence, a cut or damaged signal) decodes to null and stays plain speech.
 *
 * Signal: 16-tone continuous-phase FSK, PCM16 LE mono 8 kHz (the telephone rate), amplitude 0.3 of full
 * scale. One symbol = 120 samples (15 ms) carrying 4 bits as one of 16 tones, tone k at (6 + 2k) * 8000/96
 * Hz = 500, 666.7, ..., 3000 Hz (inside the 300-3400 Hz telephone band). The decoder reads the central 96
 * samples of a symbol (12 samples of guard each side), where the tones are exact, mutually orthogonal DFT
 * bins; the guard absorbs alignment error and the half-sample delays of the path. Phase is continuous
 * across symbols (no clicks, constant envelope, so every 20 ms of the utterance is loud: the voice-activity
 * detection sees one turn).
 *
 * Frame, in order:
 *   40 ms digital silence | 3 ms raised-cosine ramp-in (tone of the first preamble symbol)
 *   preamble: 8 symbols, tones 15 0 15 0 12 3 9 6
 *   length: 2 bytes big-endian (0..1000)
 *   payload: the UTF-8 bytes of the text
 *   CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF) over length and payload, 2 bytes big-endian
 *   3 ms raised-cosine ramp-out | 40 ms digital silence
 * Each byte is two symbols, high nibble first: 30 ms per byte (SPOKEN_TEXT_MS_PER_BYTE), plus 0.33 s
 * of framing, so a 40-character sentence lasts about 1.5 s.
 *
 * Decoding: 16 kHz input is brought to 8 kHz by averaging sample pairs (a 2-tap low-pass whatever the
 * pairing phase, so a tone stays a pure tone), the onset is the first 2 ms reaching an RMS of 1500, the
 * symbol alignment is the middle of the plateau of preamble scores over offsets around the onset, then
 * every symbol is read with 16 Goertzel filters. A symbol counts only when its tone holds >= 60% of the
 * window's energy (ordinary speech never does), the preamble must match, the length must fit the audio,
 * and the CRC and the UTF-8 must be valid. Several frames in one turn, each starting after quiet, decode
 * to their texts joined by a space; anything loud before or between frames that is not a frame -> null.
 * The cost is linear: a conversion pass, one short alignment search, 16 x 96 multiply-adds per symbol
 * (a 2 s utterance takes well under a millisecond).
 *
 * Hand-written because no library does this: modem libraries target other modulations and rates, and
 * this one needs to survive only our own path (G.711 mu-law, then the linear 8 -> 16 kHz upsampler in
 * ../audio.ts, arbitrary chunking and leading/trailing silence).
 */

const RATE = 8000;
const SYMBOL = 120;
const GUARD = 12;
const WINDOW = SYMBOL - 2 * GUARD;
const TONES = 16;
const FIRST_BIN = 6;
const BIN_STEP = 2;
const RAMP = 24;
const SILENCE = 320;
const AMPLITUDE = Math.round(0.3 * 32767);
const PREAMBLE = [15, 0, 15, 0, 12, 3, 9, 6] as const;
const MAX_BYTES = 1000;
/** Length (2) and CRC (2) around the payload. */
const HEADER_BYTES = 2;
const CRC_BYTES = 2;

/** A frame starts where 2 ms of audio first reach this RMS (the signal's is >= 4000 after the path). */
const ONSET_RMS = 1500;
const ONSET_SAMPLES = 16;
/** Fraction of a window's energy its tone must hold: preamble alignment, then every data symbol. */
const PREAMBLE_PURITY = 0.8;
const SYMBOL_PURITY = 0.6;
/** Offsets within this much of the best preamble score form the alignment plateau. */
const PLATEAU_TOLERANCE = 0.03;
/** A window quieter than this RMS carries no symbol. */
const MIN_SYMBOL_RMS = 500;

/** Milliseconds of signal per byte of UTF-8 text (framing adds about 330 ms). */
export const SPOKEN_TEXT_MS_PER_BYTE = ((2 * SYMBOL) / RATE) * 1000;

const toneHz = (k: number) => ((FIRST_BIN + BIN_STEP * k) * RATE) / WINDOW;
/** Goertzel coefficients 2 cos(2 pi bin / WINDOW) of the 16 tones. */
const COEFF = Float64Array.from({ length: TONES }, (_, k) => 2 * Math.cos((2 * Math.PI * (FIRST_BIN + BIN_STEP * k)) / WINDOW));

function crc16(bytes: Uint8Array): number {
  let crc = 0xffff;
  for (const b of bytes) {
    crc ^= b << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

export function encodeSpokenText(text: string): Buffer {
  const payload = Buffer.from(text, 'utf8');
  if (payload.length > MAX_BYTES) throw new RangeError(`spoken text is ${payload.length} UTF-8 bytes; at most ${MAX_BYTES}`);
  const body = Buffer.alloc(HEADER_BYTES + payload.length + CRC_BYTES);
  body.writeUInt16BE(payload.length, 0);
  payload.copy(body, HEADER_BYTES);
  body.writeUInt16BE(crc16(body.subarray(0, HEADER_BYTES + payload.length)), HEADER_BYTES + payload.length);

  const symbols: number[] = [...PREAMBLE];
  for (const b of body) symbols.push(b >> 4, b & 15);

  const samples = 2 * SILENCE + 2 * RAMP + symbols.length * SYMBOL;
  const out = Buffer.alloc(samples * 2);
  let at = SILENCE;
  let phase = 0;
  const emit = (tone: number, count: number, envelope: (i: number) => number) => {
    const step = (2 * Math.PI * toneHz(tone)) / RATE;
    for (let i = 0; i < count; i++) {
      out.writeInt16LE(Math.round(AMPLITUDE * envelope(i) * Math.sin(phase)), at * 2);
      phase += step;
      at++;
    }
    phase %= 2 * Math.PI;
  };
  emit(symbols[0], RAMP, (i) => 0.5 - 0.5 * Math.cos((Math.PI * (i + 0.5)) / RAMP));
  for (const s of symbols) emit(s, SYMBOL, () => 1);
  emit(symbols[symbols.length - 1], RAMP, (i) => 0.5 + 0.5 * Math.cos((Math.PI * (i + 0.5)) / RAMP));
  return out;
}

/** The audio at 8 kHz as floats; 16 kHz input averaged in pairs. */
function to8k(pcm: Buffer, sampleRate: 8000 | 16000): Float32Array {
  const bytes = pcm.length & ~1;
  const aligned = pcm.byteOffset % 2 === 0 ? pcm : Buffer.from(pcm.subarray(0, bytes));
  const s = new Int16Array(aligned.buffer, aligned.byteOffset, bytes >> 1);
  if (sampleRate === 8000) return Float32Array.from(s);
  const n = s.length >> 1;
  const z = new Float32Array(n);
  for (let i = 0; i < n; i++) z[i] = (s[2 * i] + s[2 * i + 1]) / 2;
  return z;
}

/** The last sample of the first 2 ms window from `from` loud enough to start a frame, or -1. */
function onsetAfter(z: Float32Array, from: number): number {
  const threshold = ONSET_SAMPLES * ONSET_RMS * ONSET_RMS;
  let sum = 0;
  for (let i = from; i < z.length; i++) {
    sum += z[i] * z[i];
    if (i - from >= ONSET_SAMPLES) sum -= z[i - ONSET_SAMPLES] * z[i - ONSET_SAMPLES];
    if (sum >= threshold) return i;
  }
  return -1;
}

function energy(z: Float32Array, start: number): number {
  let e = 0;
  for (let i = start, end = start + WINDOW; i < end; i++) e += z[i] * z[i];
  return e;
}

/** |DFT|^2 of one window at a tone's bin. */
function goertzel(z: Float32Array, start: number, coeff: number): number {
  let s1 = 0;
  let s2 = 0;
  for (let i = start, end = start + WINDOW; i < end; i++) {
    const s0 = z[i] + coeff * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  return s1 * s1 + s2 * s2 - coeff * s1 * s2;
}

/** Share of the window's energy at a tone (1 for a pure tone; by Parseval the shares sum to <= 1). */
function purity(power: number, e: number): number {
  return e < WINDOW * MIN_SYMBOL_RMS * MIN_SYMBOL_RMS ? 0 : (2 * power) / (WINDOW * e);
}

/** The weakest preamble symbol's purity with symbol 0 starting at `start`. */
function preambleScore(z: Float32Array, start: number): number {
  let min = 1;
  for (let k = 0; k < PREAMBLE.length; k++) {
    const w = start + k * SYMBOL + GUARD;
    min = Math.min(min, purity(goertzel(z, w, COEFF[PREAMBLE[k]]), energy(z, w)));
    if (min < PREAMBLE_PURITY) return min;
  }
  return min;
}

/** The symbol starting at `start`, or -1 when no tone dominates its window. */
function readSymbol(z: Float32Array, start: number): number {
  const w = start + GUARD;
  const e = energy(z, w);
  let best = -1;
  let bestPower = 0;
  for (let k = 0; k < TONES; k++) {
    const p = goertzel(z, w, COEFF[k]);
    if (p > bestPower) {
      bestPower = p;
      best = k;
    }
  }
  return purity(bestPower, e) >= SYMBOL_PURITY ? best : -1;
}

function readBytes(z: Float32Array, start: number, count: number, into: Uint8Array, at: number): boolean {
  for (let i = 0; i < count; i++) {
    const hi = readSymbol(z, start + 2 * i * SYMBOL);
    const lo = hi < 0 ? -1 : readSymbol(z, start + (2 * i + 1) * SYMBOL);
    if (lo < 0) return false;
    into[at + i] = (hi << 4) | lo;
  }
  return true;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * One frame whose signal begins at `onset`: its text and the sample after its ramp-out; `cut` when the
 * audio ends before the frame does (too short for its preamble, or its preamble read and its data not
 * all there yet); null when it is no frame.
 */
function decodeFrame(z: Float32Array, onset: number): { text: string; end: number } | 'cut' | null {
  // The onset lies in the ramp-in or the first samples of symbol 0.
  const lo = Math.max(0, onset - ONSET_SAMPLES - 8);
  const hi = Math.min(onset + RAMP + 8, z.length - PREAMBLE.length * SYMBOL);
  if (hi < lo) return 'cut';
  const scores = new Float64Array(hi - lo + 1);
  let bestAt = -1;
  for (let s = lo; s <= hi; s++) {
    scores[s - lo] = preambleScore(z, s);
    if (bestAt < 0 || scores[s - lo] > scores[bestAt]) bestAt = s - lo;
  }
  const best = scores[bestAt];
  if (best < PREAMBLE_PURITY) return null;
  let first = bestAt;
  let last = bestAt;
  while (first > 0 && scores[first - 1] >= best - PLATEAU_TOLERANCE) first--;
  while (last < scores.length - 1 && scores[last + 1] >= best - PLATEAU_TOLERANCE) last++;
  const start = lo + ((first + last) >> 1);

  const dataStart = start + PREAMBLE.length * SYMBOL;
  const header = new Uint8Array(HEADER_BYTES);
  if (dataStart + 2 * HEADER_BYTES * SYMBOL > z.length) return 'cut';
  if (!readBytes(z, dataStart, HEADER_BYTES, header, 0)) return null;
  const length = (header[0] << 8) | header[1];
  const total = HEADER_BYTES + length + CRC_BYTES;
  if (length > MAX_BYTES) return null;
  if (dataStart + 2 * total * SYMBOL > z.length) return 'cut';
  const body = new Uint8Array(total);
  body.set(header);
  if (!readBytes(z, dataStart + 2 * HEADER_BYTES * SYMBOL, length + CRC_BYTES, body, HEADER_BYTES)) return null;
  if (crc16(body.subarray(0, HEADER_BYTES + length)) !== ((body[total - 2] << 8) | body[total - 1])) return null;
  let text: string;
  try {
    text = utf8.decode(body.subarray(HEADER_BYTES, HEADER_BYTES + length));
  } catch {
    return null;
  }
  return { text, end: dataStart + 2 * total * SYMBOL + RAMP };
}

/** The texts of the frames in `z`, each starting after quiet; `cut` when the last is cut short; null when anything is not a frame. */
function readFrames(z: Float32Array): string[] | 'cut' | null {
  const texts: string[] = [];
  let from = 0;
  for (;;) {
    const onset = onsetAfter(z, from);
    if (onset < 0) return texts;
    const frame = decodeFrame(z, onset);
    if (frame === null || frame === 'cut') return frame;
    texts.push(frame.text);
    // The ramp-out, smeared by a sample or two on the way, is the frame's.
    from = frame.end + 4;
  }
}

/**
 * The text carried by `pcm` (PCM16 LE mono), or null when it is not made only of encoded texts and quiet.
 * Frames after the first (each starting after quiet) are joined with a space.
 */
export function decodeSpokenText(pcm: Buffer, sampleRate: 8000 | 16000): string | null {
  const texts = readFrames(to8k(pcm, sampleRate));
  return Array.isArray(texts) && texts.length ? texts.join(' ') : null;
}

/**
 * Whether `pcm` ends inside an encoded text: what came so far decodes, and the last frame's preamble
 * is there (or the audio is too short to hold it) while the rest of it is not yet. Its sender never
 * stops mid-frame, so a listener waits for the rest rather than ending the turn.
 */
export function spokenTextCutShort(pcm: Buffer, sampleRate: 8000 | 16000): boolean {
  return readFrames(to8k(pcm, sampleRate)) === 'cut';
}
