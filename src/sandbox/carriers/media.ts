/**
 * One media stream: the carrier is the WebSocket client and the service the server. Opens the socket,
 * sends `connected` and `start`, then whatever the call's frame clock gives it (caller audio, marks
 * echoed by the playout, dtmf), and `stop` when the carrier ends the stream. Agent audio, marks and
 * `clear` from the service go to the stream's playout.
 */
import type { Logger } from 'pino';
import WebSocket from 'ws';
import { FRAME_MS } from './clock.js';
import type { Framing } from './frames.js';
import { Playout } from './playout.js';
import { ulawMs } from './audio.js';
import type { SandboxCallRecord } from './records.js';

const HANDSHAKE_TIMEOUT_MS = 10_000;
/** With reordering on, the frame with this remainder swaps places with the next one. */
const REORDER_EVERY = 10;
const REORDER_AT = 5;

export interface StreamEvents {
  opened(): void;
  /** The socket could not be opened; the stream never started. */
  failed(reason: string): void;
  /** The service closed the socket (the carrier did not ask for it). */
  closedByService(code: number): void;
  changed(): void;
}

export interface StreamOptions {
  url: string;
  framing: Framing;
  record: SandboxCallRecord;
  log: Logger;
  /** Swap some adjacent media frames (provider_b). */
  reorder: () => boolean;
  /** Why the carrier would not play agent audio on this stream (e.g. not bidirectional), or null. */
  refusesAudio: string | null;
  events: StreamEvents;
}

export class MediaStream {
  readonly playout: Playout;
  private readonly ws: WebSocket;
  /** `start` went out (the stream existed for the service). */
  started = false;
  private stopping = false;
  private chunk = 0;
  private held: object | null = null;

  constructor(private readonly o: StreamOptions) {
    this.playout = new Playout((name) => this.echoMark(name));
    this.ws = new WebSocket(o.url, { handshakeTimeout: HANDSHAKE_TIMEOUT_MS, perMessageDeflate: false });
    this.ws.on('open', () => this.onOpen());
    this.ws.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    this.ws.on('unexpected-response', (_req, res) => {
      this.fail(`upgrade refused with HTTP ${res.statusCode}`);
      res.resume();
    });
    this.ws.on('error', (err) => this.fail(err.message));
    this.ws.on('close', (code) => this.onClose(code));
  }

  /** Media frames sent so far (the next one's index). */
  get framesSent(): number {
    return this.chunk;
  }

  /** streamSid / stream_id. */
  get id(): string {
    return this.o.framing.streamId;
  }

  /** True once `start` went out and until the stream ends. */
  get live(): boolean {
    return this.started && !this.stopping && this.ws.readyState === WebSocket.OPEN;
  }

  sendMedia(payload: Buffer): void {
    if (!this.live) return;
    this.chunk++;
    const frame = this.o.framing.media(this.chunk, (this.chunk - 1) * FRAME_MS, payload);
    this.o.record.mediaFramesSent++;
    if (this.held) {
      this.send(frame);
      this.send(this.held);
      this.held = null;
    } else if (this.o.reorder() && this.chunk % REORDER_EVERY === REORDER_AT) {
      this.held = frame;
    } else {
      this.send(frame);
    }
  }

  sendDtmf(digit: string): void {
    if (this.live) this.send(this.o.framing.dtmf(digit));
  }

  /** The carrier ends the stream: `stop`, then the socket closes. Pending marks are not echoed. */
  stop(): void {
    if (this.stopping) return;
    const wasLive = this.live;
    if (wasLive) {
      if (this.held) this.send(this.held);
      this.held = null;
      this.send(this.o.framing.stop());
    }
    this.stopping = true;
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(1000, 'stream stopped');
    else if (this.ws.readyState === WebSocket.CONNECTING) this.ws.terminate();
    if (!this.o.record.streamClosedBy && this.started) this.o.record.streamClosedBy = 'carrier';
  }

  /** Drops the socket without a close frame (the carrier is shutting down). */
  terminate(): void {
    this.stopping = true;
    this.ws.terminate();
  }

  private send(frame: object): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(frame));
  }

  private onOpen(): void {
    if (this.stopping) return void this.ws.close(1000, 'stream stopped');
    this.send(this.o.framing.connected());
    this.send(this.o.framing.start());
    this.started = true;
    const r = this.o.record;
    r.streamOpened = true;
    r.streamStartParams = this.o.framing.startInfo;
    r.streamClosedBy = null;
    r.streamCloseCode = null;
    this.o.events.opened();
    this.o.events.changed();
  }

  private fail(reason: string): void {
    if (this.started || this.stopping) return;
    this.stopping = true;
    this.o.log.info({ reason }, 'sandbox media stream could not connect');
    this.o.events.failed(reason);
  }

  private onClose(code: number): void {
    if (!this.started) return this.fail(`socket closed before opening (${code})`);
    if (this.stopping) return;
    this.stopping = true;
    this.o.record.streamClosedBy = 'service';
    this.o.record.streamCloseCode = code;
    this.o.events.closedByService(code);
    this.o.events.changed();
  }

  /** Notes what the real carrier would object to; a frame it cannot use at all is also reported on the stream. */
  private problem(text: string, unusable: boolean): void {
    const errors = this.o.record.protocolErrors;
    if (!errors.includes(text) && errors.length < 100) {
      errors.push(text);
      this.o.log.warn({ problem: text }, 'sandbox carrier got a frame the real carrier would refuse or ignore');
    }
    if (unusable && this.o.framing.error) this.send(this.o.framing.error(text));
  }

  private onMessage(data: WebSocket.RawData, isBinary: boolean): void {
    if (!this.live) return;
    if (isBinary) return this.problem('binary frame (the carrier expects JSON text frames)', true);
    let msg: unknown;
    try {
      msg = JSON.parse(data.toString());
    } catch {
      return this.problem('frame is not JSON', true);
    }
    const frame = this.o.framing.read(msg);
    if (frame.problem) this.problem(frame.problem, frame.kind === 'invalid');
    const r = this.o.record;
    switch (frame.kind) {
      case 'media':
        if (this.o.refusesAudio) return this.problem(this.o.refusesAudio, false);
        r.agentAudioMs += ulawMs(frame.payload.length);
        this.playout.push(frame.payload);
        break;
      case 'mark':
        r.marksReceived.push(frame.name);
        this.playout.mark(frame.name);
        break;
      case 'clear':
        r.clears++;
        r.clearsAtMs.push(this.chunk * FRAME_MS);
        this.playout.clear();
        break;
      case 'invalid':
        return;
    }
    this.o.events.changed();
  }

  private echoMark(name: string): void {
    if (!this.live) return;
    this.send(this.o.framing.mark(name));
    this.o.record.marksEchoed.push(name);
    this.o.events.changed();
  }
}
