/**
 * One simulated call, carrier-neutral: ringing and its outcome, the answered line with its callee, the
 * media stream, the time limit, transfer and the end. The carrier (provider-a-call.ts,
 * provider-b-call.ts) turns these moments into its callbacks through CarrierHooks.
 */
import type { Logger } from 'pino';
import type { Clock } from './clock.js';
import { CallOver, runMenu, runPerson, runVoicemail, type CalleeScript } from './callee.js';
import { Line, type CalleeMedia } from './line.js';
import { MediaStream } from './media.js';
import type { Framing } from './frames.js';
import { ulawMs } from './audio.js';
import { FRAME_MS } from './clock.js';
import type { CallRecords, HangupBy, SandboxCallRecord } from './records.js';

/** Why a call ended, carrier-neutral (each carrier names it its own way). */
export type EndReason = 'completed' | 'busy' | 'no_answer' | 'failed' | 'canceled' | 'rejected' | 'time_limit';

export interface CallEnd {
  reason: EndReason;
  by: HangupBy;
  /** provider-specific precision, e.g. the reject reason `busy`. */
  detail?: string;
}

export type StreamEnd = 'service' | 'carrier' | 'failed';

export interface CarrierHooks {
  initiated?(): void;
  ringing?(): void;
  answered?(): void;
  /** An answering machine's beep has played. */
  beep?(): void;
  dtmf?(digit: string): void;
  streamStarted?(stream: MediaStream): void;
  streamEnded?(how: StreamEnd, stream: MediaStream): void;
  /** The call is over; the carrier sets `endStatus` and sends its final callbacks. */
  ended(end: CallEnd): void;
}

export interface CallContext {
  clock: Clock;
  log: Logger;
  records: CallRecords;
  reorderMedia(): boolean;
  /** Called once the call is over (the server forgets it). */
  finished(call: SimCall): void;
}

export interface CallPlan {
  /** What the callee does: a person (script), a phone menu before a person (script), an answering machine, busy, or no answer. */
  callee: 'person' | 'menu' | 'voicemail' | 'busy' | 'no_answer';
  script: CalleeScript;
  ringMs: number;
  /** The dial request's ring timeout. */
  ringTimeoutMs: number;
  /** The no-answer wait of a `no_answer` callee (min of the ring timeout and the noAnswerMs option). */
  noAnswerMs: number;
  timeLimitMs: number;
}

const QUEUED_MS = 100;
const INITIATED_TO_RINGING_MS = 200;
/** A transferred call completes this long after the transfer. */
const TRANSFER_COMPLETES_MS = 1000;
/** Silence after each key the carrier plays by command (provider_b `send_dtmf`). */
const COMMAND_KEY_GAP_MS = 100;
const PAUSES_MS: Record<string, number> = { w: 500, W: 1000 };

export interface OpenStreamInput {
  url: string;
  framing: Framing;
  refusesAudio?: string | null;
}

export class SimCall {
  hooks: CarrierHooks = { ended: () => undefined };
  readonly log: Logger;
  private readonly abort = new AbortController();
  private line: Line | null = null;
  private stream: MediaStream | null = null;
  /** Media the carrier carries itself (SIP's RTP) instead of opening streams. */
  private carried: CalleeMedia | null = null;
  private streamDone: ((how: StreamEnd, notify: boolean) => void) | null = null;
  private voicemailRecordedBytes = 0;
  private keysPlaying: Promise<void> = Promise.resolve();

  constructor(
    readonly record: SandboxCallRecord,
    private readonly ctx: CallContext,
    readonly plan: CallPlan,
  ) {
    this.log = ctx.log.child({ provider: record.provider, call: record.callSid });
    ctx.records.add(record);
  }

