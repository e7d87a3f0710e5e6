/**
 * One live web session: the framing of the realtime WebSocket around a Conversation
 * (src/conversation/engine.ts). Client frames are checked (frames.ts) and passed to the conversation;
 * what the conversation reports becomes server messages (asyncapi/schemas/Realtime*.yaml). The
 * WebSocket's own rules live here: `session_started`, the in-session error codes, the text-session
 * apology, `no_audio_received`, `session_ended`, and 1011 when the voice service is lost; the
 * session's conversation settings: its idle ladder (reminders, then a goodbye, `session_ended`
 * `idle_timeout` and a close) and its maximum duration (`time_limit`). And the
 * session's budgets: audio, typed messages and images beyond what a person sends are dropped and
 * counted (typed messages and images answered once a run of drops); a frame of the usual shape over
 * its budget or size cap is dropped from its raw bytes, before it is parsed or decoded.
 */
import type { RuntimeLinks } from '../agents/service.js';
import type { WebSocket } from 'ws';
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import type { VoiceSession } from '../voice/types.js';
import { Conversation, type ConversationOptions, type ConversationOutcome, type ConversationTools, type LiveEventSink } from '../conversation/engine.js';
import { oversize, parseFrame, peekFrame, TEXT_SESSION_CODES, type FrameFailure, type MimeType, type ServerErrorCode } from './frames.js';
import type { RealtimeServerMessage } from '../../generated/asyncapi-types.js';
import type { EndReason, Source } from './store.js';
import type { AnalysisSetting } from '../conversation/write-up.js';
import { audioBudget, type AudioBudgetOptions } from '../audio/budget.js';
import { Budget, type BudgetClock, type BudgetFigures } from '../lib/budget.js';
import { DEFAULT_SPEECH_RMS, Resampler24kTo16k, rms } from '../audio/pcm16.js';
import { DEFAULT_SETTINGS, type ConversationSettings } from '../voice/conversation-settings.js';
import { IdleLadder } from '../conversation/idle-ladder.js';
import type { ClockedTwoChannelRecorder } from '../recordings/clocked.js';
import { Redactor } from '../redaction/redactor.js';
import { RecordingRedaction } from '../conversation/recording-redaction.js';
import type { RedactionSetting } from '../redaction/setting.js';

export { FILLER } from '../conversation/engine.js';

export interface SessionInfo {
  id: string;
  workspaceId: string;
  agentId: string;
  /** What the agent version the session runs links (its tools, documents and MCP servers). */
  links: RuntimeLinks;
  /** The agent version the session runs (its token's); null only for a session from before 047 finalised as an orphan. */
  agentVersion: number | null;
  userId: string;
  source: Source;
  startedAt: Date;
  firstMessage: string | null;
  variables: Record<string, string>;
  /** The agent's `analysis` setting as the session started with it. */
  analysis: AnalysisSetting | null;
  /** The agent's `analysis_model` as the session started with it (null: the service's default). */
  analysisModel: string | null;
  /** Whether the session records: the agent's `recording` setting as it started (never a text session). */
  recording: boolean;
  /** The agent's `redaction` setting as the session started with it. */
  redaction: RedactionSetting | null;
  /** The conversation settings the session runs with (the agent's with the session's override); absent: the defaults. */
  conversation?: ConversationSettings;
}

export type SessionOutcome = ConversationOutcome & { endReason: EndReason };

export interface BridgeOptions extends ConversationOptions {
  noAudioAfterMs: number;
  /** The client's audio budget (real time plus a burst); audio beyond it is dropped. */
  audioBudget: AudioBudgetOptions;
  /** Counts dropped audio, seconds (the `media_audio_dropped_seconds_total` metric). */
  onAudioDropped?: (seconds: number) => void;
  /** Typed messages and images a session may send, a second and at once; what is over is dropped. */
  textBudget: BudgetFigures;
  imageBudget: BudgetFigures;
  /** Counts a typed message or image dropped beyond its budget (`rate`) or size cap (`size`) (the `media_input_dropped_total` metric). */
  onInputDropped?: (kind: InputKind, reason: 'rate' | 'size') => void;
  /** What the budgets are refilled by (tests give their own); default: the monotonic clock. */
  budgetClock?: BudgetClock;
  /** Called with the time from a frame's receipt to its hand-over to the voice session (benchmarks). */
  onForward?: (nanoseconds: bigint) => void;
}

