/** Microphone capture (AudioWorklet -> PCM16 16 kHz 20 ms frames) and gapless playback of the agent. */
import { CAPTURE_PROCESSOR, CAPTURE_WORKLET_SOURCE } from './worklet.js';

export const INPUT_RATE = 16000;
export const FRAME_MS = 20;
const FRAME_SAMPLES = (INPUT_RATE * FRAME_MS) / 1000;

/** Starts the microphone's stream into `onFrame` (one 640-byte PCM16 frame per call). */
export async function startCapture(ctx: AudioContext, stream: MediaStream, onFrame: (pcm: ArrayBuffer) => void): Promise<() => void> {
  const url = URL.createObjectURL(new Blob([CAPTURE_WORKLET_SOURCE], { type: 'text/javascript' }));
  try {
    await ctx.audioWorklet.addModule(url);
  } finally {
    URL.revokeObjectURL(url);
  }
  const source = ctx.createMediaStreamSource(stream);
  const node = new AudioWorkletNode(ctx, CAPTURE_PROCESSOR, {
    numberOfInputs: 1,
    numberOfOutputs: 1,
    outputChannelCount: [1],
    processorOptions: { targetRate: INPUT_RATE, frameSamples: FRAME_SAMPLES },
  });
  node.port.onmessage = (e: MessageEvent<ArrayBuffer>) => onFrame(e.data);
  source.connect(node);
  // The node writes no output; connecting it keeps the graph pulling it in every browser.
  node.connect(ctx.destination);
  return () => {
    node.port.onmessage = null;
    source.disconnect();
    node.disconnect();
  };
}

/** PCM16 little-endian bytes to samples in [-1, 1). */
export function pcm16ToFloat(bytes: Uint8Array): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(bytes.byteLength >> 1);
  for (let i = 0; i < out.length; i++) out[i] = view.getInt16(i * 2, true) / 32768;
  return out;
}

/**
 * Plays chunks back to back on the AudioContext's clock, so consecutive chunks join without a gap;
 * `flush()` stops what is playing and drops what is queued (barge-in).
 */
export class Player {
  private readonly out: GainNode;
  private readonly playing = new Set<AudioBufferSourceNode>();
  private nextTime = 0;
  private speaking = false;

  constructor(
    private readonly ctx: AudioContext,
    private readonly rate: number,
    private readonly onSpeaking: (speaking: boolean) => void,
  ) {
    this.out = ctx.createGain();
    this.out.connect(ctx.destination);
  }

  play(samples: Float32Array): void {
    if (samples.length === 0) return;
    const buffer = this.ctx.createBuffer(1, samples.length, this.rate);
    buffer.getChannelData(0).set(samples);
    const node = this.ctx.createBufferSource();
    node.buffer = buffer;
    node.connect(this.out);
    // A small lead when the queue ran dry, so the first chunk is not clipped.
    const at = Math.max(this.nextTime, this.ctx.currentTime + 0.04);
    node.start(at);
    this.nextTime = at + buffer.duration;
    this.playing.add(node);
    node.onended = () => {
      this.playing.delete(node);
      if (this.playing.size === 0) this.setSpeaking(false);
    };
    this.setSpeaking(true);
  }

  flush(): void {
    for (const node of this.playing) {
      node.onended = null;
      try {
        node.stop();
      } catch {
        // never started: nothing to stop
      }
      node.disconnect();
    }
    this.playing.clear();
    this.nextTime = 0;
    this.setSpeaking(false);
  }

  private setSpeaking(value: boolean): void {
    if (value === this.speaking) return;
    this.speaking = value;
    this.onSpeaking(value);
  }
}
