/**
 * One live session with an agent: mints a token through the caller's server, opens the realtime
 * WebSocket, streams the microphone (and camera or screen frames), plays the agent's audio, and turns
 * server messages into events.
 */
import { Player, pcm16ToFloat, startCapture } from './audio.js';
import { base64ToBytes, bytesToBase64, textToBase64 } from './base64.js';
import { VoiceAgentError, mediaError, refusal } from './errors.js';
import type { ServerMessage, SessionStartedMessage, Source } from './messages.js';
import { FrameGrabber } from './video.js';

/** What a session asks its token endpoint for (the body of `POST /api/v1/realtime/sessions`). */
export interface TokenRequest {
  agent_id: string;
  user_id: string;
  source: Source;
}

export interface SessionOptions {
  /** Your server's endpoint: the library POSTs `{agent_id, user_id, source}` as JSON and reads `ws_url` from the JSON answer. */
  tokenUrl?: string;
  /** Instead of `tokenUrl`: returns `{ws_url}` however you obtain it; given the request `tokenUrl` would send. */
  getToken?: (request: TokenRequest) => Promise<{ ws_url: string }>;
  /** Extra headers of the `tokenUrl` request (a CSRF token, for example). */
  tokenHeaders?: Record<string, string>;
  agentId: string;
  userId: string;
  /** `voice` (default), `camera`, `screen` or `text`. */
  source?: Source;
  /** Microphone constraints, merged over `{echoCancellation, noiseSuppression, autoGainControl: true}`. */
  audio?: MediaTrackConstraints;
  /** Camera constraints (camera sessions), merged over `{width: {ideal: 640}, height: {ideal: 480}}`. */
  video?: MediaTrackConstraints;
  /** Camera or screen frames sent per second (default 1). */
  imageRate?: number;
  /** JPEG quality of those frames, 0 to 1 (default 0.7). */
  imageQuality?: number;
  /** Frames wider than this many pixels are scaled down (default 1280). */
  imageMaxWidth?: number;
}

/** `idle` -> `starting` -> `live` -> (`ended`: the agent ended the conversation) -> `closed`. */
export type SessionState = 'idle' | 'starting' | 'live' | 'ended' | 'closed';

export interface Transcript {
  role: 'user' | 'model';
  text: string;
  final: boolean;
  timestamp: number;
}

export interface AgentAudio {
  /** Samples in [-1, 1), mono. */
  samples: Float32Array;
  sampleRate: number;
}

export interface SessionEvents {
  /** Every server message, as received. */
  message: (message: ServerMessage) => void;
  state: (state: SessionState) => void;
  /** Live transcription of both sides (voice, camera and screen sessions). */
  transcript: (transcript: Transcript) => void;
  /** The agent's whole reply in a text session, when its turn completes. */
  reply: (text: string) => void;
  /** Each chunk of the agent's speech (it is also played, unless `interrupted` came first). */
  audio: (audio: AgentAudio) => void;
  /** The agent's audio started or stopped playing (also false at once on barge-in). */
  speaking: (speaking: boolean) => void;
  /** The person spoke over the agent: what was playing has stopped and the queued audio is dropped. */
  interrupted: () => void;
  /** The agent calls one of its tools (`started`), and the call's end (`completed` or `failed`). */
  toolCall: (call: { name: string; status: 'started' | 'completed' | 'failed' }) => void;
  /** A problem during a live session; the session goes on unless a `close` follows. */
  error: (error: VoiceAgentError) => void;
  /** The WebSocket closed (after `stop()`, or by the server). */
  close: (info: { code: number; reason: string }) => void;
}

type Listeners = { [E in keyof SessionEvents]: Set<SessionEvents[E]> };

const SOURCES: readonly Source[] = ['voice', 'camera', 'screen', 'text'];
const STOP_TIMEOUT_MS = 3000;

export class Session {
  readonly agentId: string;
  readonly userId: string;
  readonly source: Source;
  private _state: SessionState = 'idle';
  private _sessionId: string | null = null;
  private readonly listeners: Listeners = {
    message: new Set(),
    state: new Set(),
    transcript: new Set(),
    reply: new Set(),
    audio: new Set(),
    speaking: new Set(),
    interrupted: new Set(),
    toolCall: new Set(),
    error: new Set(),
    close: new Set(),
  };
  private starting: Promise<SessionStartedMessage> | null = null;
  private abort: ((err: VoiceAgentError) => void) | null = null;
  private ws: WebSocket | null = null;
  private closed: Promise<void> | null = null;
  private stopping = false;
  private ctx: AudioContext | null = null;
  private streams: MediaStream[] = [];
  private stopCapture: (() => void) | null = null;
  private grabber: FrameGrabber | null = null;
  private player: Player | null = null;
  private replyText = '';
  private _muted = false;

