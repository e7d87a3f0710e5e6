/**
 * The caller's audio for sipp's `play_pcap_audio` in the SIP benchmark: a libpcap file (Ethernet,
 * IPv4, UDP) of RTP packets, one every 20 ms by the capture clock, which sipp replays at that pace from
 * the call's media port to the port our answer names. Written here, not with src/sip/'s RTP writer, so
 * the service under test reads packets its own code did not make.
 */
const ETHERNET = 14;
const IPV4 = 20;
const UDP = 8;
const RTP = 12;
const FRAME_MS = 20;

/** `frames` (G.711 payloads, 160 bytes each) as a pcap of RTP packets with payload type `payloadType`. */
export function rtpPcap(frames: Buffer[], payloadType: number): Buffer {
  const header = Buffer.alloc(24);
  header.writeUInt32LE(0xa1b2c3d4, 0); // a little-endian file with microsecond timestamps
  header.writeUInt16LE(2, 4);
  header.writeUInt16LE(4, 6);
  header.writeUInt32LE(65_535, 16); // snaplen
  header.writeUInt32LE(1, 20); // LINKTYPE_ETHERNET
  const records = frames.map((payload, k) => {
    const udpLength = UDP + RTP + payload.length;
    const frameLength = ETHERNET + IPV4 + udpLength;
    const r = Buffer.alloc(16 + frameLength);
    const atMs = k * FRAME_MS;
    r.writeUInt32LE(Math.floor(atMs / 1000), 0);
    r.writeUInt32LE((atMs % 1000) * 1000, 4);
    r.writeUInt32LE(frameLength, 8);
    r.writeUInt32LE(frameLength, 12);
    const eth = 16;
    r.writeUInt16BE(0x0800, eth + 12); // IPv4
    const ip = eth + ETHERNET;
    r[ip] = 0x45;
    r.writeUInt16BE(IPV4 + udpLength, ip + 2);
    r[ip + 8] = 64; // TTL
    r[ip + 9] = 17; // UDP
    r.writeUInt32BE(0x7f000001, ip + 12);
    r.writeUInt32BE(0x7f000001, ip + 16);
    const udp = ip + IPV4;
    // sipp rewrites both ports (the call's media port and the port of our answer) and the checksum.
    r.writeUInt16BE(6000, udp);
    r.writeUInt16BE(6000, udp + 2);
    r.writeUInt16BE(udpLength, udp + 4);
    const rtp = udp + UDP;
    r[rtp] = 0x80;
    r[rtp + 1] = payloadType & 0x7f;
    r.writeUInt16BE(k & 0xffff, rtp + 2);
    r.writeUInt32BE((k * 160) >>> 0, rtp + 4);
    r.writeUInt32BE(0x5eed5eed, rtp + 8);
    payload.copy(r, rtp + RTP);
    return r;
  });
  return Buffer.concat([header, ...records]);
}
