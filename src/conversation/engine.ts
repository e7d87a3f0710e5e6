/**
 * One live conversation with the voice service, whatever carries it (a browser WebSocket or a phone
 * call's media stream): the voice-event loop, tool runs with the spoken filler, the transcript,
 * interruptions, reply latency and first-message delivery. The transport feeds it user input and
 * renders what it reports through ConversationEvents in its own framing; `finish()` gives what the
 * record and `call.completed` need.
 */
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import type { ToolCallRequest, ToolDeclaration, TranscriptTurn, VoiceEvent, VoiceSession } from '../voice/types.js';
import type { ToolCallOutcome, ToolScope } from './tool-runner.js';
import type { RuntimeLinks } from '../agents/service.js';
import type { ToolCallRecord } from '../../generated/asyncapi-types.js';
import type { Redactor } from '../redaction/redactor.js';
import type { Interruptions } from '../voice/conversation-settings.js';
import { DEFAULT_SPEECH_RMS, rms } from '../audio/pcm16.js';

/** The ToolRunner (tool-runner.ts) as a conversation uses it. */
export interface ConversationTools {
  declarations(scope: ToolScope): Promise<ToolDeclaration[]>;
  call(scope: ToolScope, name: string, args: Record<string, unknown>, opts: { timeoutMs: number }): Promise<ToolCallOutcome>;
}

/** A tool the transport itself provides (a phone call's transfer), run instead of the ToolRunner. */
export interface BuiltinTool {
  declaration: ToolDeclaration;
  run(args: Record<string, unknown>): Promise<{ ok: boolean; result: unknown; error: string | null }>;
}

/** One tool call as the record and the webhook event carry it (the AsyncAPI `ToolCallRecord`). */
export type { ToolCallRecord };

/**
 * Where a conversation's live events go (src/events/writer.ts writes them for the conversation's
 * event stream): transcript partials and finals, tool calls and results, interruptions, keys.
 */
export interface LiveEventSink {
  emit(type: 'transcript' | 'tool_call' | 'tool_result' | 'interrupted' | 'dtmf' | 'idle', data: Record<string, unknown>): void;
}

export interface ConversationInfo {
  id: string;
  workspaceId: string;
  agentId: string;
  /** What the version the conversation runs links: its tools, documents and MCP servers (fixed for the conversation). */
  links: RuntimeLinks;
  /** What the agent says first (placeholders filled); null: the agent waits for the user to speak first. */
  firstMessage: string | null;
  /** Text sessions: replies are text, audio and end_conversation are ignored. */
  textMode: boolean;
  /**
   * The transport measures reply latency itself (recordLatency), from the audio it carries, instead of
   * from the end of the user's transcript (a phone call knows when the caller stopped speaking).
   */
  externalLatency?: boolean;
  /** The conversation's live events (its event stream); none when not given. */
  live?: LiveEventSink | null;
  /**
   * The conversation's redaction setting: with `transcript` the transcript and tool-call records kept
   * (and snapshot) are redacted, with `live_events` what goes to `live`. What the transport is told
   * (`committed`, `transcript`) and what the model gets stay as said.
   */
  redaction?: Redactor | null;
  /**
   * The conversation's `interruptions` setting. With `after_first_message` the person's audio is sent
   * as silence while the first message plays, and on to their first pause after it (the voice
   * service's barge-in stays on for later turns).
   */
  interruptions?: Interruptions;
  /**
   * The transport tells when the first message has been heard (firstMessagePlayed()); otherwise it
   * counts as played when its turn completes.
   */
  playoutTracked?: boolean;
}

/** What a finished conversation hands to its record. */
export interface ConversationOutcome {
  status: 'completed' | 'failed';
  endedAt: Date;
  transcript: TranscriptTurn[];
  interruptionCount: number;
  latenciesMs: number[];
  toolCalls: ToolCallRecord[];
  firstMessageDelivered: boolean;
  /** The record's size limit was reached: later transcript entries and tool-call records were not kept. */
  transcriptTruncated: boolean;
}

export interface TranscriptUpdate {
  role: 'model' | 'user';
  text: string;
  final: boolean;
  /** Unix seconds when the utterance began. */
  timestamp: number;
}

