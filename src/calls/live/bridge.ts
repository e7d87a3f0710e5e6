/**
 * One live phone call: the carrier's media stream around a Conversation (src/conversation/engine.ts).
 *
 * Caller audio (mu-law 8 kHz, reordered when the carrier delivers out of order) is transcoded and
 * passed to the voice session; the agent's audio is transcoded back and sent in 20 ms frames, a `mark`
 * after each agent turn so we learn when it has been heard; when the caller speaks over the agent the
 * carrier's buffer is cleared (`clear`) and the interruption counted. The first message counts as
 * delivered once its mark comes back without a clear in between.
 *
 * The bridge also ends calls: the agent's `end_conversation` (after its goodbye has played) and the
 * built-in `transfer_call` tool, the built-in `opt_out` tool (the person asked not to be called again:
 * their number goes on the workspace's do-not-call list, then the agent's confirmation and goodbye
 * play and the call is hung up), the idle ladder of the call's conversation settings (reminders, then
 * a goodbye and `idle_timeout`; without settings the deployment's silence timeout), the maximum call
 * length (the settings' own within the deployment's) and the call's
 * reservation of credit and plan minutes running out (each hangs up at the carrier with its end
 * reason), and answering machines: on a machine the caller's audio stops going to the model; after
 * the greeting the agent's voicemail message is spoken (when enabled) and the call hung up once it has
 * played.
 *
 * Keys the person presses (the carrier's `dtmf` frames) are gathered into runs (keypad.ts) and given
 * to the model as input and to the transcript as entries marked `dtmf`. Keys, like caller audio, have
 * a budget (what a person can press): keys beyond it are dropped and counted, the call goes on; a
 * frame over its budget is dropped from its first bytes, before it is parsed. The agent presses keys with
 * the built-in `send_dtmf` tool (dtmf-tool.ts): by the carrier's command where it has one
 * (provider_b `send_dtmf`), else as tones in its audio on the media stream (provider_a), the tool
 * answering once a mark after the tones comes back, that is once they have played.
 *
 * The conversation so far is written to the call as it goes; when the stream ends the bridge writes
 * the rest and finalises the call (src/calls/finaliser.ts).
 */
import type { Logger } from 'pino';
import type { Clock } from '../../lib/clock.js';
import { DEFAULT_SPEECH_RMS, rms } from '../../audio/pcm16.js';
import type { RecordingService } from '../../recordings/service.js';
import type { TwoChannelRecorder } from '../../recordings/two-channel.js';
import { VoiceModelRefusedError, type VoiceService } from '../../voice/types.js';
import type { RuntimeAgent } from '../../agents/service.js';
import { Conversation, type ConversationTools } from '../../conversation/engine.js';
import { DEFAULT_SETTINGS, maxDurationMs, type ConversationSettings } from '../../voice/conversation-settings.js';
import { IdleLadder } from '../../conversation/idle-ladder.js';
import { progressColumns, type ProgressColumns, type ProgressSaves } from '../../conversation/progress-saves.js';
import { conversationVariables, fillPlaceholders, filledFieldCaps } from '../../contract/placeholders.js';
import type { CallFinaliser } from '../finaliser.js';
import type { CallLiveEvents } from '../live-events.js';
import type { CallRow, CallStore, EndReason } from '../store.js';
import { callRedactor } from '../records.js';
import type { Redactor } from '../../redaction/redactor.js';
import { RecordingRedaction } from '../../conversation/recording-redaction.js';
import { CallTranscoder } from '../../carriers/transcode.js';
import { frameHead, type MediaDialect, type MediaEvent } from '../../carriers/media.js';
import type { Carrier, CarrierAccounts, CarrierCredentials, MediaSocket } from '../../carriers/index.js';
import type { CallSignal } from './signals.js';
import type { NumberRefusal } from '../../destinations/policy.js';
import type { PhoneTransferDestination } from '../../agents/store.js';
import { audioBudget, type AudioBudgetOptions } from '../../audio/budget.js';
import { Budget, type BudgetClock, type BudgetFigures } from '../../lib/budget.js';

import { chosenDestination, transferDeclaration } from './transfer-tool.js';
import { dtmfArguments, sendDtmfDeclaration } from './dtmf-tool.js';
import { OPT_OUT_DONE, optOutDeclaration } from './opt-out-tool.js';
import { KeypadRuns } from './keypad.js';
import { dtmfDurationMs, dtmfTonesUlaw } from '../../audio/dtmf.js';
import { FRAME_BYTES } from '../../carriers/transcode.js';