  /** Aborted when the call ends. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  get over(): boolean {
    return this.record.state === 'completed';
  }

  get answered(): boolean {
    return this.record.answeredAt !== null;
  }

  changed(): void {
    this.ctx.records.changed(this.record);
  }

  sleep(simMs: number): Promise<boolean> {
    return this.ctx.clock.sleep(simMs, this.signal);
  }

  /**
   * Resolves true after `simMs` of the answered call's media (frames of its line), false if the call
   * ends first. What races the callee (answering-machine detection against the greeting) waits on this
   * clock, the callee's own, so its outcome is the same however late frames come on a busy machine.
   */
  sleepFrames(simMs: number): Promise<boolean> {
    const line = this.line;
    if (!line) return this.sleep(simMs);
    return line
      .until(() => false, Math.ceil(simMs / FRAME_MS))
      .then(
        () => true,
        () => false,
      );
  }

  /** An outbound call from the dial request on: queued, initiated, ringing, then the callee's outcome. */
  async dial(): Promise<void> {
    if (!(await this.sleep(QUEUED_MS))) return;
    this.hooks.initiated?.();
    if (!(await this.sleep(INITIATED_TO_RINGING_MS))) return;
    this.setState('ringing');
    this.hooks.ringing?.();
    const { callee, ringMs, ringTimeoutMs, noAnswerMs } = this.plan;
    if (callee === 'no_answer') {
      if (await this.sleep(noAnswerMs)) this.end({ reason: 'no_answer', by: 'carrier' });
      return;
    }
    if (ringTimeoutMs <= ringMs) {
      if (await this.sleep(ringTimeoutMs)) this.end({ reason: 'no_answer', by: 'carrier' });
      return;
    }
    if (!(await this.sleep(ringMs))) return;
    if (callee === 'busy') this.end({ reason: 'busy', by: 'callee' });
    else this.answer();
  }

  /** An inbound call rings the service; the caller gives up after `giveUpMs` unanswered. */
  async ringInbound(giveUpMs: number): Promise<void> {
    this.setState('ringing');
    if ((await this.sleep(giveUpMs)) && !this.answered) this.end({ reason: 'canceled', by: 'callee' });
  }

  /** The call is answered: the callee's line opens and the carrier takes over. */
  answer(): void {
    if (this.over || this.answered) return;
    this.record.answeredAt = Date.now();
    this.setState('in_progress');
    const line = new Line(this.ctx.clock, {
      said: (text) => {
        this.record.spoken.push(text);
        this.changed();
      },
      dtmf: (digit) => {
        this.media?.sendDtmf(digit);
        this.record.dtmfSent += digit;
        this.hooks.dtmf?.(digit);
        this.changed();
      },
      heard: (key) => {
        this.record.dtmfReceived += key;
        this.changed();
      },
      hangup: () => this.end({ reason: 'completed', by: 'callee' }),
      clip: (label) => {
        this.record.clips.push({ label, streamMs: (this.media?.framesSent ?? 0) * FRAME_MS });
      },
      played: (bytes) => {
        this.record.agentPlayedMs += ulawMs(bytes);
      },
    });
    line.stream = this.media;
    this.line = line;
    const callee =
      this.plan.callee === 'voicemail'
        ? runVoicemail(
            line,
            () => this.hooks.beep?.(),
            (bytes) => {
              this.voicemailRecordedBytes += bytes;
              this.record.agentAudioAfterBeepMs = ulawMs(this.voicemailRecordedBytes);
            },
          )
        : this.plan.callee === 'menu'
          ? runMenu(line, this.plan.script)
          : runPerson(line, this.plan.script);
    callee.catch((err) => {
      if (!(err instanceof CallOver)) this.log.error({ err }, 'sandbox callee failed');
    });
    void this.sleep(this.plan.timeLimitMs).then((due) => due && this.end({ reason: 'time_limit', by: 'carrier' }));
    this.hooks.answered?.();
  }

  /** What the callee talks and listens through now: the open stream, or the media the carrier carries. */
  private get media(): CalleeMedia | null {
    return this.stream ?? this.carried;
  }

  /** The carrier carries the call's media itself (SIP's RTP): the callee talks and listens through it once answered. */
  carry(media: CalleeMedia): void {
    this.carried = media;
    if (this.line && !this.stream) this.line.stream = media;
  }

