/** Camera or shared-screen frames as JPEG, at a settable rate. */
import { bytesToBase64 } from './base64.js';

export interface FrameOptions {
  /** Frames per second (default 1). */
  rate: number;
  /** JPEG quality, 0 to 1 (default 0.7). */
  quality: number;
  /** Frames wider than this are scaled down (default 1280). */
  maxWidth: number;
}

export class FrameGrabber {
  private readonly video: HTMLVideoElement;
  private readonly canvas = document.createElement('canvas');
  private timer: ReturnType<typeof setInterval> | null = null;
  private busy = false;
  private stopped = false;

  constructor(
    stream: MediaStream,
    private opts: FrameOptions,
    private readonly onFrame: (jpegBase64: string) => void,
  ) {
    this.video = document.createElement('video');
    this.video.muted = true;
    this.video.playsInline = true;
    this.video.srcObject = stream;
  }

  async start(): Promise<void> {
    await this.video.play().catch(() => undefined);
    this.schedule();
  }

  setRate(rate: number): void {
    if (!(rate > 0)) throw new RangeError('The image rate must be a positive number of frames per second.');
    this.opts = { ...this.opts, rate };
    if (this.timer !== null) this.schedule();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.video.srcObject = null;
  }

  private schedule(): void {
    if (this.stopped) return;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = setInterval(() => void this.grab(), 1000 / this.opts.rate);
    void this.grab();
  }

  private async grab(): Promise<void> {
    const v = this.video;
    if (this.busy || this.stopped || v.readyState < 2 || !v.videoWidth) return;
    this.busy = true;
    try {
      const scale = Math.min(1, this.opts.maxWidth / v.videoWidth);
      this.canvas.width = Math.round(v.videoWidth * scale);
      this.canvas.height = Math.round(v.videoHeight * scale);
      this.canvas.getContext('2d')!.drawImage(v, 0, 0, this.canvas.width, this.canvas.height);
      const blob = await new Promise<Blob | null>((resolve) => this.canvas.toBlob(resolve, 'image/jpeg', this.opts.quality));
      if (blob && !this.stopped) this.onFrame(bytesToBase64(new Uint8Array(await blob.arrayBuffer())));
    } finally {
      this.busy = false;
    }
  }
}