export interface CallBridgeOptions {
  toolTimeoutMs: number;
  toolFillerMs: number;
  recordMaxBytes: number;
  /** Neither side spoke for this long: hang up (`silence_timeout`), unless the call's settings have an idle ladder; 0: never. */
  silenceTimeoutMs: number;
  /** The longest call (the deployment's cap; a call's `max_duration_seconds` may be shorter). */
  maxDurationMs: number;
  /** A run of keys the person presses ends after this long without a key (CALL_DTMF_GAP_MS). */
  dtmfGapMs: number;
  /** The caller's audio budget (real time plus a burst); audio beyond it is dropped before transcoding. */
  audioBudget: AudioBudgetOptions;
  /**
   * How long (wall ms) the caller's audio is held while the voice session opens: as long as an open may
   * take (VOICE_CONNECT_TIMEOUT_MS), so what the person says meanwhile reaches the model however slowly
   * it opens.
   */
  openHoldMs: number;
  /** Counts dropped caller audio, seconds (the `media_audio_dropped_seconds_total` metric). */
  onAudioDropped?: (seconds: number) => void;
  /** The keys the caller may press, a second and at once; keys beyond are dropped. */
  keyBudget: BudgetFigures;
  /** Counts dropped keys (the `media_input_dropped_total` metric). */
  onKeysDropped?: (keys: number) => void;
  /** What the budgets are refilled by (tests give their own); default: the monotonic clock. */
  budgetClock?: BudgetClock;
  /** Transfers the agent may try on one call (TRANSFER_MAX_ATTEMPTS). */
  transferMaxAttempts: number;
  /** Benchmarks: time from a caller frame's receipt to its hand-over to the voice session. */
  onForward?: (nanoseconds: bigint) => void;
  /** Benchmarks (scripts/bench/turn-latency.ts): the stamps of each caller turn's reply (TurnTiming). */
  onTurnTiming?: (timing: TurnTiming) => void;
}

/**
 * One caller turn and the start of the agent's reply, as `process.hrtime.bigint()` stamps taken in
 * this process: the receipt of the turn's last loud caller frame on the media socket and its
 * hand-over to the voice session, the receipt of the voice service's first audio message of the reply,
 * and the send of the reply's first frame to the carrier. Only turns `measureLatency` counts (a turn
 * begun while the agent was silent; speech over the agent is a barge-in).
 */
export interface TurnTiming {
  callId: string;
  receivedAt: bigint;
  forwardedAt: bigint;
  voiceAudioAt: bigint;
  sentAt: bigint;
}

export interface CallBridgeDeps {
  store: CallStore;
  /** This instance's progress saves of live calls (one statement a tick for all of them). */
  progress: ProgressSaves;
  voice: VoiceService;
  tools: ConversationTools | null;
  carrier: Carrier;
  /** The credentials the call's carrier takes from the agent's accounts. */
  credentials(accounts: CarrierAccounts): CarrierCredentials;
  finaliser: CallFinaliser;
  clock: Clock;
  log: Logger;
  /** The workspace's destination policy, applied again when the call is transferred (it may have changed since the agent was saved). */
  destinations: { transferRefusal(workspaceId: string, number: string): Promise<NumberRefusal | null> };
  /** The workspace's do-not-call list, where the `opt_out` tool puts the person's number (null: not set up; the tool is not offered). */
  doNotCall?: { optOut(workspaceId: string, number: string, callId: string): Promise<unknown> } | null;
  /** Records calls whose recording setting is on (null: recordings are not set up). */
  recordings: RecordingService | null;
  /** The call's live events and opt-in webhooks (null: not set up). */
  live?: CallLiveEvents | null;
}

type ToolAnswer = { ok: boolean; result: unknown; error: string | null };

/** Frames held waiting for a missing one before it is given up (provider_b may reorder). */
const REORDER_WINDOW = 3;
/** After the agent's last words (goodbye, voicemail message), how long to wait for their mark. */
const PLAYBACK_WAIT_MS = 8000;
/** After we hang up, how long the carrier has to close the stream before we close it. */
const STREAM_CLOSE_WAIT_MS = 3000;

export class CallBridge {
  private readonly transcoder = new CallTranscoder();
  private readonly audioBudget: Budget;
  private readonly keyBudget: Budget;
  private conversation: Conversation | null = null;
  private readonly held: Buffer[] = [];
  /** Caller frames (20 ms of audio each, `audioBudget.rate` times real time) that fit in `openHoldMs`. */
  private readonly openHoldFrames: number;
  private nextSeq: number | null = null;
  private readonly reorder = new Map<number, Buffer>();
  private turn = 0;
  private readonly pendingMarks = new Set<string>();
  private firstMark: string | null = null;
  private firstMarkPlayed = false;
  private clearedSinceFirstMark = false;
  /** The call's conversation settings (copied onto it as it was created; calls older than them: the defaults). */
  private readonly settings: ConversationSettings;
  /** The idle ladder (the settings' `idle`, else the deployment's silence timeout); null: none. */
  private idle: IdleLadder | null = null;
  /** performance.now() of the caller's last loud frame, of the start of their current turn, of the agent's last audio. */
  private callerSpokeAt: number | null = null;
  private callerTurnAt: number | null = null;
  private agentAudioAt = 0;
  /** Benchmarks only (`onTurnTiming`): the last loud caller frame's stamps, the last voice audio message's receipt, a reply's stamps awaiting its first frame. */
  private lastLoud: { receivedAt: bigint; forwardedAt: bigint } | null = null;
  private voiceAudioAt = 0n;
  private pendingTiming: Omit<TurnTiming, 'sentAt'> | null = null;
  private voicemail: 'no' | 'waiting_greeting' | 'leaving_message' | 'done' = 'no';
  private messageRequestedAt: number | null = null;
  private heardAfterMessage = false;
  private hangingUp = false;
  private hangupAfterPlayback = false;
  /** The agent ended the conversation: hang up once its last turn (the goodbye) has played. */
  private awaitingFinalTurn = false;
  private endReason: EndReason | null = null;
  private finished = false;
  private stopReceived = false;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly keypad: KeypadRuns;
  /** Runs of keys pressed while the voice session was opening. */
  private readonly heldKeys: string[] = [];
  /** Keys the agent sent as tones, by the mark that follows them: resolved when it comes back. */
  private readonly toneMarks = new Map<string, { interrupted: boolean; done: (interrupted: boolean) => void }>();
  private dtmfSent = 0;
  /** Transfers tried on this call (refused ones too), and the one under way. */
  private transferAttempts = 0;
  private transferring: Promise<unknown> | null = null;
  /** Both sides as each heard the other (8 kHz, as the carrier carried them); only when the call's recording setting is on. */
  private readonly recorder: TwoChannelRecorder | null;
  /** The call's redaction setting, compiled as its bridge starts. */
  private readonly redactor: Redactor | null;
  /** Its spans of the recording decided (the setting covers recordings). */
  private readonly recordingRedaction: RecordingRedaction | null;
  private resolveDone!: () => void;
  /** Resolves once the call's stream has ended and the call has been finalised (or handed over). */
  readonly done = new Promise<void>((r) => (this.resolveDone = r));

