/**
 * RTP packets (RFC 3550 section 5.1): the fixed header, CSRCs, extension and padding read and checked,
 * written with no CSRC or extension. By hand: twenty lines, where the npm packages (werift-rtp) bring
 * a WebRTC stack with them.
 */
export interface RtpPacket {
  payloadType: number;
  marker: boolean;
  sequence: number;
  timestamp: number;
  ssrc: number;
  payload: Buffer;
}

/** Read a packet, or null when it is not RTP version 2 or its lengths do not add up. */
export function readRtp(buf: Buffer): RtpPacket | null {
  if (buf.length < 12 || buf[0] >> 6 !== 2) return null;
  const padding = (buf[0] & 0x20) !== 0;
  const extension = (buf[0] & 0x10) !== 0;
  const csrcs = buf[0] & 0x0f;
  let offset = 12 + 4 * csrcs;
  if (extension) {
    if (buf.length < offset + 4) return null;
    offset += 4 + 4 * buf.readUInt16BE(offset + 2);
  }
  let end = buf.length;
  if (padding) end -= buf[buf.length - 1];
  if (offset > end) return null;
  return {
    payloadType: buf[1] & 0x7f,
    marker: (buf[1] & 0x80) !== 0,
    sequence: buf.readUInt16BE(2),
    timestamp: buf.readUInt32BE(4),
    ssrc: buf.readUInt32BE(8),
    payload: buf.subarray(offset, end),
  };
}

export function writeRtp(p: RtpPacket): Buffer {
  const out = Buffer.allocUnsafe(12 + p.payload.length);
  out[0] = 0x80;
  out[1] = (p.marker ? 0x80 : 0) | (p.payloadType & 0x7f);
  out.writeUInt16BE(p.sequence & 0xffff, 2);
  out.writeUInt32BE(p.timestamp >>> 0, 4);
  out.writeUInt32BE(p.ssrc >>> 0, 8);
  p.payload.copy(out, 12);
  return out;
}
