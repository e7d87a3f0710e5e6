/**
 * Wire facts of the Gemini Live BidiGenerateContent protocol shared by the adapter and the sandbox voice
 * service. Message shapes are the `@google/genai` types (LiveClientMessage, LiveServerMessage), so a field
 * name that drifts from the SDK fails the type check.
 */
import type { LiveClientMessage, LiveServerMessage } from '@google/genai';

export type { LiveClientMessage, LiveServerMessage };

export const BIDI_PATH = '/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent';
export const INPUT_AUDIO_MIME = 'audio/pcm;rate=16000';
export const OUTPUT_AUDIO_MIME = 'audio/pcm;rate=24000';
export const OUTPUT_RATE = 24_000;
/** Bytes per millisecond of PCM16 mono at 16 kHz (input) and 24 kHz (output). */
export const INPUT_BYTES_PER_MS = 32;
export const OUTPUT_BYTES_PER_MS = 48;

/** The endpoint URL: a bare ws(s)://host[:port] gets the standard BidiGenerateContent path. */
export function bidiUrl(base: string, apiKey: string | undefined): URL {
  const url = new URL(base);
  if (url.pathname === '' || url.pathname === '/') url.pathname = BIDI_PATH;
  if (apiKey) url.searchParams.set('key', apiKey);
  return url;
}

/** The same URL with any credential removed, for logs. */
export function loggableUrl(url: URL): string {
  const copy = new URL(url);
  copy.search = '';
  return copy.toString();
}