  constructor(
    private readonly ws: MediaSocket,
    private readonly dialect: MediaDialect,
    private readonly streamId: string,
    private call: CallRow,
    private readonly agent: RuntimeAgent,
    private readonly deps: CallBridgeDeps,
    private readonly opts: CallBridgeOptions,
    private readonly log: Logger,
  ) {
    this.settings = call.conversation ?? DEFAULT_SETTINGS;
    this.audioBudget = audioBudget(opts.audioBudget, opts.budgetClock);
    this.openHoldFrames = Math.ceil((opts.openHoldMs * opts.audioBudget.rate) / 20);
    this.keyBudget = new Budget(opts.keyBudget, opts.budgetClock);
    this.keypad = new KeypadRuns(opts.dtmfGapMs, (keys) => this.keysToModel(keys));
    this.redactor = callRedactor(call);
    this.recorder =
      call.recording_enabled && deps.recordings
        ? deps.recordings.startTwoChannel(
            {
              workspaceId: call.workspace_id,
              conversationId: call.id,
              kind: 'phone_call',
              sampleRate: 8000,
              redacted: this.redactor?.covers('recordings') ?? false,
            },
            log,
          )
        : null;
    this.recordingRedaction = RecordingRedaction.of(this.redactor, this.recorder);
    ws.on('close', () => void this.finish('stream_closed'));
  }

  get callId(): string {
    return this.call.id;
  }

  private now(): number {
    return this.deps.clock.now().getTime();
  }

