/**
 * SDP offer/answer (RFC 3264) for one audio stream: PCMU and PCMA at 8 kHz in 20 ms packets, and
 * RFC 4733 telephone-event. Parsing and writing are sdp-transform's; what is offered, what is
 * accepted and what hold looks like are here.
 */
import sdpTransform from 'sdp-transform';

export type Codec = 'PCMU' | 'PCMA';
export type Direction = 'sendrecv' | 'sendonly' | 'recvonly' | 'inactive';

export const STATIC_PAYLOAD: Record<Codec, number> = { PCMU: 0, PCMA: 8 };
export const TELEPHONE_EVENT_PAYLOAD = 101;
export const MAX_SDP_BYTES = 16_384;

export interface LocalMedia {
  address: string;
  port: number;
  /** Codecs in our order of preference. */
  codecs: Codec[];
  sessionId: string;
  version: number;
  direction: Direction;
}

/** What both sides agreed: where to send, in what, and whether audio flows each way. */
export interface Negotiated {
  codec: Codec;
  payloadType: number;
  /** The peer's telephone-event payload type, when it offered or accepted one. */
  dtmfPayloadType?: number;
  address: string;
  port: number;
  /** The direction the peer asked for, from its own point of view. */
  peerDirection: Direction;
}

export class SdpError extends Error {
  constructor(
    message: string,
    /** 488 when nothing acceptable was offered, 400 when the description is unreadable. */
    readonly status: 400 | 488,
  ) {
    super(message);
  }
}

/** Our description; `dtmfPayloadType` null leaves telephone-event out (an answer to an offer without it). */
export function writeDescription(local: LocalMedia, codecs: Codec[], dtmfPayloadType: number | null = TELEPHONE_EVENT_PAYLOAD): string {
  const ip = local.address.includes(':') ? 6 : 4;
  const dtmf = dtmfPayloadType === null ? [] : [dtmfPayloadType];
  const payloads = [...codecs.map((c) => STATIC_PAYLOAD[c]), ...dtmf];
  return sdpTransform.write({
    version: 0,
    origin: { username: '-', sessionId: local.sessionId, sessionVersion: local.version, netType: 'IN', ipVer: ip, address: local.address },
    name: '-',
    connection: { version: ip, ip: local.address },
    timing: { start: 0, stop: 0 },
    media: [
      {
        type: 'audio',
        port: local.port,
        protocol: 'RTP/AVP',
        payloads: payloads.join(' '),
        rtp: [
          ...codecs.map((c) => ({ payload: STATIC_PAYLOAD[c], codec: c, rate: 8000 })),
          ...dtmf.map((payload) => ({ payload, codec: 'telephone-event', rate: 8000 })),
        ],
        fmtp: dtmf.map((payload) => ({ payload, config: '0-16' })),
        ptime: 20,
        direction: local.direction,
      },
    ],
  });
}

export function offer(local: LocalMedia): string {
  return writeDescription(local, local.codecs);
}

function parse(sdp: string): sdpTransform.SessionDescription {
  if (Buffer.byteLength(sdp) > MAX_SDP_BYTES) throw new SdpError('session description too large', 400);
  try {
    return sdpTransform.parse(sdp);
  } catch {
    throw new SdpError('unreadable session description', 400);
  }
}

/** The peer's audio stream: where it is, which codecs (in its order) and whether it sends DTMF events. */
function readAudio(sdp: string): { address: string; port: number; payloads: number[]; names: Map<number, string>; direction: Direction } {
  const d = parse(sdp);
  const audio = d.media?.find((m) => m.type === 'audio' && m.port > 0 && /^RTP\/AVP$/i.test(m.protocol));
  if (!audio) throw new SdpError('no RTP/AVP audio stream', 488);
  const address = audio.connection?.ip ?? d.connection?.ip;
  if (!address) throw new SdpError('no connection address', 400);
  if (!Number.isInteger(audio.port) || audio.port < 1 || audio.port > 65535) throw new SdpError('bad media port', 400);
  const payloads = String(audio.payloads ?? '')
    .split(/\s+/)
    .filter(Boolean)
    .map(Number)
    .filter((n) => Number.isInteger(n) && n >= 0 && n <= 127);
  const names = new Map<number, string>();
  for (const r of audio.rtp ?? []) names.set(r.payload, `${r.codec.toUpperCase()}/${r.rate ?? ''}`);
  const direction = (audio.direction ?? d.direction ?? 'sendrecv') as Direction;
  // RFC 2543 hold: connection address 0.0.0.0.
  return { address, port: audio.port, payloads, names, direction: address === '0.0.0.0' ? 'inactive' : direction };
}

function codecOf(payload: number, names: Map<number, string>): Codec | undefined {
  const name = names.get(payload);
  if (name) return name === 'PCMU/8000' ? 'PCMU' : name === 'PCMA/8000' ? 'PCMA' : undefined;
  return payload === 0 ? 'PCMU' : payload === 8 ? 'PCMA' : undefined;
}

function dtmfOf(payloads: number[], names: Map<number, string>): number | undefined {
  return payloads.find((p) => names.get(p) === 'TELEPHONE-EVENT/8000');
}

const ANSWER_DIRECTION: Record<Direction, Direction> = {
  sendrecv: 'sendrecv',
  sendonly: 'recvonly',
  recvonly: 'sendonly',
  inactive: 'inactive',
};

/** Answer an offer: the first of the peer's codecs we take, its telephone-event type, the mirrored direction. */
export function answer(offerSdp: string, local: LocalMedia): { sdp: string; negotiated: Negotiated } {
  const a = readAudio(offerSdp);
  const chosen = a.payloads.map((p) => ({ p, c: codecOf(p, a.names) })).find((x) => x.c && local.codecs.includes(x.c));
  if (!chosen) throw new SdpError('no codec in common', 488);
  const dtmf = dtmfOf(a.payloads, a.names);
  const direction = local.direction === 'sendrecv' ? ANSWER_DIRECTION[a.direction] : local.direction;
  const sdp = writeDescription({ ...local, direction }, [chosen.c!], dtmf ?? null);
  return {
    sdp,
    negotiated: { codec: chosen.c!, payloadType: chosen.p, dtmfPayloadType: dtmf, address: a.address, port: a.port, peerDirection: a.direction },
  };
}

/** Read the answer to our offer. */
export function readAnswer(answerSdp: string, offered: Codec[]): Negotiated {
  const a = readAudio(answerSdp);
  const chosen = a.payloads.map((p) => ({ p, c: codecOf(p, a.names) })).find((x) => x.c && offered.includes(x.c));
  if (!chosen) throw new SdpError('the answer has no codec we offered', 488);
  return {
    codec: chosen.c!,
    payloadType: chosen.p,
    dtmfPayloadType: dtmfOf(a.payloads, a.names),
    address: a.address,
    port: a.port,
    peerDirection: a.direction,
  };
}