/** What the conversation reports; the transport renders each in its own framing. All optional. */
export interface ConversationEvents {
  /** Agent speech, PCM16 LE mono 24 kHz (not in text mode). */
  agentAudio?(pcm24k: Buffer): void;
  /** Agent reply text (text mode only). */
  agentText?(text: string): void;
  /** A transcript update; `final` model entries are the ones the transcript keeps. */
  transcript?(update: TranscriptUpdate): void;
  /** An entry was added to the transcript (for transports that persist as they go). */
  committed?(turn: TranscriptTurn): void;
  turnComplete?(): void;
  /** The person spoke over the agent: queued agent audio must be dropped. */
  interrupted?(): void;
  toolCall?(name: string, status: 'started' | 'completed' | 'failed'): void;
  /** The agent ended the conversation (end_conversation; not in text mode). */
  agentEnded?(): void;
  /** The voice service was lost for good (after its own retries). */
  upstreamLost?(message: string): void;
}

export interface ConversationOptions {
  toolTimeoutMs: number;
  /** A tool call still running after this long makes the agent say FILLER, once per round of calls. */
  toolFillerMs: number;
  /** JSON bytes of transcript entries and tool-call records the record keeps (CONVERSATION_RECORD_MAX_BYTES). */
  recordMaxBytes: number;
}

const RESULT_LIMIT = 4096;
export const FILLER = 'One moment while I look that up.';

/** ToolCallRecord.result: JSON longer than 4,096 bytes becomes its text cut at a UTF-8 boundary + marker. */
export function boundedResult(result: unknown): ToolCallRecord['result'] {
  const json = JSON.stringify(result ?? null);
  // A tool's result arrived as JSON (an HTTP body, an MCP result), so it is a JSON value.
  if (Buffer.byteLength(json) <= RESULT_LIMIT) return (result ?? null) as ToolCallRecord['result'];
  let cut = Buffer.from(json).subarray(0, RESULT_LIMIT).toString('utf8');
  if (cut.endsWith('\uFFFD')) cut = cut.slice(0, -1);
  return `${cut}…[truncated]`;
}

/** A live event's data with what was said in it redacted. */
function redactedEvent(r: Redactor, type: Parameters<LiveEventSink['emit']>[0], data: Record<string, unknown>): Record<string, unknown> {
  switch (type) {
    case 'transcript':
      return r.turn(data as { text: string; dtmf?: string });
    case 'dtmf':
      return { ...data, keys: r.text(String(data.keys)) };
    case 'tool_call':
    case 'tool_result':
      return r.toolCall(data);
    case 'interrupted':
    case 'idle':
      return data;
  }
}

/** The pause (16 kHz PCM16 bytes: 200 ms) that ends what the person began saying during a first message they may not interrupt. */
const TAIL_PAUSE_BYTES = 200 * 32;

/** Silence of `bytes` PCM16 bytes (shared: never written to). */
let zeros = Buffer.alloc(0);
function silence(bytes: number): Buffer {
  if (zeros.length < bytes) zeros = Buffer.alloc(bytes);
  return zeros.subarray(0, bytes);
}

export class Conversation {
  private readonly transcript: TranscriptTurn[] = [];
  private readonly latenciesMs: number[] = [];
  private readonly toolCalls: ToolCallRecord[] = [];
  private readonly builtins = new Map<string, BuiltinTool>();
  private interruptionCount = 0;
  private recordBytes = 0;
  private truncated = false;
  private firstMessageDelivered = false;
  private firstTurnDone = false;
  private userUtteranceAt: number | null = null;
  private modelUtterance: { at: number; text: string } | null = null;
  /** performance.now() when the user's turn ended: reply latency is a duration, measured below a millisecond. */
  private awaitingReplySince: number | null = null;
  private agentEnded = false;
  private finished = false;
  private failed = false;
  private readonly cancelledToolIds = new Set<string>();
  private finishing: Promise<ConversationOutcome> | undefined;
  /**
   * `after_first_message`: the person's audio goes to the voice service as silence while the first
   * message plays (`first`), then until their first pause after it (`tail`: what they began saying
   * during it is not heard in part), then as it is (`off`).
   */
  private hold: 'first' | 'tail' | 'off';
  /** Quiet audio since the person last spoke, bytes (while `tail`). */
  private quietBytes = 0;