  private send(json: string): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(json);
  }

  /** One frame of the agent's mu-law to the carrier: as it is to an in-process stream that takes it, else a `media` frame. */
  private sendMedia(ulaw: Buffer): void {
    if (this.ws.sendAgentAudio) {
      if (this.ws.readyState === this.ws.OPEN) this.ws.sendAgentAudio(ulaw);
    } else this.send(this.dialect.media(this.streamId, ulaw.toString('base64')));
  }

  /**
   * Opens the voice session and starts the conversation; the agent speaks its first message first,
   * after the agent's recording disclosure when the call is recorded.
   */
  async start(): Promise<void> {
    const agent = this.agent;
    const disclosure = this.call.recording_enabled ? agent.recordingDisclosure : null;
    const firstMessage = disclosure ? [disclosure, this.call.first_message].filter(Boolean).join(' ') : this.call.first_message;
    const tools = this.deps.tools
      ? await this.deps.tools.declarations({ workspaceId: agent.workspaceId, agentId: agent.id, links: agent.links }).catch(() => [])
      : [];
    const transferTool = agent.transferDestinations.length ? transferDeclaration(agent.transferDestinations) : null;
    if (transferTool) tools.push(transferTool);
    tools.push(sendDtmfDeclaration);
    const optOut = agent.optOutEnabled && this.deps.doNotCall ? optOutDeclaration : null;
    if (optOut) tools.push(optOut);
    let voice;
    try {
      voice = await this.deps.voice.open({
        instruction: this.call.instruction,
        firstMessage,
        model: agent.model,
        voiceId: agent.voiceId,
        language: agent.language,
        languageCode: agent.languageCode,
        tools,
        canEndConversation: agent.canEndConversation,
        source: 'phone',
        conversation: this.settings,
        ...(this.opts.onTurnTiming ? { onAudioReceived: (at: bigint) => (this.voiceAudioAt = at) } : {}),
      });
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'voice session could not start; ending the call');
      this.endReason = err instanceof VoiceModelRefusedError ? 'model_refused' : 'service_error';
      await this.hangup();
      this.ws.close(1011);
      return;
    }
    if (this.finished) {
      await voice.close().catch(() => undefined);
      return;
    }
    const conversation = new Conversation(
      voice,
      {
        id: this.call.id,
        workspaceId: agent.workspaceId,
        agentId: agent.id,
        links: agent.links,
        firstMessage,
        textMode: false,
        externalLatency: true,
        live: this.deps.live?.sink(this.call) ?? null,
        redaction: this.redactor,
        interruptions: this.settings.interruptions,
        playoutTracked: true,
      },
      this.deps.tools,
      this.deps.clock,
      this.opts,
      {
        agentAudio: (pcm) => this.agentAudio(pcm),
        turnComplete: () => this.turnComplete(),
        interrupted: () => this.interrupted(),
        transcript: (u) => {
          if (!this.recordingRedaction) return;
          if (u.role === 'model' && u.final) {
            // The utterance's last part-frame is in its span.
            const last = this.transcoder.flush();
            if (last) this.play(last);
          }
          this.recordingRedaction.transcript(u);
        },
        committed: (turn) => {
          this.recordingRedaction?.committed(turn);
          this.scheduleProgress();
          this.deps.live?.transcript(this.call, this.redactor?.covers('webhooks') ? this.redactor.turn(turn) : turn);
        },
        toolCall: (_name, status) => {
          this.activity();
          if (status !== 'started') this.scheduleProgress();
        },
        agentEnded: () => this.agentEnded(),
        upstreamLost: (message) => this.upstreamLost(message),
      },
      this.log,
    );
    if (transferTool) {
      conversation.addBuiltin({
        declaration: transferTool,
        run: async (args) => {
          const chosen = chosenDestination(agent.transferDestinations, args);
          if ('error' in chosen) return { ok: false, result: null, error: chosen.error };
          const reason = typeof args.reason === 'string' && args.reason.trim() ? args.reason.trim() : null;
          return this.transfer(chosen.destination, reason);
        },
      });
    }
    conversation.addBuiltin({ declaration: sendDtmfDeclaration, run: (args) => this.sendDtmf(args) });
    if (optOut) conversation.addBuiltin({ declaration: optOut, run: () => this.optOut() });
    this.conversation = conversation;
    for (const frame of this.held.splice(0)) this.toModel(frame, null, false);
    for (const keys of this.heldKeys.splice(0)) this.keysToModel(keys);
    this.startTimers();
  }

  private startTimers(): void {
    // The stream may have ended while the conversation was being set up: no timers outlive the bridge.
    if (this.finished) return;
    const idle =
      this.settings.idle ??
      (this.opts.silenceTimeoutMs > 0 ? { idle_ms: this.opts.silenceTimeoutMs, reminders: [], max_reminders: 0, goodbye_message: null } : null);
    if (idle) {
      this.idle = new IdleLadder(idle, () => this.now(), { remind: (text, n) => this.remind(text, n), giveUp: (goodbye, n) => this.idleGiveUp(goodbye, n) });
      this.idle.start();
    }
    const answeredAt = this.call.answered_at ? new Date(this.call.answered_at).getTime() : this.now();
    const left = Math.max(0, answeredAt + maxDurationMs(this.settings, this.opts.maxDurationMs) - this.now());
    this.timers.push(setTimeout(() => void this.endCall('time_limit'), left));
  }

  /** Ends the call: its reservation of the workspace's credit or plan minutes ran out and could not be extended. */
  endForReservation(reason: 'insufficient_credit' | 'plan_limit_reached' | 'service_error'): void {
    if (!this.finished) void this.endCall(reason);
  }

  // Carrier -> model

  handleMessage(raw: Buffer, receivedAt: bigint): void {
    // Over its budget, a frame is dropped from what its first bytes say: a flood costs a scan a frame.
    const head = frameHead(raw);
    if (head?.event === 'media' && !this.audioBudget.fits(head.payloadBytes / 8)) return this.audioDropped(head.payloadBytes);
    if (head?.event === 'dtmf' && !this.keyBudget.fits(1)) return this.opts.onKeysDropped?.(1);
    const event = this.dialect.parse(raw.toString());
    if (!event) {
      this.log.debug('unusable media stream frame ignored');
      return;
    }
    this.onMediaEvent(event, receivedAt);
  }

  /**
   * Caller audio from an in-process stream (MediaSocket.onCallerAudio): the mu-law of one frame, taken
   * as a `media` frame with no sequence number would be, budget first.
   */
  handleCallerAudio(ulaw: Buffer, receivedAt: bigint): void {
    if (!ulaw.length) return;
    if (!this.audioBudget.fits(ulaw.length / 8)) return this.audioDropped(ulaw.length);
    this.callerAudio(ulaw, null, receivedAt);
  }

  private onMediaEvent(e: MediaEvent, receivedAt: bigint): void {
    switch (e.kind) {
      case 'media':
        this.callerAudio(e.payload, e.seq, receivedAt);
        return;
      case 'mark':
        this.markPlayed(e.name);
        return;
      case 'dtmf':
        if (!this.keyBudget.take(1)) return this.opts.onKeysDropped?.(1);
        this.activity(true);
        this.keypad.press(e.digit);
        return;
      case 'stop':
        this.stopReceived = true;
        void this.finish('stream_stopped');
        return;
      case 'error':
        this.log.warn({ message: e.message }, 'carrier reported a media stream error');
        return;
      default:
        return;
    }
  }

  private callerAudio(payload: Buffer, seq: number | null, receivedAt: bigint): void {
    if (seq === null || this.nextSeq === null) {
      if (seq !== null) this.nextSeq = seq + 1;
      this.toModel(payload, receivedAt);
      return;
    }
    if (seq < this.nextSeq) return;
    if (seq === this.nextSeq && this.reorder.size === 0) {
      // In order (nearly always): no buffering.
      this.nextSeq += 1;
      this.toModel(payload, receivedAt);
      return;
    }
    this.reorder.set(seq, payload);
    while (this.reorder.has(this.nextSeq) || this.reorder.size > REORDER_WINDOW) {
      if (!this.reorder.has(this.nextSeq)) this.nextSeq = Math.min(...this.reorder.keys());
      const frame = this.reorder.get(this.nextSeq)!;
      this.reorder.delete(this.nextSeq);
      this.nextSeq += 1;
      this.toModel(frame, receivedAt);
    }
  }

  /** `charge`: false for held frames, already taken from the budget when they arrived. */
  private toModel(ulaw: Buffer, receivedAt: bigint | null, charge = true): void {
    // 8 kHz mu-law: 8 bytes a millisecond. Beyond real time plus the burst: dropped before any work.
    if (charge && !this.audioBudget.take(ulaw.length / 8)) return this.audioDropped(ulaw.length);
    // Held frames were recorded when they arrived.
    if (charge) this.recorder?.person(ulaw);
    const pcm = this.transcoder.toModel(ulaw);
    const loud = rms(pcm) >= DEFAULT_SPEECH_RMS;
    if (loud) {
      this.activity(true);
      const t = performance.now();
      this.callerSpokeAt = t;
      this.callerTurnAt ??= t;
    }
    const conversation = this.conversation;
    if (!conversation) {
      if (this.held.length < this.openHoldFrames) this.held.push(ulaw);
      return;
    }
    // An answering machine's greeting is not a turn of the conversation.
    if (this.voicemail !== 'no' || conversation.ended || this.hangingUp) return;
    try {
      conversation.sendAudio(pcm);
      if (receivedAt !== null) this.opts.onForward?.(process.hrtime.bigint() - receivedAt);
      if (loud && receivedAt !== null && this.opts.onTurnTiming) this.lastLoud = { receivedAt, forwardedAt: process.hrtime.bigint() };
    } catch {
      // The voice session is reconnecting and its queue is full: this frame is lost, the call goes on.
    }
  }

  private audioDropped(ulawBytes: number): void {
    this.opts.onAudioDropped?.(ulawBytes / 8000);
  }

  /** A run of keys the person pressed: the model's input and a transcript entry. */
  private keysToModel(keys: string): void {
    const conversation = this.conversation;
    if (!conversation) {
      if (!this.finished) this.heldKeys.push(keys);
      return;
    }
    if (this.voicemail !== 'no' || conversation.ended || conversation.isFinished) return;
    try {
      conversation.sendKeys(keys);
    } catch {
      // The voice session is reconnecting and cannot take more: these keys are lost, the call goes on.
      this.log.warn('keys pressed by the caller could not be passed to the voice session');
    }
    this.scheduleProgress();
  }

  // Model -> carrier

  /** The `send_dtmf` tool: checks the keys, presses them through the carrier, records them in the transcript. */
  private async sendDtmf(args: Record<string, unknown>): Promise<{ ok: boolean; result: unknown; error: string | null }> {
    const parsed = dtmfArguments(args);
    if ('error' in parsed) return { ok: false, result: null, error: parsed.error };
    if (this.hangingUp || this.finished) return { ok: false, result: null, error: 'The call is ending; no keys were pressed.' };
    const keys = parsed.keys;
    const startedAt = this.now();
    this.activity();
    const carrier = this.deps.carrier;
    try {
      if (carrier.sendDtmf) await carrier.sendDtmf(this.deps.credentials(this.agent), this.call.call_sid ?? '', keys);
      else if (await this.playTones(keys)) {
        return { ok: false, result: null, error: 'The keys were cut off because the other side spoke; press them again if the menu still asks.' };
      }
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'send_dtmf failed at the carrier');
      return { ok: false, result: null, error: 'The keys could not be pressed; try again or carry on.' };
    }
    this.conversation?.recordAgentKeys(keys, startedAt);
    return { ok: true, result: `Pressed ${keys}.`, error: null };
  }

  /**
   * Plays `keys` as tones after the agent audio already queued, then a mark; resolves once the mark
   * comes back (true: a barge-in cleared them first) or, without it, after their length plus PLAYBACK_WAIT_MS.
   */
  private playTones(keys: string): Promise<boolean> {
    const last = this.transcoder.flush();
    if (last) this.sendMedia(last);
    const tones = dtmfTonesUlaw(keys);
    for (let at = 0; at < tones.length; at += FRAME_BYTES) {
      this.sendMedia(tones.subarray(at, at + FRAME_BYTES));
    }
    const name = `dtmf-${++this.dtmfSent}`;
    this.pendingMarks.add(name);
    return new Promise((resolve) => {
      const timer = setTimeout(() => settle(false), dtmfDurationMs(keys) + PLAYBACK_WAIT_MS);
      const settle = (interrupted: boolean) => {
        clearTimeout(timer);
        this.toneMarks.delete(name);
        resolve(interrupted);
      };
      this.toneMarks.set(name, { interrupted: false, done: settle });
      this.send(this.dialect.mark(this.streamId, name));
    });
  }

  /** Either side said or did something (`byPerson`: the person): the idle ladder waits again. */
  private activity(byPerson = false): void {
    this.idle?.activity(byPerson);
  }

  /** The idle ladder's reminder (not to an answering machine, nor once the call is ending). */
  private remind(text: string, count: number): void {
    const conversation = this.conversation;
    if (!conversation || conversation.ended || this.hangingUp || this.finished || this.voicemail !== 'no' || this.awaitingFinalTurn) return;
    this.log.info({ count }, 'idle: the agent reminds the person');
    try {
      conversation.remind(text, count);
    } catch {
      this.log.warn('idle reminder could not be passed to the voice session');
    }
  }

  /**
   * The idle ladder gave up: with the agent's settings the goodbye is said and the call hung up once it
   * has played (`idle_timeout`); the deployment's silence timeout hangs up at once (`silence_timeout`).
   */
  private idleGiveUp(goodbye: string | null, count: number): void {
    if (this.hangingUp || this.finished || this.awaitingFinalTurn) return;
    const reason: EndReason = this.settings.idle ? 'idle_timeout' : 'silence_timeout';
    this.log.info({ reason }, 'idle: ending the call');
    this.endReason ??= reason;
    let said = false;
    try {
      this.conversation?.idleHangup(goodbye, count);
      said = Boolean(goodbye && this.conversation);
    } catch {
      this.log.warn('idle goodbye could not be passed to the voice session');
    }
    if (said) this.endAfterNextTurn();
    else void this.endCall(reason);
  }

  private agentAudio(pcm24k: Buffer): void {
    this.activity();
    this.measureLatency();
    if (this.messageRequestedAt !== null) this.heardAfterMessage = true;
    this.recordingRedaction?.agentAudio();
    for (const frame of this.transcoder.toCaller(pcm24k)) this.play(frame);
  }

  private play(frame: Buffer): void {
    this.recorder?.agent(frame);
    this.sendMedia(frame);
    if (this.pendingTiming) {
      this.opts.onTurnTiming?.({ ...this.pendingTiming, sentAt: process.hrtime.bigint() });
      this.pendingTiming = null;
    }
  }

  /**
   * Turn latency: from the caller's last loud frame to the agent's first audio after it, for a caller
   * turn that began while the agent was silent (speech over the agent is a barge-in, not a turn).
   */
  private measureLatency(): void {
    const now = performance.now();
    if (this.callerTurnAt !== null && this.callerSpokeAt !== null && this.agentAudioAt < this.callerTurnAt) {
      this.conversation?.recordLatency(now - this.callerSpokeAt);
      if (this.lastLoud && this.opts.onTurnTiming) this.pendingTiming = { callId: this.call.id, ...this.lastLoud, voiceAudioAt: this.voiceAudioAt };
    }
    this.callerTurnAt = null;
    this.agentAudioAt = now;
  }

  private turnComplete(): void {
    const last = this.transcoder.flush();
    if (last) this.play(last);
    this.turn += 1;
    const name = `turn-${this.turn}`;
    if (this.firstMark === null) {
      // Its mark may never come back (a carrier that drops marks): the person is heard again regardless.
      this.timers.push(setTimeout(() => this.conversation?.firstMessagePlayed(), PLAYBACK_WAIT_MS));
    }
    this.firstMark ??= name;
    this.pendingMarks.add(name);
    this.send(this.dialect.mark(this.streamId, name));
    if (this.voicemail === 'leaving_message' && this.heardAfterMessage) this.afterPlayback('agent_hangup');
    if (this.awaitingFinalTurn) {
      this.awaitingFinalTurn = false;
      this.afterPlayback('agent_hangup');
    }
  }

  private interrupted(): void {
    this.transcoder.discard();
    this.recorder?.interrupted();
    this.recordingRedaction?.interrupted();
    this.send(this.dialect.clear(this.streamId));
    for (const waiter of this.toneMarks.values()) waiter.interrupted = true;
    if (this.pendingMarks.size) this.clearedSinceFirstMark = true;
  }

  private markPlayed(name: string): void {
    if (!this.pendingMarks.delete(name)) return;
    // What the agent said has been heard to its end: the silence after it starts now.
    this.activity();
    if (name === this.firstMark) this.conversation?.firstMessagePlayed();
    const tones = this.toneMarks.get(name);
    if (tones) tones.done(tones.interrupted);
    if (name === this.firstMark && !this.clearedSinceFirstMark) this.firstMarkPlayed = true;
    if (this.hangupAfterPlayback && this.pendingMarks.size === 0) void this.hangup();
  }

  /** Hangs up once what the agent said has been heard (its marks came back), or after PLAYBACK_WAIT_MS. */
  private afterPlayback(reason: EndReason): void {
    this.endReason ??= reason;
    this.hangupAfterPlayback = true;
    if (this.pendingMarks.size === 0) {
      void this.hangup();
      return;
    }
    this.timers.push(setTimeout(() => void this.hangup(), PLAYBACK_WAIT_MS));
  }

  /**
   * The `opt_out` tool: the person's number (the one called; on an inbound call, the caller's) goes on
   * the do-not-call list, the call records it, and the call ends after the agent's next turn (its
   * confirmation and goodbye) has played.
   */
  private async optOut(): Promise<{ ok: boolean; result: unknown; error: string | null }> {
    if (this.finished) return { ok: false, result: null, error: 'The call has ended.' };
    const call = this.call;
    const number = call.direction === 'inbound' ? call.from_number : call.to_number;
    try {
      await this.deps.doNotCall!.optOut(call.workspace_id, number, call.id);
      await this.deps.store.update(call.id, { opted_out_at: this.deps.clock.now() });
    } catch (err) {
      this.log.error({ err }, 'the person could not be put on the do-not-call list');
      return { ok: false, result: null, error: 'The number could not be put on the do-not-call list; tell the person it will be done and say goodbye.' };
    }
    this.log.info('person opted out; ending the call after the goodbye');
    this.endAfterNextTurn();
    return { ok: true, result: OPT_OUT_DONE, error: null };
  }

  private agentEnded(): void {
    this.log.info('agent ended the conversation');
    this.endAfterNextTurn();
  }

  /** Hangs up once the agent's next turn (its goodbye) has played, or after PLAYBACK_WAIT_MS without one. */
  private endAfterNextTurn(): void {
    // The goodbye's turn completes after end_conversation (or the opt-out tool's answer); hang up once it has played.
    this.endReason ??= 'agent_hangup';
    this.awaitingFinalTurn = true;
    this.timers.push(
      setTimeout(() => {
        if (!this.awaitingFinalTurn) return;
        this.awaitingFinalTurn = false;
        this.afterPlayback('agent_hangup');
      }, PLAYBACK_WAIT_MS),
    );
  }

  private upstreamLost(message: string): void {
    if (this.finished) return;
    this.log.warn({ message }, 'voice service lost; ending the call');
    this.conversation?.markFailed();
    void this.endCall('service_error');
  }

  /**
   * The `transfer_call` tool: one attempt, recorded in the call's `transfers` whatever comes of it
   * (the row first, so a stream that ends while the carrier is asked finds it), up to
   * `transferMaxAttempts` a call. The destination policy is applied again (it may have changed since
   * the agent was saved); then the carrier is asked to hand the call over (cold).
   */
  private transfer(destination: PhoneTransferDestination, reason: string | null): Promise<ToolAnswer> {
    if (this.finished || this.hangingUp) return Promise.resolve({ ok: false, result: null, error: 'The call is ending; it cannot be transferred.' });
    if (this.transferring) return Promise.resolve({ ok: false, result: null, error: 'A transfer is already under way; wait for it.' });
    if (this.transferAttempts >= this.opts.transferMaxAttempts)
      return Promise.resolve({ ok: false, result: null, error: 'No more transfers can be tried on this call; tell the caller and carry on.' });
    this.transferAttempts += 1;
    const attempt = this.transferAttempt(destination, reason, this.transferAttempts);
    this.transferring = attempt.finally(() => (this.transferring = null));
    return attempt;
  }

  private async transferAttempt(destination: PhoneTransferDestination, reason: string | null, seq: number): Promise<ToolAnswer> {
    const call = this.call;
    const to = destination.phone_number;
    const refused = await this.deps.destinations.transferRefusal(call.workspace_id, to).catch((err: Error) => ({ code: 'unavailable', message: err.message }));
    const start = {
      workspaceId: call.workspace_id,
      callId: call.id,
      seq,
      destination: destination.name,
      to,
      // Kept as the transcript is: redacted when the call's setting covers it.
      reason: reason !== null && this.redactor?.covers('transcript') ? this.redactor.text(reason) : reason,
      startedAt: this.deps.clock.now(),
    };
    const transfers = this.deps.store.transfers;
    if (refused?.code === 'unavailable') {
      this.log.warn({ reason: refused.message }, 'transfer not tried: the destination policy could not be read');
      return { ok: false, result: null, error: 'The transfer failed; tell the caller and carry on.' };
    }
    let transferId: string;
    try {
      transferId = await transfers.start(start, refused);
    } catch (err) {
      this.log.error({ err }, 'transfer not tried: its record could not be written');
      return { ok: false, result: null, error: 'The transfer failed; tell the caller and carry on.' };
    }
    const live = { transferId, destination: destination.name, to };
    if (refused) {
      this.log.warn({ transferId, code: refused.code, reason: refused.message }, 'transfer refused by the destination policy');
      this.deps.live?.transferFailed(call, live, 'refused');
      return { ok: false, result: null, error: 'The transfer is not allowed; tell the caller you cannot transfer them and carry on.' };
    }
    try {
      this.endReason = 'transferred';
      await this.deps.live?.transferring(call, live);
      await this.deps.carrier.transfer(this.deps.credentials(this.agent), call.call_sid ?? '', to);
      await transfers
        .settle(call.workspace_id, transferId, 'transferred', this.deps.clock.now())
        .catch((err: Error) => this.log.warn({ err, transferId }, 'transfer outcome not recorded; the finaliser settles it'));
      this.log.info({ transferId }, 'call transferred');
      return { ok: true, result: 'The call is being transferred.', error: null };
    } catch (err) {
      this.endReason = null;
      await transfers.settle(call.workspace_id, transferId, 'failed', this.deps.clock.now()).catch(() => undefined);
      this.deps.live?.transferFailed(call, live, 'failed');
      this.log.warn({ transferId, err: (err as Error).message }, 'transfer failed');
      return { ok: false, result: null, error: 'The transfer failed; tell the caller and carry on.' };
    }
  }

  // Signals (answering machine, the carrier's end of the call)

  onSignal(signal: CallSignal): void {
    if (this.finished) return;
    if (signal.kind === 'carrier_ended') {
      // The carrier closes the stream itself; if it does not, close it after a short wait.
      this.timers.push(setTimeout(() => this.ws.close(1000), STREAM_CLOSE_WAIT_MS));
      return;
    }
    if (signal.kind === 'amd') {
      if (signal.answeredBy !== 'machine' || this.voicemail !== 'no') return;
      this.log.info({ greetingEnded: signal.greetingEnded }, 'answering machine detected');
      this.voicemail = 'waiting_greeting';
      this.idle?.stop();
      this.interrupted();
      if (signal.greetingEnded) this.leaveMessage();
      else this.timers.push(setTimeout(() => this.leaveMessage(), 30_000));
      return;
    }
    if (signal.kind === 'greeting_ended' && this.voicemail === 'waiting_greeting') this.leaveMessage();
  }

  private leaveMessage(): void {
    if (this.voicemail !== 'waiting_greeting') return;
    const vm = this.agent.voicemailConfig;
    const message =
      vm?.enabled && vm.message
        ? fillPlaceholders(
            vm.message,
            conversationVariables(this.agent.variablePlaceholders, this.call.variables),
            filledFieldCaps()['voicemail_config.message'],
          )
        : null;
    if (!message || !this.conversation) {
      this.voicemail = 'done';
      void this.endCall('agent_hangup');
      return;
    }
    this.voicemail = 'leaving_message';
    this.messageRequestedAt = this.now();
    try {
      this.conversation.say(message);
    } catch {
      void this.endCall('agent_hangup');
      return;
    }
    this.timers.push(setTimeout(() => void this.endCall('agent_hangup'), PLAYBACK_WAIT_MS + message.length * 120));
  }

  // Ending

  private async endCall(reason: EndReason): Promise<void> {
    this.endReason ??= reason;
    await this.hangup();
  }

  private async hangup(): Promise<void> {
    if (this.hangingUp || this.finished) return;
    this.hangingUp = true;
    try {
      await this.deps.carrier.hangup(this.deps.credentials(this.agent), this.call.call_sid ?? '', { answered: true });
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'hang-up at the carrier failed; closing the stream');
    }
    this.timers.push(setTimeout(() => this.ws.close(1000), STREAM_CLOSE_WAIT_MS));
  }

  /**
   * The instance is stopping and its drain deadline has passed: hang up (the call is recorded, billed
   * and reported as ended by us, `shutdown`, never as if the callee had hung up). A call that is
   * already ending keeps its reason (the agent's goodbye, a transfer...).
   */
  endForShutdown(): void {
    if (this.finished) return;
    if (this.ws.readyState !== this.ws.OPEN) {
      this.endReason ??= 'shutdown';
      void this.finish('stream_closed');
      return;
    }
    void this.endCall('shutdown');
  }

  private scheduleProgress(): void {
    if (!this.finished) this.deps.progress.changed(this.call.id, this.readProgress);
  }

  private readonly readProgress = (): ProgressColumns | null => {
    const c = this.conversation;
    if (!c || this.finished) return null;
    const s = c.snapshot();
    return { ...progressColumns(s), first_message_delivered: s.firstMessageDelivered && this.firstMarkPlayed };
  };

  private async finish(why: 'stream_stopped' | 'stream_closed'): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    for (const t of this.timers) clearTimeout(t);
    this.idle?.stop();
    const endedAt = this.deps.clock.now();
    // Keys pressed just before the end are kept in the transcript.
    this.keypad.flush();
    for (const waiter of [...this.toneMarks.values()]) waiter.done(waiter.interrupted);
    try {
      // A transfer the carrier is being asked for settles first: its outcome decides the end reason.
      await this.transferring?.catch(() => undefined);
      await this.deps.progress.settle(this.call.id);
      const outcome = this.conversation ? await this.conversation.finish() : null;
      if (outcome?.status === 'failed') this.endReason ??= 'service_error';
      // The last second of audio is written before the call's record (and call.completed) is.
      await this.recorder?.close();
      if (why === 'stream_closed' && !this.stopReceived && !this.hangingUp) {
        // Our side of the stream went away without the carrier ending the call: end it there too.
        await this.deps.carrier.hangup(this.deps.credentials(this.agent), this.call.call_sid ?? '', { answered: true }).catch(() => undefined);
      }
      await this.deps.store.update(this.call.id, {
        media_ended_at: endedAt,
        ...(this.endReason ? { end_reason_hint: this.endReason } : {}),
        ...(outcome
          ? {
              transcript: outcome.transcript,
              transcript_truncated: outcome.transcriptTruncated,
              interruption_count: outcome.interruptionCount,
              latencies_ms: outcome.latenciesMs,
              tool_calls: outcome.toolCalls,
              first_message_delivered: outcome.firstMessageDelivered && this.firstMarkPlayed,
            }
          : {}),
      });
      // The conversation's queued live events are written before its status moves to ended.
      await this.deps.live?.flush();
      await this.deps.finaliser.finalise(this.call.id, { endedAt });
    } catch (err) {
      this.log.error({ err }, 'call bridge could not finish the call; its deadline will');
    } finally {
      this.resolveDone();
    }
  }
}
