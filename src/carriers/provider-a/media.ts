/**
 * provider_a Media Streams frames (Twilio-style): `start` names the call in `customParameters` (the
 * TwiML `<Parameter>`s), `media.chunk` numbers the frames, and every frame we send carries `streamSid`.
 */
import { obj, parseFrame, str, type FrameRules, type MediaDialect } from '../media.js';

const rules: FrameRules = {
  start(m) {
    const start = obj(m.start);
    const streamSid = str(m.streamSid) ?? str(start?.streamSid);
    const callSid = str(start?.callSid);
    if (!start || !streamSid || !callSid) return null;
    const params = obj(start.customParameters) ?? {};
    return { kind: 'start', streamId: streamSid, callSid, callId: str(params.call_id), streamToken: str(params.stream_token) };
  },
  sequence: (_m, media) => str(media.chunk),
};

export const providerAMedia: MediaDialect = {
  parse: (raw) => parseFrame(raw, rules),
  media: (streamSid, payload) => `{"event":"media","streamSid":${JSON.stringify(streamSid)},"media":{"payload":"${payload}"}}`,
  mark: (streamSid, name) => JSON.stringify({ event: 'mark', streamSid, mark: { name } }),
  clear: (streamSid) => JSON.stringify({ event: 'clear', streamSid }),
};