/** After the idle goodbye was asked for, how long its turn may take before the session ends anyway. */
const GOODBYE_WAIT_MS = 8000;

const APOLOGY = "Sorry, I couldn't read that message. Could you send it again?";
/** A text session's answers where other sessions get an error code (the spec allows it no others). */
const TEXT_APOLOGIES: Partial<Record<ServerErrorCode, string>> = {
  text_too_long: 'Sorry, that message is too long for me to read. Could you send it in shorter parts?',
  text_rate_limited: 'Sorry, messages are arriving faster than I can read them, so I missed some. Could you send again what matters, one at a time?',
};

type InputKind = 'text' | 'image';
const RATE_LIMITED = { text: 'text_rate_limited', image: 'image_rate_limited' } as const;
const KIND_OF: Record<Exclude<MimeType, 'audio/pcm'>, InputKind> = { 'text/plain': 'text', 'image/jpeg': 'image' };
const SIZE_CODES: Partial<Record<ServerErrorCode, InputKind>> = { text_too_long: 'text', image_too_large: 'image' };

export class SessionBridge {
  private readonly isText: boolean;
  private readonly conversation: Conversation;
  private readonly audioBudget: Budget;
  private readonly budgets: Record<InputKind, Budget>;
  /** Kinds whose last message was dropped by its budget (the next drop is not answered again). */
  private readonly limited = new Set<InputKind>();
  private firstImageAt: number | null = null;
  private audioReceived = false;
  private noAudioSent = false;
  private finished = false;
  /** Why the server closed the session (shutdown, or its reservation ran out); null: it did not. */
  private closedByServer: EndReason | null = null;
  private onProgress: (() => void) | undefined;
  /** The agent's audio at the recording's 16 kHz (only when recording). */
  private readonly toRecording: Resampler24kTo16k | null;
  private readonly settings: ConversationSettings;
  /** The idle ladder of the session's `conversation.idle` (none without it). */
  private readonly idle: IdleLadder | null;
  /** The idle ladder gave up and the goodbye is being said: the session ends after its turn. */
  private endingAfterTurn = false;
  /** performance.now() when the client will have played the agent audio sent so far (it plays it in real time as it arrives). */
  private playoutEnd = 0;
  private firstTurnDone = false;
  private readonly timers: NodeJS.Timeout[] = [];
  private resolveDone!: (o: SessionOutcome) => void;
  /** Resolves once when the socket has closed, with what the conversation record needs. */
  readonly done = new Promise<SessionOutcome>((r) => (this.resolveDone = r));

