/**
 * RFC 4733 telephone-events for the 16 keypad keys: the 4-byte payload, the packets one key press
 * makes (a growing duration every 20 ms, the last three with the end bit), and the receiving side's
 * rule (one key per event timestamp, however many packets and retransmitted ends it comes in).
 */
export const EVENT_KEYS = '0123456789*#ABCD';

export interface ToneEvent {
  event: number;
  end: boolean;
  volume: number;
  duration: number;
}

export function readEvent(payload: Buffer): ToneEvent | null {
  if (payload.length < 4) return null;
  return { event: payload[0], end: (payload[1] & 0x80) !== 0, volume: payload[1] & 0x3f, duration: payload.readUInt16BE(2) };
}

export function writeEvent(e: ToneEvent): Buffer {
  const b = Buffer.alloc(4);
  b[0] = e.event;
  b[1] = (e.end ? 0x80 : 0) | (e.volume & 0x3f);
  b.writeUInt16BE(Math.min(e.duration, 0xffff), 2);
  return b;
}

/** A key press as the payloads of its packets, one per 20 ms (160 samples), ends sent three times. */
export function keyPayloads(key: string, toneMs = 100): Buffer[] {
  const event = EVENT_KEYS.indexOf(key.toUpperCase());
  if (event < 0 || key.length !== 1) return [];
  const packets = Math.max(1, Math.round(toneMs / 20));
  const out: Buffer[] = [];
  for (let i = 1; i <= packets; i++) out.push(writeEvent({ event, end: false, volume: 10, duration: i * 160 }));
  const last = writeEvent({ event, end: true, volume: 10, duration: packets * 160 });
  out.push(last, last, last);
  return out;
}

/** Hears keys: the first packet of each event timestamp is the press. */
export class EventReceiver {
  private lastTimestamp?: number;

  /** The key this packet starts, or null for a continuation, a retransmitted end or a non-key event. */
  receive(timestamp: number, payload: Buffer): string | null {
    const e = readEvent(payload);
    if (!e || timestamp === this.lastTimestamp) return null;
    this.lastTimestamp = timestamp;
    return e.event < EVENT_KEYS.length ? EVENT_KEYS[e.event] : null;
  }
}
