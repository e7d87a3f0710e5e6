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

/**
 * What a frame is, read from its raw bytes without parsing it, so a frame over its stream's budget
 * costs a scan and not a JSON parse and base64 decoding: a `media` frame (how many bytes its payload
 * decodes to) or a `dtmf` frame. Both carriers write `event` first; a frame written otherwise (or
 * whose payload cannot be found) is null and judged once parsed. Only ever used to drop a frame
 * early: a frame written to mislead it can only get itself dropped.
 */
export type FrameHead = { event: 'media'; payloadBytes: number } | { event: 'dtmf' } | null;

const EVENT_FIRST = /^\s*\{\s*"event"\s*:\s*"([a-z]{1,16})"/;
const PAYLOAD_KEY = Buffer.from('"payload"');
const VALUE_OPENING = /^\s*:\s*"/;
const QUOTE = 0x22;
const EQUALS = 0x3d;

export function frameHead(raw: Buffer): FrameHead {
  const event = EVENT_FIRST.exec(raw.toString('latin1', 0, 48))?.[1];
  if (event === 'dtmf') return { event };
  if (event !== 'media') return null;
  const key = raw.indexOf(PAYLOAD_KEY);
  if (key < 0) return null;
  const from = key + PAYLOAD_KEY.length;
  const opening = VALUE_OPENING.exec(raw.toString('latin1', from, from + 16));
  if (!opening) return null;
  const start = from + opening[0].length;
  const end = raw.indexOf(QUOTE, start);
  if (end < 0) return null;
  let padding = 0;
  while (padding < 2 && end - padding > start && raw[end - 1 - padding] === EQUALS) padding++;
  return { event, payloadBytes: Math.floor(((end - start - padding) * 3) / 4) };
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
