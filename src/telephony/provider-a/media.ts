/** provider_a Media Streams frames (Twilio-style): `streamSid` on every frame we send. */
import type { MediaDialect, MediaEvent } from '../media.js';
import { decodePayload, obj, parseJson, str } from '../media.js';

export const providerAMedia: MediaDialect = {
  parse(raw: string): MediaEvent | null {
    const m = parseJson(raw);
    if (!m) return null;
    switch (m.event) {
      case 'connected':
        return { kind: 'connected' };
      case 'start': {
        const start = obj(m.start);
        const streamSid = str(m.streamSid) ?? str(start?.streamSid);
        const callSid = str(start?.callSid);
        if (!start || !streamSid || !callSid) return null;
        const params = obj(start.customParameters) ?? {};
        return { kind: 'start', streamId: streamSid, callSid, callId: str(params.call_id), streamToken: str(params.stream_token) };
      }
      case 'media': {
        const media = obj(m.media);
        if (!media) return null;
        if (media.track !== undefined && media.track !== 'inbound') return { kind: 'ignored' };
        const payload = decodePayload(media.payload);
        if (!payload) return null;
        const chunk = Number(str(media.chunk) ?? NaN);
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
      case 'stop':
        return { kind: 'stop' };
      default:
        return { kind: 'ignored' };
    }
  },
  media: (streamSid, payload) => `{"event":"media","streamSid":${JSON.stringify(streamSid)},"media":{"payload":"${payload}"}}`,
  mark: (streamSid, name) => JSON.stringify({ event: 'mark', streamSid, mark: { name } }),
  clear: (streamSid) => JSON.stringify({ event: 'clear', streamSid }),
};