  /** A key the carrier delivered on its own (an RFC 4733 event) reaches the callee. */
  hear(key: string): void {
    this.line?.hear(key);
  }

  /**
   * Opens a media stream (the carrier is the WebSocket client). Resolves when it ends: closed by the
   * service, stopped by the carrier, or failed to open.
   */
  openStream(input: OpenStreamInput): Promise<StreamEnd> {
    if (this.over) return Promise.resolve('carrier');
    this.stopStream();
    this.record.streamUrl = input.url;
    return new Promise((resolve) => {
      let stream: MediaStream;
      const finish = (how: StreamEnd, notify: boolean) => {
        if (this.stream === stream) {
          this.stream = null;
          this.streamDone = null;
          if (this.line) this.line.stream = this.carried;
        }
        if (notify) this.hooks.streamEnded?.(how, stream);
        resolve(how);
      };
      stream = new MediaStream({
        url: input.url,
        framing: input.framing,
        record: this.record,
        log: this.log,
        reorder: () => this.ctx.reorderMedia(),
        refusesAudio: input.refusesAudio ?? null,
        events: {
          opened: () => this.hooks.streamStarted?.(stream),
          failed: () => finish('failed', true),
          closedByService: () => finish('service', true),
          changed: () => this.changed(),
        },
      });
      this.stream = stream;
      this.streamDone = finish;
      if (this.line) this.line.stream = stream;
    });
  }

  /** The carrier ends the current stream (`stop`, socket closed); one still connecting is dropped quietly. */
  stopStream(): void {
    const stream = this.stream;
    const done = this.streamDone;
    if (!stream || !done) return;
    const started = stream.started;
    stream.stop();
    done('carrier', started);
  }

  /**
   * The carrier plays keys into the call by command (provider_b `send_dtmf`): each key for `toneMs`
   * then 100 ms of silence, `w` 500 ms and `W` 1 s of pause; commands play one after another.
   */
  playKeys(keys: string, toneMs: number): void {
    this.keysPlaying = this.keysPlaying.then(async () => {
      for (const k of keys) {
        const pause = PAUSES_MS[k];
        if (!(await this.sleep(pause ?? toneMs))) return;
        if (pause !== undefined) continue;
        this.line?.hear(k);
        if (!(await this.sleep(COMMAND_KEY_GAP_MS))) return;
      }
    });
  }

  /** The callee is connected elsewhere: the stream stops and the call completes a little later. */
  transfer(to: string): void {
    if (this.over) return;
    this.record.transferredTo = to;
    this.stopStream();
    this.line?.close();
    this.changed();
    void this.sleep(TRANSFER_COMPLETES_MS).then((due) => due && this.end({ reason: 'completed', by: 'callee' }));
  }

  end(end: CallEnd): void {
    if (this.over) return;
    const r = this.record;
    r.state = 'completed';
    r.endedAt = Date.now();
    r.hangupBy = end.by;
    if (end.reason === 'no_answer') r.outcome = 'no_answer';
    else if (end.reason === 'failed') r.outcome = 'failed';
    else if (end.reason === 'rejected') r.outcome = 'rejected';
    else if (end.reason === 'canceled' && !this.answered) r.outcome = 'canceled';
    else if (end.reason === 'busy') r.outcome = 'busy';
    this.abort.abort();
    this.line?.close();
    this.hooks.ended(end);
    this.stopStream();
    this.log.debug({ reason: end.reason, by: end.by, outcome: r.outcome }, 'sandbox call ended');
    this.changed();
    this.ctx.finished(this);
  }

  /** The carrier shuts down: everything stops, no callbacks. */
  shutdown(): void {
    if (!this.over) {
      this.record.state = 'completed';
      this.record.endedAt = Date.now();
      this.record.hangupBy = 'carrier';
      this.abort.abort();
    }
    this.line?.close();
    this.stream?.terminate();
  }

  private setState(state: SandboxCallRecord['state']): void {
    this.record.state = state;
    this.changed();
  }
}
