/**
 * The sandbox's agent voice: a speech-like signal (a 140 Hz voiced source with two formant-ish harmonics,
 * shaped into 4 syllables a second), PCM16 24 kHz. One second is synthesised once and its 20 ms frames
 * are kept base64-encoded, so streaming a reply allocates no audio per frame.
 */
import { OUTPUT_RATE } from '../../voice/live-protocol.js';

export const FRAME_MS = 20;
const FRAME_SAMPLES = (OUTPUT_RATE * FRAME_MS) / 1000;
const LOOP_FRAMES = 50;

function synthesiseLoop(): Buffer {
  const n = FRAME_SAMPLES * LOOP_FRAMES;
  const out = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) {
    const t = i / OUTPUT_RATE;
    const syllable = 0.5 - 0.5 * Math.cos(2 * Math.PI * 4 * t);
    const voiced = Math.sin(2 * Math.PI * 140 * t) + 0.6 * Math.sin(2 * Math.PI * 700 * t) + 0.35 * Math.sin(2 * Math.PI * 1220 * t);
    out.writeInt16LE(Math.round(6000 * syllable * (voiced / 1.95)), i * 2);
  }
  return out;
}

const LOOP = synthesiseLoop();

/** Base64 of the loop's 20 ms frames; reply frame k is FRAMES_B64[k % FRAMES_B64.length]. */
export const FRAMES_B64: readonly string[] = Array.from({ length: LOOP_FRAMES }, (_, k) =>
  LOOP.subarray(k * FRAME_SAMPLES * 2, (k + 1) * FRAME_SAMPLES * 2).toString('base64'),
);
