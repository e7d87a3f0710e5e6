/**
 * Phone keypad keys (DTMF) as in-band audio: each key is the sum of one low ("row") and one high
 * ("column") tone of ITU-T Q.23. A carrier whose media stream takes no key events (provider_a's
 * bidirectional stream takes only `media`, `mark` and `clear`) gets the keys as these tones in the
 * agent's audio, G.711 mu-law at 8 kHz in whole 20 ms frames: 120 ms of tone and 80 ms of silence a
 * key (Q.24 asks for at least 40 ms of each), `w` 500 ms of silence, `W` 1 s.
 */
import { pcm16ToMulaw } from './pcm16.js';

export const DTMF_ROWS = [697, 770, 852, 941] as const;
export const DTMF_COLUMNS = [1209, 1336, 1477, 1633] as const;
/** The keypad: KEYPAD[row][column]. */
export const KEYPAD = ['123A', '456B', '789C', '*0#D'] as const;

const RATE = 8000;
const FRAME_SAMPLES = 160;
const TONE_MS = 120;
const GAP_MS = 80;
const PAUSE_MS: Record<string, number> = { w: 500, W: 1000 };
/** Peak of each of the two tones (PCM16): together about -6 dBFS, well above any speech threshold. */
const TONE_AMPLITUDE = 8000;

/** The row and column frequencies of a key, or null when it is not a key. */
export function keyFrequencies(key: string): [number, number] | null {
  for (let r = 0; r < KEYPAD.length; r++) {
    const c = KEYPAD[r].indexOf(key);
    if (key.length === 1 && c >= 0) return [DTMF_ROWS[r], DTMF_COLUMNS[c]];
  }
  return null;
}

/** How long `keys` take to play as tones, ms (keys, `w` and `W`; anything else counts nothing). */
export function dtmfDurationMs(keys: string): number {
  let ms = 0;
  for (const k of keys) ms += PAUSE_MS[k] ?? (keyFrequencies(k) ? TONE_MS + GAP_MS : 0);
  return ms;
}

/** `keys` (keys, `w`, `W`) as mu-law tones, a whole number of 20 ms frames; other characters are skipped. */
export function dtmfTonesUlaw(keys: string): Buffer {
  const samples = Math.ceil((dtmfDurationMs(keys) * RATE) / 1000 / FRAME_SAMPLES) * FRAME_SAMPLES;
  const pcm = Buffer.alloc(samples * 2);
  let at = 0;
  for (const k of keys) {
    const pause = PAUSE_MS[k];
    if (pause !== undefined) {
      at += (pause * RATE) / 1000;
      continue;
    }
    const f = keyFrequencies(k);
    if (!f) continue;
    const n = (TONE_MS * RATE) / 1000;
    for (let i = 0; i < n; i++) {
      const t = i / RATE;
      const v = TONE_AMPLITUDE * (Math.sin(2 * Math.PI * f[0] * t) + Math.sin(2 * Math.PI * f[1] * t));
      pcm.writeInt16LE(Math.round(v), (at + i) * 2);
    }
    at += n + (GAP_MS * RATE) / 1000;
  }
  return pcm16ToMulaw(pcm);
}
