/**
 * The carriers' media stream messages, reduced to what the call bridge needs. Each provider's dialect
 * (provider-a/media.ts, provider-b/media.ts) parses its JSON frames (asyncapi/schemas/ProviderA*.yaml,
 * ProviderB*.yaml) into MediaEvents and writes our `media`, `mark` and `clear` frames.
 */
export type MediaEvent =
  | { kind: 'connected' }
  | { kind: 'start'; streamId: string; callSid: string; callId: string | null; streamToken: string | null }
  /** Caller audio, mu-law 8 kHz; `seq` orders frames when the carrier may reorder them. */
  | { kind: 'media'; payload: Buffer; seq: number | null }
  | { kind: 'mark'; name: string }
  | { kind: 'dtmf'; digit: string }
  | { kind: 'stop' }
  | { kind: 'error'; message: string }
  /** A frame we do not use (unknown event, outbound track). */
  | { kind: 'ignored' };

export interface MediaDialect {
  /** null: not a JSON object with a known shape (the bridge logs and ignores it). */
  parse(raw: string): MediaEvent | null;
  media(streamId: string, ulawBase64: string): string;
  mark(streamId: string, name: string): string;
  clear(streamId: string): string;
}

/** Largest mu-law payload accepted in one frame (1 s); anything larger is refused as malformed. */
export const MAX_PAYLOAD_BYTES = 8000;

export function decodePayload(value: unknown): Buffer | null {
  if (typeof value !== 'string' || value.length > (MAX_PAYLOAD_BYTES * 4) / 3 + 4) return null;
  const bytes = Buffer.from(value, 'base64');
  return bytes.length ? bytes : null;
}

export const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
export const obj = (v: unknown): Record<string, unknown> | null => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null);

export function parseJson(raw: string): Record<string, unknown> | null {
  try {
    return obj(JSON.parse(raw));
  } catch {
    return null;
  }
}
