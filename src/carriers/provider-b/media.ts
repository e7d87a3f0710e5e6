/**
 * provider_b media streaming frames (Telnyx-style). The socket identifies the stream, so frames we send
 * carry no stream id. The call is identified by `start.call_control_id` and the `client_state` we set
 * when dialing or answering (it carries the call id and the stream token); the carrier reports stream
 * errors in `error` frames.
 */
import { obj, parseFrame, str, type FrameRules, type MediaDialect } from '../media.js';
import { decodeClientState } from './rest.js';

const rules: FrameRules = {
  start(m) {
    const start = obj(m.start);
    const callSid = str(start?.call_control_id);
    if (!start || !callSid) return null;
    const state = decodeClientState(start.client_state);
    return { kind: 'start', streamId: str(m.stream_id) ?? '', callSid, callId: state?.call_id ?? null, streamToken: state?.stream_token ?? null };
  },
  sequence: (m, media) => str(media.chunk) ?? str(m.sequence_number),
  error(m) {
    const e = obj(m.payload) ?? obj(m.error);
    return str(e?.detail) ?? str(e?.title) ?? 'stream error';
  },
};

export const providerBMedia: MediaDialect = {
  parse: (raw) => parseFrame(raw, rules),
  media: (_streamId, payload) => `{"event":"media","media":{"payload":"${payload}"}}`,
  mark: (_streamId, name) => JSON.stringify({ event: 'mark', mark: { name } }),
  clear: () => JSON.stringify({ event: 'clear' }),
};
