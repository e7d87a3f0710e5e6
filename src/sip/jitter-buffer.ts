/**
 * A reordering jitter buffer counted in packets, not time: packets come out in sequence order once
 * `depth` later ones are waiting (or at once when they are next), a packet that never came is given
 * up for as soon as the buffer is deeper than `depth` (and reported as lost, so the listener can
 * keep time with silence), duplicates and packets behind the play-out point are dropped. No timer:
 * arrival drives it, so it adds at most `depth` packets of delay and nothing when packets come in order.
 */
/** Where released packets go, in order: a payload, or how many packets in a row never came. */
export interface JitterOutput {
  audio(payload: Buffer): void;
  lost(packets: number): void;
}

const MAX_JUMP = 3000;

export class JitterBuffer {
  private next?: number;
  private readonly held = new Map<number, Buffer>();
  dropped = 0;

  constructor(private readonly depth: number) {}

  push(sequence: number, payload: Buffer, out: JitterOutput): void {
    if (this.next === undefined) this.next = sequence;
    if (sequence === this.next && this.held.size === 0) {
      // In order with nothing waiting (nearly every packet): straight through, nothing kept.
      this.next = (sequence + 1) & 0xffff;
      out.audio(payload);
      return;
    }
    const ahead = (sequence - this.next + 0x10000) & 0xffff;
    if (ahead >= 0x8000) {
      // Behind the play-out point: late or a duplicate, unless the peer restarted its numbering.
      if (0x10000 - ahead > MAX_JUMP) this.resync(sequence);
      else {
        this.dropped++;
        return;
      }
    } else if (ahead > MAX_JUMP) this.resync(sequence);
    if (this.held.has(sequence)) {
      this.dropped++;
      return;
    }
    this.held.set(sequence, payload);
    this.release(out);
  }

  private resync(sequence: number): void {
    this.held.clear();
    this.next = sequence;
  }

  private release(out: JitterOutput): void {
    for (;;) {
      const next = this.next!;
      const p = this.held.get(next);
      if (p) {
        this.held.delete(next);
        this.next = (next + 1) & 0xffff;
        out.audio(p);
        continue;
      }
      if (this.held.size <= this.depth) return;
      // The packet at the play-out point is lost: skip to the oldest one held.
      let gap = 0x10000;
      for (const s of this.held.keys()) gap = Math.min(gap, (s - next + 0x10000) & 0xffff);
      this.next = (next + gap) & 0xffff;
      out.lost(gap);
    }
  }
}
