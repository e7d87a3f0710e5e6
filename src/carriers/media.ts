/**
 * The carriers' media stream messages, reduced to what the call bridge needs. Both dialects
 * (asyncapi/schemas/ProviderA*.yaml, ProviderB*.yaml) share the frame envelope `{event, ...}` and the
 * `media`, `mark`, `dtmf` and `stop` frames, parsed here once; each provider's `media.ts` says how its
 * `start` identifies the call, where the sequence number is, and writes our `media`, `mark` and `clear`.
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

export type StartEvent = Extract<MediaEvent, { kind: 'start' }>;

export interface MediaDialect {
  /** null: not a JSON object with a known shape (the bridge logs and ignores it). */
  parse(raw: string): MediaEvent | null;
  media(streamId: string, ulawBase64: string): string;
  mark(streamId: string, name: string): string;
  clear(streamId: string): string;
}

/** What sets one carrier's frames apart from the other's. */
export interface FrameRules {
  /** The call and stream a `start` frame names; null when they are missing. */
  start(frame: Record<string, unknown>): StartEvent | null;
  /** The frame's sequence number, where the carrier writes one. */
  sequence(frame: Record<string, unknown>, media: Record<string, unknown>): string | null;
  /** An `error` frame's message (a carrier without error frames: null, and the frame is ignored). */
  error?(frame: Record<string, unknown>): string | null;
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

function parseJson(raw: string): Record<string, unknown> | null {
  try {
    return obj(JSON.parse(raw));
  } catch {
    return null;
  }
}

/** One frame of either dialect, by the rules of its carrier. */
export function parseFrame(raw: string, rules: FrameRules): MediaEvent | null {
  const m = parseJson(raw);
  if (!m) return null;
  switch (m.event) {
    case 'connected':
      return { kind: 'connected' };
    case 'start':
      return rules.start(m);
    case 'media': {
      const media = obj(m.media);
      if (!media) return null;
      if (media.track !== undefined && media.track !== 'inbound') return { kind: 'ignored' };
      const payload = decodePayload(media.payload);
      if (!payload) return null;
      const seq = Number(rules.sequence(m, media) ?? NaN);
      return { kind: 'media', payload, seq: Number.isFinite(seq) ? seq : null };
    }
    case 'mark': {
      const name = str(obj(m.mark)?.name);
      return name === null ? null : { kind: 'mark', name };
    }
    case 'dtmf': {
      const digit = str(obj(m.dtmf)?.digit);
      return digit === null ? null : { kind: 'dtmf', digit };
    }
    case 'error': {
      const message = rules.error?.(m);
      return message === undefined || message === null ? { kind: 'ignored' } : { kind: 'error', message };
    }
    case 'stop':
      return { kind: 'stop' };
    default:
      return { kind: 'ignored' };
  }
}