  constructor(
    private readonly voice: VoiceSession,
    readonly info: ConversationInfo,
    private readonly tools: ConversationTools | null,
    private readonly clock: Clock,
    private readonly opts: ConversationOptions,
    private readonly events: ConversationEvents,
    private readonly log: Logger,
  ) {
    this.hold = info.interruptions === 'after_first_message' && info.firstMessage && !info.textMode ? 'first' : 'off';
    voice.onEvent((e) => this.onVoiceEvent(e));
  }

  /** Tools of the transport (declared to the voice service by whoever opened it). */
  addBuiltin(tool: BuiltinTool): void {
    this.builtins.set(tool.declaration.name, tool);
  }

  /** True once the agent ended the conversation: user input is no longer passed on. */
  get ended(): boolean {
    return this.agentEnded;
  }

  get isFinished(): boolean {
    return this.finished;
  }

  /** The transport gave up on the conversation (its outcome is `failed`). */
  markFailed(): void {
    this.failed = true;
  }

  private live(type: Parameters<LiveEventSink['emit']>[0], data: Record<string, unknown>): void {
    if (!this.info.live) return;
    const r = this.info.redaction;
    if (r?.covers('live_events')) {
      // A partial may hold part of what its final will redact (a number still being spoken).
      if (type === 'transcript' && data.final === false) return;
      data = redactedEvent(r, type, data);
    }
    try {
      this.info.live.emit(type, data);
    } catch (err) {
      this.log.warn({ err, conversationId: this.info.id, type }, 'live event not recorded');
    }
  }

  private nowMs(): number {
    return this.clock.now().getTime();
  }

  // User input; each throws when the voice session cannot take it (the transport says forward_failed).
  sendAudio(pcm16k: Buffer): void {
    // Silence keeps the stream's timing (the voice service hears a pause, not a gap) without a turn in it.
    this.voice.sendAudio(this.hold !== 'off' && this.held(pcm16k) ? silence(pcm16k.length) : pcm16k);
  }

  private held(pcm16k: Buffer): boolean {
    if (this.hold === 'first') return true;
    if (rms(pcm16k) >= DEFAULT_SPEECH_RMS) {
      this.quietBytes = 0;
      return true;
    }
    this.quietBytes += pcm16k.length;
    if (this.quietBytes >= TAIL_PAUSE_BYTES) this.hold = 'off';
    return this.hold !== 'off';
  }

  /** The first message has been heard to its end: the person's audio goes through from their next pause. */
  firstMessagePlayed(): void {
    if (this.hold === 'first') this.hold = 'tail';
  }

  /** The idle ladder's reminder: a live `idle` event, and the agent says it. Throws like say(). */
  remind(text: string, count: number): void {
    this.live('idle', { action: 'reminder', count, text });
    this.voice.say(text);
  }

  /** The idle ladder gave up: a live `idle` event, and the agent says its goodbye (if any). Throws like say(). */
  idleHangup(goodbye: string | null, count: number): void {
    this.live('idle', { action: 'hangup', count, text: goodbye });
    if (goodbye) this.voice.say(goodbye);
  }

  sendImage(jpeg: Buffer): void {
    this.voice.sendImage(jpeg);
  }

  /** A typed user turn; the voice session reports it back as the user's final input transcript. */
  sendText(text: string): void {
    this.voice.sendText(text);
  }

  /**
   * Keys the person pressed on the phone keypad: a `user` transcript entry marked `dtmf`, and the
   * model's input. Throws like sendText when the voice session cannot take it.
   */
  sendKeys(keys: string): void {
    const timestamp = this.nowMs() / 1000;
    this.voice.sendKeys(keys);
    this.commit({ role: 'user', text: keys, dtmf: keys, timestamp });
    this.live('dtmf', { role: 'user', keys, timestamp });
    this.live('transcript', { role: 'user', text: keys, final: true, dtmf: keys, timestamp });
  }

  /** Keys the agent pressed (its `send_dtmf` tool): a `model` transcript entry marked `dtmf`. */
  recordAgentKeys(keys: string, startedAtMs: number): void {
    if (this.finished) return;
    const timestamp = startedAtMs / 1000;
    this.commit({ role: 'model', text: keys, dtmf: keys, timestamp });
    this.live('dtmf', { role: 'model', keys, timestamp });
    this.live('transcript', { role: 'model', text: keys, final: true, dtmf: keys, timestamp });
  }

  /** Has the agent say a line as its own turn (a filler, a voicemail message). */
  say(text: string): void {
    this.voice.say(text);
  }