  constructor(
    private readonly ws: WebSocket,
    voice: VoiceSession,
    readonly info: SessionInfo,
    tools: ConversationTools | null,
    private readonly clock: Clock,
    private readonly opts: BridgeOptions,
    private readonly log: Logger,
    /** Both sides as each heard the other; only when the session's recording setting is on. */
    private readonly recorder: ClockedTwoChannelRecorder | null = null,
    /** The session's live events (its event stream); null: not set up. */
    live: LiveEventSink | null = null,
  ) {
    this.audioBudget = audioBudget(opts.audioBudget, opts.budgetClock);
    this.budgets = { text: new Budget(opts.textBudget, opts.budgetClock), image: new Budget(opts.imageBudget, opts.budgetClock) };
    this.toRecording = recorder ? new Resampler24kTo16k() : null;
    this.isText = info.source === 'text';
    this.settings = info.conversation ?? DEFAULT_SETTINGS;
    this.idle = this.settings.idle
      ? new IdleLadder(this.settings.idle, () => clock.now().getTime(), {
          remind: (text, n) => this.remind(text, n),
          giveUp: (goodbye, n) => this.idleGiveUp(goodbye, n),
        })
      : null;
    const redactor = Redactor.of(info.redaction);
    const spans = RecordingRedaction.of(redactor, recorder);
    this.conversation = new Conversation(
      voice,
      {
        id: info.id,
        workspaceId: info.workspaceId,
        agentId: info.agentId,
        links: info.links,
        firstMessage: info.firstMessage,
        textMode: this.isText,
        live,
        redaction: redactor,
        interruptions: this.settings.interruptions,
        playoutTracked: !this.isText,
      },
      tools,
      clock,
      opts,
      {
        agentAudio: (pcm) => {
          this.idle?.activity();
          // 24 kHz PCM16: 48 bytes a millisecond.
          this.playoutEnd = Math.max(this.playoutEnd, performance.now()) + pcm.length / 48;
          this.send({ type: 'audio', mime_type: 'audio/pcm;rate=24000', data: pcm.toString('base64') });
          if (this.recorder) {
            spans?.agentAudio();
            this.recorder.agentAudio(this.toRecording!.process(pcm));
          }
        },
        agentText: (text) => {
          this.idle?.activity();
          this.send({ type: 'text', text });
        },
        transcript: (u) => {
          if (!this.isText) this.send({ type: 'transcript', role: u.role, text: u.text, final: u.final, timestamp: u.timestamp });
          spans?.transcript(u);
        },
        committed: () => this.onProgress?.(),
        turnComplete: () => {
          this.idle?.activity();
          if (!this.firstTurnDone) {
            this.firstTurnDone = true;
            const left = Math.max(0, this.playoutEnd - performance.now());
            this.timers.push(setTimeout(() => this.conversation.firstMessagePlayed(), left));
          }
          this.send({ type: 'turn_complete' });
          if (this.endingAfterTurn) this.endSession('idle_timeout');
        },
        interrupted: () => {
          this.firstTurnDone = true;
          this.send({ type: 'interrupted' });
          // The client drops the audio it has queued: the recording's right channel stops here too.
          this.recorder?.interrupted();
          spans?.interrupted();
          this.onProgress?.();
        },
        toolCall: (name, status) => {
          this.idle?.activity();
          this.send({ type: 'tool_call', name, status });
          if (status !== 'started') this.onProgress?.();
        },
        agentEnded: () => this.send({ type: 'session_ended', reason: 'agent_ended' }),
        upstreamLost: (message) => this.upstreamLost(message),
      },
      log,
    );
    ws.on('close', () => void this.finish());
  }

  /** `onChange` is called whenever the conversation gathered more to keep; the returned function reads it. */
  watchProgress(onChange: () => void): () => Omit<ConversationOutcome, 'status' | 'endedAt'> {
    this.onProgress = onChange;
    return () => this.conversation.snapshot();
  }

