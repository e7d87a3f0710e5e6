/**
 * Validation of client frames `{mime_type, data}` into the spec's in-session error codes, in the order
 * of its table: JSON, object, mime_type present/string/supported, data present/string/base64/non-empty,
 * then the size caps of typed messages and images. And the quick read of a frame of the usual shape
 * (peekFrame), from which a frame over its budget is dropped without being parsed.
 */
import type { RealtimeClientMessage, RealtimeError } from '../../generated/asyncapi-types.js';

/** The in-session error codes, as the AsyncAPI `RealtimeError` message lists them. */
export type ServerErrorCode = RealtimeError['code'];
/** The codes of an unusable client frame; the others are the session's own (no audio, budgets, forwarding, upstream). */
export type FrameErrorCode = Exclude<
  ServerErrorCode,
  'no_audio_received' | 'text_rate_limited' | 'image_rate_limited' | 'forward_failed' | 'upstream_unavailable'
>;

/** A typed message (`text/plain`) may be at most this many bytes of UTF-8: it becomes one transcript turn. */
export const MAX_TEXT_MESSAGE_BYTES = 16 * 1024;
/**
 * An image (`image/jpeg`) may be at most this many bytes: a camera or screen frame of the client
 * library (at most 1280 pixels wide, JPEG quality 0.7) is a few hundred kB.
 */
export const MAX_IMAGE_BYTES = 2 * 1024 * 1024;
/**
 * The largest client frame the socket reads: a largest image in base64 (2,796,204 characters) and 4 KiB
 * for a data URL prefix and the JSON around it, 2,800,300 bytes. The socket closes with 1009 on a
 * longer frame from its header, before reading it: the bytes of a bigger image would otherwise be
 * received, unmasked and checked as UTF-8 on the loop only to be refused (issue 32's image flood).
 */
export const MAX_FRAME_BYTES = Math.ceil(MAX_IMAGE_BYTES / 3) * 4 + 4096;

export type MimeType = RealtimeClientMessage['mime_type'];
export const SUPPORTED_MIME_TYPES: readonly MimeType[] = ['audio/pcm', 'image/jpeg', 'text/plain'];

export type FrameFailure = { ok: false; code: FrameErrorCode; error: string };
export type Frame = { ok: true; mimeType: MimeType; bytes: Buffer } | FrameFailure;

const DATA_URL = /^data:[^,]*;base64,/;
const EQUALS = 61;

const fail = (code: FrameErrorCode, error: string): FrameFailure => ({ ok: false, code, error });

/**
 * Decodes standard base64 strictly: only `A-Z a-z 0-9 + /`, then at most two `=` that complete the
 * last group (unpadded is fine). Buffer.from is lenient: it skips characters outside the alphabet,
 * stops at an `=` and takes `-` and `_` as base64url. So after ruling out non-ASCII, `-`, `_` and bad
 * padding, a string is valid exactly when it decodes to as many bytes as its length says: any other
 * character makes it decode short. This is the per-frame check of every audio frame; it replaced a
 * RegExp pass and a trailing-`=` replace that cost three times as much (test/unit/realtime-frames.test.ts
 * checks it against that RegExp over generated strings).
 */
export function decodeBase64(data: string): Buffer | null {
  let body = data;
  if (body.startsWith('data:')) {
    const prefix = DATA_URL.exec(body);
    if (!prefix) return null;
    body = body.slice(prefix[0].length);
  }
  const length = body.length;
  if (Buffer.byteLength(body, 'utf8') !== length || body.includes('-') || body.includes('_')) return null;
  let padding = 0;
  while (padding < length && body.charCodeAt(length - 1 - padding) === EQUALS) padding++;
  const unpadded = length - padding;
  if (padding > 2 || unpadded % 4 === 1 || (padding > 0 && length % 4 !== 0)) return null;
  const bytes = Buffer.from(body, 'base64');
  return bytes.length === Math.floor((unpadded * 3) / 4) ? bytes : null;
}

export function parseFrame(raw: string | Buffer, isBinary: boolean): Frame {
  if (isBinary) return fail('binary_frame_unsupported', 'Binary frames are not supported; send JSON text frames {"mime_type", "data"} with base64 data.');
  let msg: unknown;
  try {
    msg = JSON.parse(raw.toString());
  } catch {
    return fail('invalid_json', 'The message is not valid JSON.');
  }
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return fail('invalid_message', 'The message must be a JSON object {"mime_type", "data"}.');
  const m = msg as Record<string, unknown>;
  if (!('mime_type' in m)) return fail('missing_mime_type', "The message has no 'mime_type' field.");
  if (typeof m.mime_type !== 'string') return fail('invalid_mime_type', "'mime_type' must be a string.");
  if (!SUPPORTED_MIME_TYPES.includes(m.mime_type as MimeType)) {
    return fail('unsupported_mime_type', `Unsupported mime_type '${m.mime_type.slice(0, 100)}'; use audio/pcm, image/jpeg or text/plain.`);
  }
  if (!('data' in m)) return fail('missing_data', "The message has no 'data' field.");
  if (typeof m.data !== 'string') return fail('invalid_data', "'data' must be a base64 string.");
  const bytes = decodeBase64(m.data);
  if (!bytes) return fail('invalid_base64', "'data' is not valid base64 (a complete 'data:...;base64,' prefix is allowed).");
  if (bytes.length === 0) return fail('empty_payload', "'data' decodes to zero bytes.");
  return oversize(m.mime_type as MimeType, bytes.length) ?? { ok: true, mimeType: m.mime_type as MimeType, bytes };
}