  /** A reply latency measured by the transport (with `externalLatency`). */
  recordLatency(ms: number): void {
    if (!this.finished) this.latenciesMs.push(Math.max(0, ms));
  }

  private replyStarted(): void {
    if (this.info.externalLatency) return;
    if (this.awaitingReplySince !== null) {
      this.latenciesMs.push(Math.max(0, performance.now() - this.awaitingReplySince));
      this.awaitingReplySince = null;
    }
  }

  /** Takes `entry`'s size from the record's budget; false (and the record marked truncated) once it is spent. */
  private fits(entry: unknown): boolean {
    if (this.truncated) return false;
    const bytes = Buffer.byteLength(JSON.stringify(entry));
    if (this.recordBytes + bytes > this.opts.recordMaxBytes) {
      this.truncated = true;
      this.log.warn(
        { conversationId: this.info.id, limit: this.opts.recordMaxBytes },
        'conversation record reached its size limit; later entries are not kept',
      );
      return false;
    }
    this.recordBytes += bytes;
    return true;
  }

  private commit(turn: TranscriptTurn): void {
    const kept = this.info.redaction?.covers('transcript') ? this.info.redaction.turn(turn) : turn;
    if (!this.fits(kept)) return;
    this.transcript.push(kept);
    this.events.committed?.(turn);
  }

  private closeModelUtterance(): void {
    const u = this.modelUtterance;
    this.modelUtterance = null;
    if (!u || !u.text) return;
    const timestamp = u.at / 1000;
    this.commit({ role: 'model', text: u.text, timestamp });
    this.live('transcript', { role: 'model', text: u.text, final: true, timestamp });
    this.events.transcript?.({ role: 'model', text: u.text, final: true, timestamp });
  }

  private onVoiceEvent(e: VoiceEvent): void {
    if (this.finished) return;
    const textMode = this.info.textMode;
    switch (e.type) {
      case 'audio':
        if (textMode) return;
        this.replyStarted();
        this.modelUtterance ??= { at: this.nowMs(), text: '' };
        this.events.agentAudio?.(e.pcm);
        return;
      case 'output_transcript':
        if (textMode) return;
        this.modelUtterance ??= { at: this.nowMs(), text: '' };
        this.modelUtterance.text = e.text;
        this.live('transcript', { role: 'model', text: e.text, final: false, timestamp: this.modelUtterance.at / 1000 });
        this.events.transcript?.({ role: 'model', text: e.text, final: false, timestamp: this.modelUtterance.at / 1000 });
        return;
      case 'input_transcript': {
        this.userUtteranceAt ??= this.nowMs();
        const timestamp = this.userUtteranceAt / 1000;
        this.events.transcript?.({ role: 'user', text: e.text, final: e.final, timestamp });
        if (e.text || !e.final) this.live('transcript', { role: 'user', text: e.text, final: e.final, timestamp });
        if (e.final) {
          if (e.text) this.commit({ role: 'user', text: e.text, timestamp });
          this.userUtteranceAt = null;
          this.awaitingReplySince = performance.now();
        }
        return;
      }
      case 'text':
        if (!textMode) return;
        this.replyStarted();
        this.modelUtterance ??= { at: this.nowMs(), text: '' };
        this.modelUtterance.text += e.text;
        this.live('transcript', { role: 'model', text: this.modelUtterance.text, final: false, timestamp: this.modelUtterance.at / 1000 });
        this.events.agentText?.(e.text);
        return;
      case 'turn_complete':
        this.closeModelUtterance();
        if (!this.firstTurnDone) {
          this.firstTurnDone = true;
          this.firstMessageDelivered = Boolean(this.info.firstMessage);
          if (!this.info.playoutTracked) this.firstMessagePlayed();
        }
        this.events.turnComplete?.();
        return;
      case 'interrupted':
        this.interruptionCount += 1;
        this.closeModelUtterance();
        this.firstTurnDone = true;
        this.hold = 'off';
        this.live('interrupted', {});
        this.events.interrupted?.();
        return;
      case 'tool_call':
        void this.runTools(e.calls);
        return;
      case 'tool_call_cancellation':
        for (const id of e.ids) this.cancelledToolIds.add(id);
        return;
      case 'end_conversation':
        if (textMode || this.agentEnded) return;
        this.closeModelUtterance();
        this.agentEnded = true;
        this.events.agentEnded?.();
        return;
      case 'unavailable':
      case 'closed':
        this.events.upstreamLost?.(e.type === 'unavailable' ? e.message : 'voice session closed');
        return;
    }
  }

