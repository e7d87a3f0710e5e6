/**
 * The media-stream framing of each carrier (asyncapi/schemas/ProviderA*.yaml, ProviderB*.yaml): the
 * frames the carrier sends, and the reading of the frames the service sends it.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type {
  ProviderAConnected,
  ProviderADtmf,
  ProviderAMark,
  ProviderAMedia,
  ProviderAStart,
  ProviderAStop,
  ProviderBConnected,
  ProviderBDtmf,
  ProviderBError,
  ProviderBMark,
  ProviderBMedia,
  ProviderBStart,
  ProviderBStop,
} from '../../../generated/asyncapi-types.js';

/** A frame from the service, read; `problem` names what the real carrier would object to. */
export type ServiceFrame = ({ kind: 'media'; payload: Buffer } | { kind: 'mark'; name: string } | { kind: 'clear' } | { kind: 'invalid' }) & {
  problem?: string;
};

export interface Framing {
  readonly streamId: string;
  /** The `start` object of the start frame. */
  readonly startInfo: Record<string, unknown>;
  connected(): object;
  start(): object;
  media(chunk: number, timestampMs: number, payload: Buffer): object;
  mark(name: string): object;
  dtmf(digit: string): object;
  stop(): object;
  /** provider_b reports a frame it could not use; provider_a says nothing. */
  error?(detail: string): object;
  read(msg: unknown): ServiceFrame;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function extraKeys(obj: Record<string, unknown>, allowed: string[]): string[] {
  return Object.keys(obj).filter((k) => !allowed.includes(k));
}

/** Reads a service frame once its carrier-specific envelope (streamSid or none) has been checked. */
function readCommon(msg: Record<string, unknown>, envelope: string[]): ServiceFrame {
  const extras = (keys: string[]) => (keys.length ? `unexpected field(s) ${keys.join(', ')} in ${String(msg.event)} frame` : undefined);
  switch (msg.event) {
    case 'media': {
      const media = msg.media;
      if (!isObject(media) || typeof media.payload !== 'string' || !media.payload || !BASE64.test(media.payload)) {
        return { kind: 'invalid', problem: 'media frame without a base64 media.payload' };
      }
      const problem = extras([...extraKeys(msg, [...envelope, 'media']), ...extraKeys(media, ['payload']).map((k) => `media.${k}`)]);
      return { kind: 'media', payload: Buffer.from(media.payload, 'base64'), problem };
    }
    case 'mark': {
      const mark = msg.mark;
      if (!isObject(mark) || typeof mark.name !== 'string' || !mark.name) return { kind: 'invalid', problem: 'mark frame without mark.name' };
      const problem = extras([...extraKeys(msg, [...envelope, 'mark']), ...extraKeys(mark, ['name']).map((k) => `mark.${k}`)]);
      return { kind: 'mark', name: mark.name, problem };
    }
    case 'clear':
      return { kind: 'clear', problem: extras(extraKeys(msg, envelope)) };
    default:
      return { kind: 'invalid', problem: `unknown event ${JSON.stringify(msg.event)}` };
  }
}

function parseJson(msg: unknown): Record<string, unknown> | null {
  return isObject(msg) ? msg : null;
}

export function providerAFraming(info: { accountSid: string; callSid: string; customParameters: Record<string, string> }): Framing {
  const streamSid = `MZ${randomBytes(16).toString('hex')}`;
  let seq = 0;
  const next = () => String(++seq);
  const startInfo = {
    accountSid: info.accountSid,
    streamSid,
    callSid: info.callSid,
    tracks: ['inbound' as const],
    mediaFormat: { encoding: 'audio/x-mulaw' as const, sampleRate: 8000 as const, channels: 1 as const },
    customParameters: info.customParameters,
  };
  return {
    streamId: streamSid,
    startInfo,
    connected: (): ProviderAConnected => ({ event: 'connected', protocol: 'Call', version: '1.0.0' }),
    start: (): ProviderAStart => ({ event: 'start', sequenceNumber: next(), streamSid, start: startInfo }),
    media: (chunk, timestampMs, payload): ProviderAMedia => ({
      event: 'media',
      sequenceNumber: next(),
      streamSid,
      media: { track: 'inbound', chunk: String(chunk), timestamp: String(timestampMs), payload: payload.toString('base64') },
    }),
    mark: (name): ProviderAMark => ({ event: 'mark', sequenceNumber: next(), streamSid, mark: { name } }),
    dtmf: (digit): ProviderADtmf => ({ event: 'dtmf', sequenceNumber: next(), streamSid, dtmf: { track: 'inbound_track', digit } }),
    stop: (): ProviderAStop => ({
      event: 'stop',
      sequenceNumber: next(),
      streamSid,
      stop: { accountSid: info.accountSid, callSid: info.callSid },
    }),
    read(raw) {
      const msg = parseJson(raw);
      if (!msg) return { kind: 'invalid', problem: 'frame is not a JSON object' };
      if (msg.streamSid !== streamSid)
        return { kind: 'invalid', problem: `${String(msg.event)} frame with streamSid ${JSON.stringify(msg.streamSid)}, not ${streamSid}` };
      return readCommon(msg, ['event', 'streamSid']);
    },
  };
}

export function providerBFraming(info: { callControlId: string; callSessionId: string; from: string; to: string; clientState: string | null }): Framing {
  const streamId = randomUUID();
  let seq = 0;
  const next = () => String(++seq);
  const startInfo = {
    call_control_id: info.callControlId,
    call_session_id: info.callSessionId,
    from: info.from,
    to: info.to,
    ...(info.clientState ? { client_state: info.clientState } : {}),
    media_format: { encoding: 'PCMU' as const, sample_rate: 8000 as const, channels: 1 as const },
  };
  return {
    streamId,
    startInfo,
    connected: (): ProviderBConnected => ({ event: 'connected', version: '1.0.0' }),
    start: (): ProviderBStart => ({ event: 'start', sequence_number: next(), stream_id: streamId, start: startInfo }),
    media: (chunk, timestampMs, payload): ProviderBMedia => ({
      event: 'media',
      sequence_number: next(),
      stream_id: streamId,
      media: { track: 'inbound', chunk: String(chunk), timestamp: String(timestampMs), payload: payload.toString('base64') },
    }),
    mark: (name): ProviderBMark => ({ event: 'mark', sequence_number: next(), stream_id: streamId, mark: { name } }),
    dtmf: (digit): ProviderBDtmf => ({
      event: 'dtmf',
      sequence_number: next(),
      stream_id: streamId,
      occurred_at: new Date().toISOString(),
      dtmf: { digit },
    }),
    stop: (): ProviderBStop => ({ event: 'stop', sequence_number: next(), stream_id: streamId, stop: { call_control_id: info.callControlId } }),
    error: (detail): ProviderBError => ({ event: 'error', stream_id: streamId, payload: { code: 100002, title: 'Unknown error', detail } }),
    read(raw) {
      const msg = parseJson(raw);
      if (!msg) return { kind: 'invalid', problem: 'frame is not a JSON object' };
      return readCommon(msg, ['event']);
    },
  };
}
