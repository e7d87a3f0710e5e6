/**
 * provider_b media streaming frames (Telnyx-style). The socket identifies the stream, so frames we send
 * carry no stream id. The call is identified by `start.call_control_id` and the `client_state` we set
 * when dialing or answering (it carries the call id and the stream token).
 */
import type { MediaDialect, MediaEvent } from '../media.js';
import { decodePayload, obj, parseJson, str } from '../media.js';
import { decodeClientState } from './rest.js';

export const providerBMedia: MediaDialect = {
  parse(raw: string): MediaEvent | null {
    const m = parseJson(raw);
    if (!m) return null;
    switch (m.event) {
      case 'connected':
        return { kind: 'connected' };
      case 'start': {
        const start = obj(m.start);
        const callSid = str(start?.call_control_id);
        if (!start || !callSid) return null;
        const state = decodeClientState(start.client_state);
        return { kind: 'start', streamId: str(m.stream_id) ?? '', callSid, callId: state?.call_id ?? null, streamToken: state?.stream_token ?? null };
      }
      case 'media': {
        const media = obj(m.media);
        if (!media) return null;
        if (media.track !== undefined && media.track !== 'inbound') return { kind: 'ignored' };
        const payload = decodePayload(media.payload);
        if (!payload) return null;
        const chunk = Number(str(media.chunk) ?? str(m.sequence_number) ?? NaN);
        return { kind: 'media', payload, seq: Number.isFinite(chunk) ? chunk : null };
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
        const e = obj(m.payload) ?? obj(m.error);
        return { kind: 'error', message: str(e?.detail) ?? str(e?.title) ?? 'stream error' };
      }
      case 'stop':
        return { kind: 'stop' };
      default:
        return { kind: 'ignored' };
    }
  },
  media: (_streamId, payload) => `{"event":"media","media":{"payload":"${payload}"}}`,
  mark: (_streamId, name) => JSON.stringify({ event: 'mark', mark: { name } }),
  clear: () => JSON.stringify({ event: 'clear' }),
};
