/**
 * The audio path of one call: the carrier's G.711 mu-law at 8 kHz in 20 ms frames <-> the voice
 * service's PCM16 (16 kHz in, 24 kHz out). Caller audio is decoded and upsampled (linear
 * interpolation); agent audio is low-passed at 3.4 kHz before keeping every third sample (windowed
 * sinc, state carried across chunks, see src/audio/pcm16.ts), encoded, and cut into whole 160-byte
 * frames, the remainder held for the next chunk so nothing is dropped or padded mid-stream.
 */
import { Downsampler24kTo8k, MULAW_SILENCE, Upsampler8kTo16k, mulawToPcm16, pcm16ToMulaw } from '../audio/pcm16.js';

/** 20 ms of mu-law at 8 kHz. */
export const FRAME_BYTES = 160;

export class CallTranscoder {
  private readonly up = new Upsampler8kTo16k();
  private readonly down = new Downsampler24kTo8k();
  private pending: Buffer = Buffer.alloc(0);

  /** Caller audio from the carrier (mu-law 8 kHz) as the voice service takes it (PCM16 16 kHz). */
  toModel(ulaw: Buffer): Buffer {
    return this.up.process(mulawToPcm16(ulaw));
  }

  /** Agent audio (PCM16 24 kHz) as whole 20 ms mu-law frames for the carrier. */
  toCaller(pcm24k: Buffer): Buffer[] {
    const ulaw = pcm16ToMulaw(this.down.process(pcm24k));
    const all = this.pending.length ? Buffer.concat([this.pending, ulaw]) : ulaw;
    const frames: Buffer[] = [];
    let at = 0;
    for (; at + FRAME_BYTES <= all.length; at += FRAME_BYTES) frames.push(all.subarray(at, at + FRAME_BYTES));
    this.pending = Buffer.from(all.subarray(at));
    return frames;
  }

  /** The held remainder as a last frame padded with silence (end of an agent turn); null when none. */
  flush(): Buffer | null {
    if (!this.pending.length) return null;
    const frame = Buffer.alloc(FRAME_BYTES, MULAW_SILENCE);
    this.pending.copy(frame);
    this.pending = Buffer.alloc(0);
    return frame;
  }

  /** Drops the held remainder (barge-in: the rest of the turn is not played). */
  discard(): void {
    this.pending = Buffer.alloc(0);
  }
}
