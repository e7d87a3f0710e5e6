/**
 * A SIP call's media as the call bridge takes it: an in-process stream (a MediaSocket) in frames of
 * the carriers' shared envelope, so the bridge, its budgets, recordings and keys work on SIP calls as
 * on the WebSocket carriers'. The peer's RTP (mu-law, as a PCMU peer sent it) goes to the bridge as
 * `media` frames and its RFC 4733 keys as `dtmf` frames; the bridge's `media` frames (mu-law) are
 * queued on the call's RTP session as they are (paced there), a `mark` comes back once the audio
 * queued before it has been sent, and `clear` drops what was not sent yet. The call ending is a
 * `stop` and a close.
 */
import { EventEmitter } from 'node:events';
import type { SipCall } from '../../sip/index.js';
import { decodePayload, obj, parseFrame, str, type FrameRules, type MediaDialect } from '../media.js';
import type { MediaSocket } from '../media-socket.js';

const rules: FrameRules = {
  start(m) {
    const start = obj(m.start);
    const streamId = str(start?.stream_id);
    const callSid = str(start?.call_sid);
    if (!start || !streamId || !callSid) return null;
    return { kind: 'start', streamId, callSid, callId: str(start.call_id), streamToken: str(start.stream_token) };
  },
  sequence: () => null,
};

export const sipMedia: MediaDialect = {
  parse: (raw) => parseFrame(raw, rules),
  media: (streamId, payload) => `{"event":"media","stream_id":${JSON.stringify(streamId)},"media":{"payload":"${payload}"}}`,
  mark: (streamId, name) => JSON.stringify({ event: 'mark', stream_id: streamId, mark: { name } }),
  clear: (streamId) => JSON.stringify({ event: 'clear', stream_id: streamId }),
};

const OPEN = 1;
const CLOSED = 3;

// How sipMedia.media above writes a frame: the bridge's 50 frames a second are read back by position
// instead of by JSON.parse. Anything written otherwise is parsed.
const MEDIA_HEAD = '{"event":"media",';
const PAYLOAD_AT = '"media":{"payload":"';
const MEDIA_TAIL = '"}}';

/** The base64 payload of a `media` frame as sipMedia.media wrote it, or null. */
function ourMediaPayload(data: string): string | null {
  if (!data.startsWith(MEDIA_HEAD) || !data.endsWith(MEDIA_TAIL)) return null;
  const at = data.lastIndexOf(PAYLOAD_AT);
  return at < 0 ? null : data.slice(at + PAYLOAD_AT.length, data.length - MEDIA_TAIL.length);
}

interface StreamEvents {
  message: [data: Buffer, isBinary: boolean];
  close: [];
  error: [err: Error];
}

export class RtpStream extends EventEmitter<StreamEvents> implements MediaSocket {
  readonly OPEN = OPEN;
  readyState = OPEN;
  private readonly marks = new Map<string, NodeJS.Timeout>();
  /** Where caller audio goes once the bridge takes it raw (onCallerAudio); until then as `media` frames. */
  private callerAudio: ((ulaw: Buffer) => void) | null = null;

  constructor(
    private readonly call: SipCall,
    private readonly start: { callSid: string; callId: string; streamToken: string },
  ) {
    super();
  }

  /** Sends the `start` frame and from then on the call's audio and keys; call once the media server listens. */
  begin(): void {
    const { callSid, callId, streamToken } = this.start;
    this.frame({ event: 'start', start: { stream_id: callSid, call_sid: callSid, call_id: callId, stream_token: streamToken } });
    this.call.on('ulaw', this.onAudio);
    this.call.on('dtmf', this.onDtmf);
    if (this.call.state === 'ended') this.ended();
    else this.call.once('ended', () => this.ended());
  }

  /** Caller audio from now on straight to `listener`, mu-law as the call gave it (read it, never write to it). */
  onCallerAudio(listener: (ulaw: Buffer) => void): void {
    this.callerAudio = listener;
  }

  private readonly onAudio = (ulaw: Buffer): void => {
    if (this.readyState !== OPEN) return;
    if (this.callerAudio) return this.callerAudio(ulaw);
    this.emit('message', Buffer.from(`{"event":"media","media":{"payload":"${ulaw.toString('base64')}"}}`), false);
  };

  private readonly onDtmf = (digit: string): void => this.frame({ event: 'dtmf', dtmf: { digit } });

  private frame(f: object): void {
    if (this.readyState === OPEN) this.emit('message', Buffer.from(JSON.stringify(f)), false);
  }

  /** The agent's mu-law, queued on the call's RTP session as it is (no frame to parse back). */
  sendAgentAudio(ulaw: Buffer): void {
    if (this.readyState === OPEN) this.call.sendUlaw(ulaw);
  }

  send(data: string): void {
    if (this.readyState !== OPEN) return;
    const payload = ourMediaPayload(data);
    if (payload !== null) {
      const ulaw = decodePayload(payload);
      if (ulaw) this.call.sendUlaw(ulaw);
      return;
    }
    let m: Record<string, unknown> | null;
    try {
      m = obj(JSON.parse(data));
    } catch {
      return;
    }
    switch (m?.event) {
      case 'media': {
        const ulaw = decodePayload(obj(m.media)?.payload);
        if (ulaw) this.call.sendUlaw(ulaw);
        return;
      }
      case 'mark': {
        const name = str(obj(m.mark)?.name);
        if (name !== null)
          this.marks.set(
            name,
            setTimeout(() => this.echo(name), this.call.rtp.queuedMs),
          );
        return;
      }
      case 'clear':
        this.call.clearAudio();
        for (const name of [...this.marks.keys()]) this.echo(name);
        return;
    }
  }

  private echo(name: string): void {
    clearTimeout(this.marks.get(name));
    this.marks.delete(name);
    this.frame({ event: 'mark', mark: { name } });
  }

  /** The peer or the stack ended the call: the stream stops. */
  private ended(): void {
    this.frame({ event: 'stop' });
    this.shut();
  }

  /** The bridge closes the stream: the call is hung up (a BYE, unless already over). */
  close(): void {
    if (this.readyState !== OPEN) return;
    this.call.hangup();
    this.shut();
  }

  terminate(): void {
    this.close();
  }

  private shut(): void {
    if (this.readyState !== OPEN) return;
    this.readyState = CLOSED;
    for (const t of this.marks.values()) clearTimeout(t);
    this.marks.clear();
    this.call.off('ulaw', this.onAudio);
    this.call.off('dtmf', this.onDtmf);
    this.emit('close');
  }
}
