/**
 * The microphone's AudioWorklet processor, as source text: it is loaded from a Blob URL, so the library
 * stays one module that works when imported from another origin. It mixes the input to mono, resamples
 * it to `targetRate` (averaging the input samples that fall into each output sample, which also serves
 * as the anti-aliasing filter), and posts PCM16 little-endian frames of `frameSamples` samples
 * (an ArrayBuffer each, transferred).
 */
export const CAPTURE_PROCESSOR = 'voice-agent-capture';

export const CAPTURE_WORKLET_SOURCE = `
class VoiceAgentCapture extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const o = (options && options.processorOptions) || {};
    this.ratio = sampleRate / (o.targetRate || 16000);
    this.frameSamples = o.frameSamples || 320;
    this.frame = new DataView(new ArrayBuffer(this.frameSamples * 2));
    this.n = 0;
    this.acc = 0;
    this.count = 0;
    this.pos = 0;
  }
  process(inputs) {
    const input = inputs[0];
    if (!input || input.length === 0) return true;
    const channels = input.length;
    const length = input[0].length;
    for (let i = 0; i < length; i++) {
      let s = 0;
      for (let c = 0; c < channels; c++) s += input[c][i];
      this.acc += s / channels;
      this.count++;
      this.pos += 1;
      while (this.pos >= this.ratio) {
        this.pos -= this.ratio;
        const v = this.count ? this.acc / this.count : 0;
        this.acc = 0;
        this.count = 0;
        this.frame.setInt16(this.n * 2, v >= 1 ? 32767 : v <= -1 ? -32768 : Math.round(v * 32767), true);
        if (++this.n === this.frameSamples) {
          this.port.postMessage(this.frame.buffer, [this.frame.buffer]);
          this.frame = new DataView(new ArrayBuffer(this.frameSamples * 2));
          this.n = 0;
        }
      }
    }
    return true;
  }
}
registerProcessor(${JSON.stringify('voice-agent-capture')}, VoiceAgentCapture);
`;
