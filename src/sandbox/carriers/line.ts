/**
 * The callee's end of an answered call, driven by the frame clock: every 20 ms (simulated) one frame of
 * agent audio plays from the current media stream's playout and one frame of the callee's voice
 * (silence when it is not talking) goes to the service, then the callee's waits are checked. Keys
 * reach the callee either as tones in the agent audio it hears (dtmf-detector.ts) or straight from
 * the carrier's own command (hear()).
 */
import type { Clock } from './clock.js';
import { CallOver, type CalleeLine } from './callee.js';
import { FRAME_BYTES, SILENCE_FRAME } from './audio.js';
import type { Playout } from './playout.js';
import { DtmfDetector } from './dtmf-detector.js';

const NOTHING = Buffer.alloc(0);

interface Wait {
  pred: () => boolean;
  deadline: number;
  resolve: (ok: boolean) => void;
  reject: (err: Error) => void;
}

/**
 * What the callee talks and listens through: a carrier's media stream (media.ts) or, on SIP, the
 * call's own RTP (sip-call.ts).
 */
export interface CalleeMedia {
  /** Up: the service hears the callee and its audio plays. */
  readonly live: boolean;
  /** The agent audio that reached the carrier, played one frame per tick. */
  readonly playout: Pick<Playout, 'step' | 'pendingAudio'>;
  /** The callee's frames sent so far. */
  readonly framesSent: number;
  /** One 20 ms frame of the callee's voice (mu-law), silence included. */
  sendMedia(ulaw: Buffer): void;
  /** A key the callee pressed. */
  sendDtmf(digit: string): void;
}

export interface LineHooks {
  said(text: string): void;
  dtmf(digit: string): void;
  /** The callee heard a key the service pressed. */
  heard(key: string): void;
  hangup(): void;
  /** A labelled clip's first frame is about to go out. */
  clip?(label: string): void;
  /** Agent audio played this frame (bytes). */
  played?(bytes: number): void;
}

export class Line implements CalleeLine {
  frame = 0;
  streamFrame = 0;
  agentPlayedNow = 0;
  lastAgentFrame = -1;
  keysHeard = '';
  private readonly ear = new DtmfDetector();
  /** The media playing now, if any (the call swaps it as streams open and close). */
  stream: CalleeMedia | null = null;
  private voice: Buffer[] = [];
  private voiceBytes = 0;
  private readonly labels = new Map<Buffer, string>();
  private waits = new Set<Wait>();
  private stopClock: (() => void) | null = null;
  private over = false;

  constructor(
    clock: Clock,
    private readonly hooks: LineHooks,
  ) {
    this.stopClock = clock.onFrame(() => this.tick());
  }

  get agentPending(): boolean {
    return this.stream?.playout.pendingAudio ?? false;
  }

  talk(ulaw: Buffer, label?: string): Promise<void> {
    if (ulaw.length) {
      if (label) this.labels.set(ulaw, label);
      this.voice.push(ulaw);
      this.voiceBytes += ulaw.length;
    }
    return this.until(() => this.voiceBytes === 0, Infinity).then(() => undefined);
  }

  said(text: string): void {
    this.hooks.said(text);
  }

  dtmf(digit: string): void {
    this.hooks.dtmf(digit);
  }

  hangup(): void {
    this.hooks.hangup();
  }

  /** A key the service pressed reaches the callee. */
  hear(key: string): void {
    if (this.over) return;
    this.keysHeard += key;
    this.hooks.heard(key);
  }

  until(pred: () => boolean, maxFrames: number): Promise<boolean> {
    if (this.over) return Promise.reject(new CallOver());
    return new Promise((resolve, reject) => this.waits.add({ pred, deadline: this.frame + maxFrames, resolve, reject }));
  }

  /** The line goes dead: frames stop and every wait throws CallOver. */
  close(): void {
    if (this.over) return;
    this.over = true;
    this.stopClock?.();
    this.stopClock = null;
    const waits = [...this.waits];
    this.waits.clear();
    for (const w of waits) w.reject(new CallOver());
  }

  private tick(): void {
    this.frame++;
    if (this.stream?.live) this.streamFrame++;
    const played = this.stream?.live ? this.stream.playout.step() : null;
    this.agentPlayedNow = played?.length ?? 0;
    if (this.agentPlayedNow > 0) {
      this.lastAgentFrame = this.frame;
      this.hooks.played?.(this.agentPlayedNow);
    }
    const key = this.ear.push(played ?? NOTHING);
    if (key) this.hear(key);
    this.stream?.sendMedia(this.nextVoiceFrame());
    for (const w of [...this.waits]) {
      let ok: boolean;
      try {
        ok = w.pred();
      } catch (err) {
        this.waits.delete(w);
        w.reject(err as Error);
        continue;
      }
      if (ok || this.frame >= w.deadline) {
        this.waits.delete(w);
        w.resolve(ok);
      }
    }
  }

  private nextVoiceFrame(): Buffer {
    if (this.voiceBytes === 0) return SILENCE_FRAME;
    const out = Buffer.alloc(FRAME_BYTES, SILENCE_FRAME[0]);
    let at = 0;
    while (at < FRAME_BYTES && this.voice.length) {
      const head = this.voice[0];
      const label = this.labels.get(head);
      if (label !== undefined) {
        this.labels.delete(head);
        this.hooks.clip?.(label);
      }
      const n = head.copy(out, at, 0, Math.min(head.length, FRAME_BYTES - at));
      at += n;
      this.voiceBytes -= n;
      if (n === head.length) this.voice.shift();
      else this.voice[0] = head.subarray(n);
    }
    return out;
  }
}