/** The size cap a message of `mimeType` whose data decodes to `bytes` breaks, if any. */
export function oversize(mimeType: MimeType, bytes: number): FrameFailure | null {
  if (mimeType === 'text/plain' && bytes > MAX_TEXT_MESSAGE_BYTES) {
    return fail('text_too_long', `A text message may be at most ${MAX_TEXT_MESSAGE_BYTES} bytes (16 KiB) of UTF-8; this one is ${bytes}.`);
  }
  if (mimeType === 'image/jpeg' && bytes > MAX_IMAGE_BYTES) {
    return fail('image_too_large', `An image may be at most ${MAX_IMAGE_BYTES} bytes (2 MiB); this one is ${bytes}. Send a smaller or more compressed JPEG.`);
  }
  return null;
}

/** What peekFrame reads: the frame's mime type and how many bytes its data decodes to. */
export interface FramePeek {
  mimeType: MimeType;
  bytes: number;
}

/** JSON's whitespace (`\s` would take more). */
const WS = '[ \\t\\n\\r]*';
const MIME = '"(audio/pcm|image/jpeg|text/plain)"';
/** The frame up to the opening quote of `data`, with `mime_type` first or `data` first. */
const MIME_FIRST = new RegExp(`^${WS}\\{${WS}"mime_type"${WS}:${WS}${MIME}${WS},${WS}"data"${WS}:${WS}"`);
const DATA_FIRST = new RegExp(`^${WS}\\{${WS}"data"${WS}:${WS}"`);
/** The frame from the closing quote of `data`. */
const MIME_LAST = new RegExp(`^"${WS},${WS}"mime_type"${WS}:${WS}${MIME}${WS}\\}${WS}$`);
const CLOSED = new RegExp(`^"${WS}\\}${WS}$`);
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
/** Longer heads and tails than these are not the usual shape. */
const HEAD_CHARS = 80;
const TAIL_CHARS = 80;
const DATA_URL_CHARS = 200;

/**
 * Reads a frame of the usual shape, `{"mime_type": "...", "data": "..."}` in either order with any
 * whitespace (what JSON.stringify and json.dumps write), without parsing it or decoding its data: the
 * data string is found by two native scans (its closing quote, and that it holds no backslash, so
 * that it ends there). Anything else is null, for parseFrame to judge. Only ever used to drop a frame
 * early (a frame written to mislead it can only get itself dropped): what it reads of a valid frame
 * is what parseFrame would find.
 */
export function peekFrame(raw: Buffer): FramePeek | null {
  // latin1: one character a byte, so string offsets are byte offsets.
  const head = raw.toString('latin1', 0, HEAD_CHARS);
  const mimeFirst = MIME_FIRST.exec(head);
  const opening = mimeFirst ?? DATA_FIRST.exec(head);
  if (!opening) return null;
  const start = opening[0].length;
  const end = raw.indexOf(QUOTE, start);
  if (end < 0 || raw.length - end > TAIL_CHARS) return null;
  const escape = raw.indexOf(BACKSLASH, start);
  if (escape >= 0 && escape < end) return null;
  const tail = raw.toString('latin1', end);
  const mimeType = (mimeFirst ? CLOSED.test(tail) && mimeFirst[1] : MIME_LAST.exec(tail)?.[1]) as MimeType | false | undefined;
  if (!mimeType) return null;
  let from = start;
  if (raw.toString('latin1', start, start + 5) === 'data:') {
    const comma = raw.indexOf(COMMA, start);
    if (comma < 0 || comma > Math.min(end, start + DATA_URL_CHARS)) return null;
    from = comma + 1;
  }
  let padding = 0;
  while (padding < 2 && end - padding > from && raw[end - 1 - padding] === EQUALS) padding++;
  return { mimeType, bytes: Math.floor(((end - from - padding) * 3) / 4) };
}

/**
 * In a text session only these codes are sent (the spec's rule); a message too long or over the
 * typed-message budget gets an apology from the agent instead, other unusable frames are dropped silently.
 */
export const TEXT_SESSION_CODES: ReadonlySet<FrameErrorCode> = new Set(['binary_frame_unsupported', 'missing_data']);