  constructor(private readonly opts: SessionOptions) {
    if (!opts || typeof opts !== 'object') throw new TypeError('createSession needs an options object.');
    if (!opts.tokenUrl === !opts.getToken) throw new TypeError('createSession needs exactly one of tokenUrl and getToken.');
    if (typeof opts.agentId !== 'string' || !opts.agentId) throw new TypeError('createSession needs an agentId.');
    if (typeof opts.userId !== 'string' || !opts.userId) throw new TypeError('createSession needs a userId.');
    const source = opts.source ?? 'voice';
    if (!SOURCES.includes(source)) throw new TypeError(`source must be one of ${SOURCES.join(', ')}.`);
    if (opts.imageRate !== undefined && !(opts.imageRate > 0)) throw new RangeError('imageRate must be a positive number of frames per second.');
    this.agentId = opts.agentId;
    this.userId = opts.userId;
    this.source = source;
  }

  get state(): SessionState {
    return this._state;
  }

  /** The conversation id from `session_started` (the `conversation_id` of `call.completed`). */
  get sessionId(): string | null {
    return this._sessionId;
  }

  /** The microphone, camera or screen stream(s) in use, for a local preview. */
  get localStreams(): readonly MediaStream[] {
    return this.streams;
  }

  get muted(): boolean {
    return this._muted;
  }

  on<E extends keyof SessionEvents>(event: E, listener: SessionEvents[E]): () => void {
    const set = this.listeners[event] as Set<SessionEvents[E]> | undefined;
    if (!set) throw new TypeError(`Unknown event '${String(event)}'.`);
    set.add(listener);
    return () => this.off(event, listener);
  }

  off<E extends keyof SessionEvents>(event: E, listener: SessionEvents[E]): void {
    (this.listeners[event] as Set<SessionEvents[E]> | undefined)?.delete(listener);
  }

  /**
   * Opens the microphone (and camera or screen), mints a token, connects, and resolves with
   * `session_started`. Call it from a user gesture (a click) so audio can play. A session starts
   * once: later calls return the same promise.
   */
  start(): Promise<SessionStartedMessage> {
    this.starting ??= this.stopping ? Promise.reject(new VoiceAgentError('aborted', 'stop() was called before start().')) : this.run();
    return this.starting;
  }

  /** Closes the session (1000), which frees its concurrency slot, and releases the devices. */
  async stop(): Promise<void> {
    const before = this._state;
    this.stopping = true;
    if (before === 'idle' || before === 'closed') {
      this.setState('closed');
      return;
    }
    this.abort?.(new VoiceAgentError('aborted', 'stop() was called before the session started.'));
    this.releaseMedia();
    const ws = this.ws;
    if (ws && (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING)) ws.close(1000);
    if (this.closed) await Promise.race([this.closed, new Promise((r) => setTimeout(r, STOP_TIMEOUT_MS))]);
    this.setState('closed');
  }

  /** Sends one user turn of typed text (UTF-8, at most 16 KiB). */
  sendText(text: string): void {
    if (typeof text !== 'string' || text.length === 0) throw new TypeError('sendText needs a non-empty string.');
    this.send('text/plain', textToBase64(text));
  }

  /** Mutes the microphone: silence is sent instead (the service expects a continuous stream). */
  setMuted(muted: boolean): void {
    this._muted = muted;
    for (const s of this.streams) for (const t of s.getAudioTracks()) t.enabled = !muted;
  }

  /** Camera or screen frames per second. */
  setImageRate(rate: number): void {
    if (!(rate > 0)) throw new RangeError('The image rate must be a positive number of frames per second.');
    this.opts.imageRate = rate;
    this.grabber?.setRate(rate);
  }

  private emit<E extends keyof SessionEvents>(event: E, ...args: Parameters<SessionEvents[E]>): void {
    for (const fn of [...this.listeners[event]]) {
      try {
        (fn as (...a: Parameters<SessionEvents[E]>) => void)(...args);
      } catch (err) {
        setTimeout(() => {
          throw err;
        });
      }
    }
  }

  private setState(state: SessionState): void {
    if (state === this._state) return;
    this._state = state;
    this.emit('state', state);
  }