  private send(message: RealtimeServerMessage): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(JSON.stringify(message));
  }

  private sendError(code: ServerErrorCode, error: string): void {
    this.send({ type: 'error', code, error });
  }

  start(): void {
    this.send({
      type: 'session_started',
      session_id: this.info.id,
      agent_id: this.info.agentId,
      agent_version: this.info.agentVersion!,
      user_id: this.info.userId,
      source: this.info.source,
      audio_format: this.isText ? null : { encoding: 'pcm16le', sample_rate: 24000, channels: 1 },
    });
    this.idle?.start();
    const max = this.settings.max_duration_seconds;
    if (max) this.timers.push(setTimeout(() => this.endSession('time_limit'), max * 1000));
  }

  /** The idle ladder's reminder (not once the conversation is ending). */
  private remind(text: string, count: number): void {
    if (this.finished || this.conversation.ended || this.endingAfterTurn) return;
    try {
      this.conversation.remind(text, count);
    } catch (err) {
      this.log.warn({ err, sessionId: this.info.id }, 'idle reminder could not be passed on');
    }
  }

  /** The idle ladder gave up: the goodbye is said (if any), then the session ends (`idle_timeout`). */
  private idleGiveUp(goodbye: string | null, count: number): void {
    if (this.finished || this.conversation.ended || this.endingAfterTurn) return;
    try {
      this.conversation.idleHangup(goodbye, count);
    } catch (err) {
      this.log.warn({ err, sessionId: this.info.id }, 'idle goodbye could not be passed on');
      goodbye = null;
    }
    if (!goodbye) return this.endSession('idle_timeout');
    this.endingAfterTurn = true;
    // A goodbye whose turn never completes still ends the session.
    this.timers.push(setTimeout(() => this.endSession('idle_timeout'), GOODBYE_WAIT_MS));
  }

  /** The server ends the session: `session_ended` with the reason, then the socket closes (1000). */
  private endSession(reason: 'idle_timeout' | 'time_limit'): void {
    if (this.finished || this.closedByServer) return;
    this.send({ type: 'session_ended', reason });
    this.close(1000, '', reason);
  }

  /** The agent's apology for a message it could not take (text sessions carry no other error codes). */
  private apologise(text = APOLOGY): void {
    this.send({ type: 'text', text });
    this.send({ type: 'turn_complete' });
  }

  /**
   * A message that could not be passed to the agent: `forward_failed` in a voice, camera or screen
   * session; in a text session (whose only error codes are binary_frame_unsupported and missing_data)
   * an apology `text` from the agent instead.
   */
  private notForwarded(): void {
    if (this.isText) this.apologise();
    else this.sendError('forward_failed', 'The message could not be passed to the agent; send it again.');
  }

  /** A frame dropped before the session started (the admission hold was full). */
  frameDropped(): void {
    if (!this.finished) this.notForwarded();
  }

  /**
   * One client frame. `receivedAt` is process.hrtime.bigint() at receipt. After `session_ended` the
   * session stays connected: unusable frames are still answered with their error, usable ones are not
   * passed on (the agent has left the conversation).
   */
  handleFrame(raw: Buffer | string, isBinary: boolean, receivedAt: bigint): void {
    if (this.finished) return;
    // Judged from its raw bytes first: over its size cap or budget, a frame is not parsed or decoded.
    const peek = isBinary || typeof raw === 'string' ? null : peekFrame(raw);
    if (peek) {
      const tooLarge = this.ignored(peek.mimeType) ? null : oversize(peek.mimeType, peek.bytes);
      if (tooLarge) return this.unusable(tooLarge);
      if (!this.admits(peek.mimeType, peek.bytes, false)) return;
    }
    const frame = parseFrame(raw, isBinary);
    if (!frame.ok) return this.unusable(frame);
    if (!this.admits(frame.mimeType, frame.bytes.length, true)) return;
    if (this.conversation.ended) return;
    try {
      switch (frame.mimeType) {
        case 'audio/pcm':
          if (this.idle && rms(frame.bytes) >= DEFAULT_SPEECH_RMS) this.idle.activity(true);
          this.recorder?.personAudio(frame.bytes);
          this.conversation.sendAudio(frame.bytes);
          break;
        case 'image/jpeg':
          this.checkAudioPresence();
          this.conversation.sendImage(frame.bytes);
          break;
        case 'text/plain':
          this.idle?.activity(true);
          this.conversation.sendText(frame.bytes.toString('utf8'));
          break;
      }
      this.opts.onForward?.(process.hrtime.bigint() - receivedAt);
    } catch (err) {
      this.log.warn({ err, sessionId: this.info.id }, 'frame could not be forwarded');
      this.notForwarded();
    }
  }

  /** Text sessions ignore audio and images without error. */
  private ignored(mimeType: MimeType): boolean {
    return this.isText && mimeType !== 'text/plain';
  }

  private unusable(frame: FrameFailure): void {
    const sized = SIZE_CODES[frame.code];
    if (sized) this.opts.onInputDropped?.(sized, 'size');
    if (!this.isText) this.sendError(frame.code, frame.error);
    else if (frame.code === 'invalid_json') this.apologise();
    else if (TEXT_APOLOGIES[frame.code]) this.apologise(TEXT_APOLOGIES[frame.code]);
    else if (TEXT_SESSION_CODES.has(frame.code)) this.sendError(frame.code, frame.error);
  }

  /**
   * Whether the session's budget lets a message through, taking from it when `take` (a frame read from
   * its raw bytes is only judged; it is taken once parsed). Audio beyond it is dropped and counted; a
   * typed message or an image is dropped, counted and answered with its `..._rate_limited` error,
   * once a run: the next drop after one got through is answered again, so the answers are never
   * more than the messages taken (plus one).
   */
  private admits(mimeType: MimeType, bytes: number, take: boolean): boolean {
    if (this.ignored(mimeType)) return false;
    if (mimeType === 'audio/pcm') {
      this.audioReceived = true;
      // 16 kHz PCM16: 32 bytes a millisecond.
      if (take ? this.audioBudget.take(bytes / 32) : this.audioBudget.fits(bytes / 32)) return true;
      this.opts.onAudioDropped?.(bytes / 32_000);
      return false;
    }
    const kind = KIND_OF[mimeType];
    const budget = this.budgets[kind];
    if (take ? budget.take(1) : budget.fits(1)) {
      if (take) this.limited.delete(kind);
      return true;
    }
    this.opts.onInputDropped?.(kind, 'rate');
    if (!this.limited.has(kind)) {
      this.limited.add(kind);
      const { perSecond, burst } = kind === 'text' ? this.opts.textBudget : this.opts.imageBudget;
      const what = kind === 'text' ? 'Typed messages' : 'Images';
      if (this.isText) this.apologise(TEXT_APOLOGIES.text_rate_limited);
      else
        this.sendError(
          RATE_LIMITED[kind],
          `${what} are arriving faster than this session takes them (${burst} at once, then ${perSecond} a second): this one was dropped, and so are the ones after it until the pace is back within that. Send again what matters.`,
        );
    }
    return false;
  }

  /** `no_audio_received`: once, on an image at least noAudioAfterMs after the first image, with no audio yet. */
  private checkAudioPresence(): void {
    const now = this.clock.now().getTime();
    if (this.firstImageAt === null) {
      this.firstImageAt = now;
      return;
    }
    if (!this.audioReceived && !this.noAudioSent && now - this.firstImageAt >= this.opts.noAudioAfterMs) {
      this.noAudioSent = true;
      this.sendError('no_audio_received', 'Images are arriving but no audio has been received; is the microphone muted?');
    }
  }

  private upstreamLost(message: string): void {
    if (this.finished || this.ws.readyState !== this.ws.OPEN) return;
    this.log.warn({ sessionId: this.info.id, message }, 'voice service unavailable; closing session with 1011');
    this.conversation.markFailed();
    // Text sessions emit no error codes but binary_frame_unsupported and missing_data: they just close.
    if (!this.isText) this.sendError('upstream_unavailable', 'The voice service is unavailable; the session ends.');
    this.ws.close(1011);
  }

  /** Closes the client socket from the server side (shutdown, a reservation run out), which then finishes the session. */
  close(code: number, reason: string, endReason: EndReason = 'shutdown'): void {
    this.closedByServer ??= endReason;
    if (this.ws.readyState === this.ws.OPEN || this.ws.readyState === this.ws.CONNECTING) this.ws.close(code, reason);
    else void this.finish();
  }

  private async finish(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    this.idle?.stop();
    for (const t of this.timers) clearTimeout(t);
    // The recording ends as the socket closed; its last audio is written before the session's record
    // (and call.completed) is.
    const recorded = this.recorder?.close().catch((err) => this.log.warn({ err: (err as Error).message }, 'recording could not be closed'));
    const outcome = await this.conversation.finish();
    await recorded;
    const endReason: EndReason =
      outcome.status === 'failed' ? 'service_error' : (this.closedByServer ?? (this.conversation.ended ? 'agent_ended' : 'client_closed'));
    this.resolveDone({ ...outcome, endReason });
  }
}
