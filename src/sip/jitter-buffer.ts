/**
 * A reordering jitter buffer counted in packets, not time: packets come out in sequence order once
 * `depth` later ones are waiting (or at once when they are next), a packet that never came is given
 * up for as soon as the buffer is deeper than `depth` (and reported as lost, so the listener can
 * keep time with silence), duplicates and packets behind the play-out point are dropped. No timer:
 * arrival drives it, so it adds at most `depth` packets of delay and nothing when packets come in order.
 */
export type Released = { payload: Buffer } | { lost: number };

const MAX_JUMP = 3000;

export class JitterBuffer {
  private next?: number;
  private readonly held = new Map<number, Buffer>();
  dropped = 0;

  constructor(private readonly depth: number) {}

  push(sequence: number, payload: Buffer): Released[] {
    const out: Released[] = [];
    if (this.next === undefined) this.next = sequence;
    const ahead = (sequence - this.next + 0x10000) & 0xffff;
    if (ahead >= 0x8000) {
      // Behind the play-out point: late or a duplicate, unless the peer restarted its numbering.
      if (0x10000 - ahead > MAX_JUMP) this.resync(sequence);
      else {
        this.dropped++;
        return out;
      }
    } else if (ahead > MAX_JUMP) this.resync(sequence);
    if (this.held.has(sequence)) {
      this.dropped++;
      return out;
    }
    this.held.set(sequence, payload);
    this.release(out);
    return out;
  }

  private resync(sequence: number): void {
    this.held.clear();
    this.next = sequence;
  }

  private release(out: Released[]): void {
    for (;;) {
      const next = this.next!;
      const p = this.held.get(next);
      if (p) {
        this.held.delete(next);
        out.push({ payload: p });
        this.next = (next + 1) & 0xffff;
        continue;
      }
      if (this.held.size <= this.depth) return;
      // The packet at the play-out point is lost: skip to the oldest one held.
      let gap = 0x10000;
      for (const s of this.held.keys()) gap = Math.min(gap, (s - next + 0x10000) & 0xffff);
      out.push({ lost: gap });
      this.next = (next + gap) & 0xffff;
    }
  }
}
