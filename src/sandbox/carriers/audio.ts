/** The sandbox callee's sounds, as G.711 mu-law 8 kHz. */
import { readFileSync } from 'node:fs';
import { pcm16ToMulaw } from '../../audio/pcm16.js';
import { encodeSpokenText } from '../spoken-text.js';

export const FRAME_BYTES = 160;
/** mu-law of digital silence. */
export const SILENCE_BYTE = 0xff;
export const SILENCE_FRAME = Buffer.alloc(FRAME_BYTES, SILENCE_BYTE);

const fixture = (name: string) => readFileSync(new URL(`./audio/${name}`, import.meta.url));

/** An answering machine's greeting (about 6.8 s) and its beep (0.5 s). */
export const VOICEMAIL_GREETING = fixture('voicemail-greeting.ulaw-8k.raw');
export const BEEP = fixture('beep.ulaw-8k.raw');

/** `text` as the speech-like signal the sandbox voice service reads back. */
export function spokenText(text: string): Buffer {
  return pcm16ToMulaw(encodeSpokenText(text));
}

/** Simulated milliseconds of mu-law audio. */
export function ulawMs(bytes: number): number {
  return bytes / 8;
}