  private send(mimeType: 'audio/pcm' | 'image/jpeg' | 'text/plain', data: string): void {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN || (this._state !== 'live' && this._state !== 'ended')) {
      throw new VoiceAgentError('not_live', 'The session is not live.');
    }
    this.ws.send(JSON.stringify({ mime_type: mimeType, data }));
  }

  private async run(): Promise<SessionStartedMessage> {
    this.setState('starting');
    try {
      // Created before any await, so a start() called from a click may play audio.
      if (this.source !== 'text') {
        if (typeof AudioContext !== 'function') throw new VoiceAgentError('media_unavailable', 'This browser has no Web Audio API.');
        this.ctx = new AudioContext({ latencyHint: 'interactive' });
      }
      await this.openMedia();
      this.checkAborted();
      await this.prepareCapture();
      this.checkAborted();
      const wsUrl = await this.mint();
      this.checkAborted();
      const started = await this.connect(wsUrl);
      await this.startStreaming(started);
      return started;
    } catch (err) {
      this.stopping = true;
      this.releaseMedia();
      const ws = this.ws;
      if (ws && ws.readyState === WebSocket.OPEN) ws.close(1000);
      this.setState('closed');
      throw err instanceof VoiceAgentError ? err : new VoiceAgentError('server_error', `The session could not start: ${String(err)}`, { cause: err });
    } finally {
      this.abort = null;
    }
  }

  private checkAborted(): void {
    if (this.stopping) throw new VoiceAgentError('aborted', 'stop() was called before the session started.');
  }

  private async openMedia(): Promise<void> {
    if (this.source === 'text') return;
    const media = navigator.mediaDevices;
    if (!media?.getUserMedia)
      throw new VoiceAgentError('media_unavailable', 'This page cannot use the microphone (a secure context, https or localhost, is required).');
    const audio: MediaTrackConstraints = { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1, ...this.opts.audio };
    if (this.source === 'screen') {
      // getDisplayMedia needs the click's user activation: asked for first.
      if (!media.getDisplayMedia) throw new VoiceAgentError('media_unavailable', 'This browser cannot share the screen.');
      try {
        this.streams.push(await media.getDisplayMedia({ video: true, audio: false }));
      } catch (err) {
        throw mediaError(err, 'screen');
      }
    }
    const withCamera = this.source === 'camera';
    try {
      this.streams.push(await media.getUserMedia({ audio, video: withCamera ? { width: { ideal: 640 }, height: { ideal: 480 }, ...this.opts.video } : false }));
    } catch (err) {
      throw mediaError(err, withCamera ? 'microphone and camera' : 'microphone');
    }
    this.setMuted(this._muted);
  }

  private async mint(): Promise<string> {
    let answer: unknown;
    try {
      const request: TokenRequest = { agent_id: this.agentId, user_id: this.userId, source: this.source };
      if (this.opts.getToken) {
        answer = await this.opts.getToken(request);
      } else {
        const res = await fetch(this.opts.tokenUrl!, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Accept: 'application/json', ...this.opts.tokenHeaders },
          body: JSON.stringify(request),
        });
        if (!res.ok) throw new VoiceAgentError('mint_failed', `The token endpoint answered HTTP ${res.status}.`);
        answer = await res.json();
      }
    } catch (err) {
      if (err instanceof VoiceAgentError) throw err;
      throw new VoiceAgentError('mint_failed', `The token endpoint failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    const wsUrl = answer && typeof answer === 'object' ? (answer as { ws_url?: unknown }).ws_url : undefined;
    if (typeof wsUrl !== 'string' || !/^wss?:\/\//i.test(wsUrl)) {
      throw new VoiceAgentError('mint_failed', 'The token endpoint gave no ws_url.');
    }
    return wsUrl;
  }

  private connect(url: string): Promise<SessionStartedMessage> {
    return new Promise<SessionStartedMessage>((resolve, reject) => {
      let ws: WebSocket;
      try {
        ws = new WebSocket(url);
      } catch (err) {
        reject(new VoiceAgentError('mint_failed', `The token endpoint gave an unusable ws_url: ${String(err)}`, { cause: err }));
        return;
      }
      this.ws = ws;
      let started = false;
      this.abort = reject;
      this.closed = new Promise<void>((done) => {
        ws.onclose = (ev) => {
          done();
          if (!started) {
            reject(this.stopping ? new VoiceAgentError('aborted', 'stop() was called before the session started.') : refusal(ev.code, ev.reason));
            return;
          }
          this.onClose(ev.code, ev.reason);
        };
      });
      ws.onmessage = (ev) => {
        if (typeof ev.data !== 'string') return;
        let msg: ServerMessage;
        try {
          msg = JSON.parse(ev.data) as ServerMessage;
        } catch {
          return;
        }
        if (!started) {
          if (msg.type !== 'session_started') return;
          started = true;
          this._sessionId = msg.session_id;
          this.setState('live');
          this.emit('message', msg);
          resolve(msg);
          return;
        }
        this.onMessage(msg);
      };
    });
  }

  /** The microphone's worklet runs from here on; its frames are sent once the session is live. */
  private async prepareCapture(): Promise<void> {
    const mic = this.streams.find((s) => s.getAudioTracks().length > 0);
    if (!this.ctx || !mic) return;
    this.stopCapture = await startCapture(this.ctx, mic, (pcm) => {
      if (this.ws?.readyState === WebSocket.OPEN && this._state === 'live') this.send('audio/pcm', bytesToBase64(new Uint8Array(pcm)));
    });
  }

  private async startStreaming(started: SessionStartedMessage): Promise<void> {
    const ctx = this.ctx;
    if (!ctx) return;
    if (ctx.state === 'suspended') await ctx.resume().catch(() => undefined);
    // The service may have closed the socket meanwhile (onClose released everything).
    if (this._state === 'closed') return;
    if (started.audio_format) {
      this.player = new Player(ctx, started.audio_format.sample_rate, (speaking) => this.emit('speaking', speaking));
    }
    const video = this.streams.find((s) => s.getVideoTracks().length > 0);
    if (video) {
      this.grabber = new FrameGrabber(
        video,
        { rate: this.opts.imageRate ?? 1, quality: this.opts.imageQuality ?? 0.7, maxWidth: this.opts.imageMaxWidth ?? 1280 },
        (jpeg) => {
          if (this.ws?.readyState === WebSocket.OPEN && this._state === 'live') this.send('image/jpeg', jpeg);
        },
      );
      await this.grabber.start();
    }
    for (const s of this.streams) {
      for (const track of s.getTracks()) {
        track.addEventListener('ended', () => {
          if (this._state === 'live')
            this.emit('error', new VoiceAgentError('media_ended', `The ${track.kind === 'audio' ? 'microphone' : track.label || 'video'} stopped.`));
        });
      }
    }
  }

  private onMessage(msg: ServerMessage): void {
    this.emit('message', msg);
    switch (msg.type) {
      case 'audio': {
        const samples = pcm16ToFloat(base64ToBytes(msg.data));
        const sampleRate = Number(/rate=(\d+)/.exec(msg.mime_type)?.[1] ?? 24000);
        this.emit('audio', { samples, sampleRate });
        this.player?.play(samples);
        break;
      }
      case 'interrupted':
        this.player?.flush();
        this.emit('interrupted');
        break;
      case 'tool_call':
        this.emit('toolCall', { name: msg.name, status: msg.status });
        break;
      case 'transcript': {
        const { role, text, final, timestamp } = msg;
        this.emit('transcript', { role, text, final, timestamp });
        break;
      }
      case 'text':
        this.replyText += msg.text;
        break;
      case 'turn_complete':
        if (this.replyText) this.emit('reply', this.replyText);
        this.replyText = '';
        break;
      case 'session_ended':
        this.setState('ended');
        break;
      case 'error':
        this.emit('error', new VoiceAgentError(msg.code, msg.error));
        break;
    }
  }

  private onClose(code: number, reason: string): void {
    this.releaseMedia();
    // After `session_ended` (the idle ladder or the maximum duration), the service closes normally: no error.
    const endedByService = code === 1000 && this.state === 'ended';
    if (!this.stopping && !endedByService) {
      this.emit(
        'error',
        new VoiceAgentError('connection_lost', `The session was closed by the service (${code}${reason ? ` ${reason}` : ''}).`, { closeCode: code }),
      );
    }
    this.emit('close', { code, reason });
    this.setState('closed');
  }

  private releaseMedia(): void {
    this.grabber?.stop();
    this.grabber = null;
    this.stopCapture?.();
    this.stopCapture = null;
    this.player?.flush();
    this.player = null;
    for (const s of this.streams) for (const t of s.getTracks()) t.stop();
    if (this.ctx && this.ctx.state !== 'closed') void this.ctx.close().catch(() => undefined);
    this.ctx = null;
  }
}