  private async runOne(call: ToolCallRequest): Promise<ToolCallOutcome> {
    const builtin = this.builtins.get(call.name);
    if (builtin) {
      const started = performance.now();
      try {
        const r = await builtin.run(call.args ?? {});
        return { ...r, durationMs: performance.now() - started, source: 'builtin' };
      } catch (err) {
        this.log.warn({ err, tool: call.name }, 'built-in tool failed');
        return { ok: false, result: null, error: `The tool '${call.name}' failed.`, durationMs: performance.now() - started, source: 'builtin' };
      }
    }
    if (!this.tools) return { ok: false, result: null, error: `Unknown tool '${call.name}'.`, durationMs: 0, source: 'builtin' };
    const { workspaceId, agentId, links } = this.info;
    return this.tools.call({ workspaceId, agentId, links }, call.name, call.args ?? {}, { timeoutMs: this.opts.toolTimeoutMs });
  }

  private async runTools(calls: ToolCallRequest[]): Promise<void> {
    // A slow tool leaves the person in silence: the agent says a filler line, as its own turn (say()
    // leaves the pending tool call open, unlike a user text turn, which would cancel it).
    const filler = setTimeout(() => {
      if (this.finished || this.agentEnded) return;
      try {
        this.voice.say(FILLER);
      } catch (err) {
        this.log.warn({ err, conversationId: this.info.id }, 'filler could not be sent');
      }
    }, this.opts.toolFillerMs);
    const responses = await Promise.all(
      calls.map(async (call) => {
        const startedAt = this.nowMs();
        this.events.toolCall?.(call.name, 'started');
        this.live('tool_call', { name: call.name, arguments: call.args ?? {}, timestamp: startedAt / 1000 });
        const outcome = await this.runOne(call);
        const record: ToolCallRecord = {
          name: call.name,
          source: outcome.source,
          arguments: call.args ?? {},
          result: boundedResult(outcome.result),
          ok: outcome.ok,
          error: outcome.ok ? null : (outcome.error ?? 'failed'),
          duration_ms: Math.max(0, Math.round(outcome.durationMs)),
          started_at: startedAt / 1000,
        };
        const kept = this.info.redaction?.covers('transcript') ? this.info.redaction.toolCall(record) : record;
        if (this.fits(kept)) this.toolCalls.push(kept);
        this.live('tool_result', { name: record.name, ok: record.ok, result: record.result, error: record.error, duration_ms: record.duration_ms });
        this.events.toolCall?.(call.name, outcome.ok ? 'completed' : 'failed');
        return { id: call.id, name: call.name, response: outcome.ok ? { result: outcome.result ?? null } : { error: outcome.error ?? 'failed' } };
      }),
    );
    clearTimeout(filler);
    const live = responses.filter((r) => !this.cancelledToolIds.has(r.id));
    if (live.length && !this.finished) {
      try {
        this.voice.sendToolResponses(live);
      } catch (err) {
        this.log.warn({ err, conversationId: this.info.id }, 'tool responses could not be sent');
      }
    }
  }

  /** What the conversation has gathered so far (for transports that persist a live conversation). */
  snapshot(): Omit<ConversationOutcome, 'endedAt' | 'status'> {
    return {
      transcript: [...this.transcript].sort((a, b) => a.timestamp - b.timestamp),
      interruptionCount: this.interruptionCount,
      latenciesMs: [...this.latenciesMs],
      toolCalls: [...this.toolCalls],
      firstMessageDelivered: this.firstMessageDelivered,
      transcriptTruncated: this.truncated,
    };
  }

  /** Ends the conversation (closes the voice session) once; later calls give the same outcome. */
  finish(): Promise<ConversationOutcome> {
    this.finishing ??= (async () => {
      this.finished = true;
      this.closeModelUtterance();
      const endedAt = this.clock.now();
      await this.voice.close().catch((err) => this.log.warn({ err, conversationId: this.info.id }, 'voice session close failed'));
      return { status: this.failed ? ('failed' as const) : ('completed' as const), endedAt, ...this.snapshot() };
    })();
    return this.finishing;
  }
}
