/**
 * One live session: client frames -> the voice-service session, its events -> server messages
 * (asyncapi/schemas/Realtime*.yaml), tool calls through the ToolRunner, and what the conversation
 * record needs (transcript, interruptions, reply latency, tool calls).
 */
import type { WebSocket } from 'ws';
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import type { ToolCallRequest, ToolDeclaration, TranscriptTurn, VoiceEvent, VoiceSession } from '../voice/types.js';
import { parseFrame, TEXT_SESSION_CODES, type ServerErrorCode } from './frames.js';
import type { Source } from './store.js';

export interface ToolCallOutcome {
  ok: boolean;
  result: unknown;
  error: string | null;
  durationMs: number;
  source: 'http' | 'mcp' | 'knowledge' | 'builtin';
}

/** The ToolRunner of src/tools/runner.ts as a session uses it. */
export interface SessionToolRunner {
  declarations(workspaceId: string, agentId: string): Promise<ToolDeclaration[]>;
  call(workspaceId: string, agentId: string, name: string, args: Record<string, unknown>, opts: { timeoutMs: number }): Promise<ToolCallOutcome>;
}

export interface ToolCallRecord {
  name: string;
  source: ToolCallOutcome['source'];
  arguments: Record<string, unknown>;
  result: unknown;
  ok: boolean;
  error: string | null;
  duration_ms: number;
  started_at: number;
}

export interface SessionInfo {
  id: string;
  workspaceId: string;
  agentId: string;
  userId: string;
  source: Source;
  startedAt: Date;
  firstMessage: string | null;
  variables: Record<string, string>;
}

/** What a finished session hands to the conversation record. */
export interface SessionOutcome {
  status: 'completed' | 'failed';
  endedAt: Date;
  transcript: TranscriptTurn[];
  interruptionCount: number;
  latenciesMs: number[];
  toolCalls: ToolCallRecord[];
  firstMessageDelivered: boolean;
}

export interface BridgeOptions {
  noAudioAfterMs: number;
  toolTimeoutMs: number;
  /** A tool call still running after this long makes the agent say FILLER, once per round of calls. */
  toolFillerMs: number;
  /** Called with the time from a frame's receipt to its hand-over to the voice session (benchmarks). */
  onForward?: (nanoseconds: bigint) => void;
}

const RESULT_LIMIT = 4096;
const APOLOGY = "Sorry, I couldn't read that message. Could you send it again?";
export const FILLER = 'One moment while I look that up.';

/** ToolCallRecord.result: JSON longer than 4,096 bytes becomes its text cut at a UTF-8 boundary + marker. */
export function boundedResult(result: unknown): unknown {
  const json = JSON.stringify(result ?? null);
  if (Buffer.byteLength(json) <= RESULT_LIMIT) return result ?? null;
  let cut = Buffer.from(json).subarray(0, RESULT_LIMIT).toString('utf8');
  if (cut.endsWith('\uFFFD')) cut = cut.slice(0, -1);
  return `${cut}…[truncated]`;
}

export class SessionBridge {
  private readonly isText: boolean;
  private readonly transcript: TranscriptTurn[] = [];
  private readonly latenciesMs: number[] = [];
  private readonly toolCalls: ToolCallRecord[] = [];
  private interruptionCount = 0;
  private firstMessageDelivered = false;
  private firstTurnDone = false;
  private userUtteranceAt: number | null = null;
  private modelUtterance: { at: number; text: string } | null = null;
  /** When the user's last turn ended, until the agent's first audio/text of the reply. */
  /** performance.now() when the user's turn ended: reply latency is a duration, measured below a millisecond. */
  private awaitingReplySince: number | null = null;
  private firstImageAt: number | null = null;
  private audioReceived = false;
  private noAudioSent = false;
  private ended = false;
  private finished = false;
  private failed = false;
  private readonly cancelledToolIds = new Set<string>();
  private resolveDone!: (o: SessionOutcome) => void;
  /** Resolves once when the socket has closed, with what the conversation record needs. */
  readonly done = new Promise<SessionOutcome>((r) => (this.resolveDone = r));

  constructor(
    private readonly ws: WebSocket,
    private readonly voice: VoiceSession,
    readonly info: SessionInfo,
    private readonly tools: SessionToolRunner | null,
    private readonly clock: Clock,
    private readonly opts: BridgeOptions,
    private readonly log: Logger,
  ) {
    this.isText = info.source === 'text';
    voice.onEvent((e) => this.onVoiceEvent(e));
    ws.on('close', () => void this.finish());
  }

  private nowMs(): number {
    return this.clock.now().getTime();
  }

  private send(message: Record<string, unknown>): void {
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
      user_id: this.info.userId,
      source: this.info.source,
      audio_format: this.isText ? null : { encoding: 'pcm16le', sample_rate: 24000, channels: 1 },
    });
  }

  /** The agent's apology for a message it could not take (text sessions carry no other error codes). */
  private apologise(): void {
    this.send({ type: 'text', text: APOLOGY });
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
    const frame = parseFrame(raw, isBinary);
    if (!frame.ok) {
      if (!this.isText) this.sendError(frame.code, frame.error);
      else if (frame.code === 'invalid_json') this.apologise();
      else if (TEXT_SESSION_CODES.has(frame.code)) this.sendError(frame.code, frame.error);
      return;
    }
    if (this.ended) return;
    if (this.isText && frame.mimeType !== 'text/plain') return;
    try {
      switch (frame.mimeType) {
        case 'audio/pcm':
          this.audioReceived = true;
          this.voice.sendAudio(frame.bytes);
          break;
        case 'image/jpeg':
          this.checkAudioPresence();
          this.voice.sendImage(frame.bytes);
          break;
        case 'text/plain':
          // The voice session reports the typed turn back as the user's final input_transcript.
          this.voice.sendText(frame.bytes.toString('utf8'));
          break;
      }
      this.opts.onForward?.(process.hrtime.bigint() - receivedAt);
    } catch (err) {
      this.log.warn({ err, sessionId: this.info.id }, 'frame could not be forwarded');
      this.notForwarded();
    }
  }

  /** `no_audio_received`: once, on an image at least noAudioAfterMs after the first image, with no audio yet. */
  private checkAudioPresence(): void {
    const now = this.nowMs();
    if (this.firstImageAt === null) {
      this.firstImageAt = now;
      return;
    }
    if (!this.audioReceived && !this.noAudioSent && now - this.firstImageAt >= this.opts.noAudioAfterMs) {
      this.noAudioSent = true;
      this.sendError('no_audio_received', 'Images are arriving but no audio has been received; is the microphone muted?');
    }
  }

  private replyStarted(): void {
    if (this.awaitingReplySince !== null) {
      this.latenciesMs.push(Math.max(0, performance.now() - this.awaitingReplySince));
      this.awaitingReplySince = null;
    }
  }

  private closeModelUtterance(): void {
    const u = this.modelUtterance;
    this.modelUtterance = null;
    if (!u || !u.text) return;
    this.transcript.push({ role: 'model', text: u.text, timestamp: u.at / 1000 });
    if (!this.isText) this.send({ type: 'transcript', role: 'model', text: u.text, final: true, timestamp: u.at / 1000 });
  }

  private onVoiceEvent(e: VoiceEvent): void {
    if (this.finished) return;
    switch (e.type) {
      case 'audio':
        if (this.isText) return;
        this.replyStarted();
        this.modelUtterance ??= { at: this.nowMs(), text: '' };
        this.send({ type: 'audio', mime_type: 'audio/pcm;rate=24000', data: e.pcm.toString('base64') });
        return;
      case 'output_transcript':
        if (this.isText) return;
        this.modelUtterance ??= { at: this.nowMs(), text: '' };
        this.modelUtterance.text = e.text;
        this.send({ type: 'transcript', role: 'model', text: e.text, final: false, timestamp: this.modelUtterance.at / 1000 });
        return;
      case 'input_transcript': {
        this.userUtteranceAt ??= this.nowMs();
        const at = this.userUtteranceAt;
        if (!this.isText) this.send({ type: 'transcript', role: 'user', text: e.text, final: e.final, timestamp: at / 1000 });
        if (e.final) {
          if (e.text) this.transcript.push({ role: 'user', text: e.text, timestamp: at / 1000 });
          this.userUtteranceAt = null;
          this.awaitingReplySince = performance.now();
        }
        return;
      }
      case 'text':
        if (!this.isText) return;
        this.replyStarted();
        this.modelUtterance ??= { at: this.nowMs(), text: '' };
        this.modelUtterance.text += e.text;
        this.send({ type: 'text', text: e.text });
        return;
      case 'turn_complete':
        this.closeModelUtterance();
        if (!this.firstTurnDone) {
          this.firstTurnDone = true;
          this.firstMessageDelivered = Boolean(this.info.firstMessage);
        }
        this.send({ type: 'turn_complete' });
        return;
      case 'interrupted':
        this.interruptionCount += 1;
        this.closeModelUtterance();
        this.firstTurnDone = true;
        this.send({ type: 'interrupted' });
        return;
      case 'tool_call':
        void this.runTools(e.calls);
        return;
      case 'tool_call_cancellation':
        for (const id of e.ids) this.cancelledToolIds.add(id);
        return;
      case 'end_conversation':
        if (this.isText || this.ended) return;
        this.closeModelUtterance();
        this.ended = true;
        this.send({ type: 'session_ended', reason: 'agent_ended' });
        return;
      case 'unavailable':
      case 'closed':
        this.upstreamLost(e.type === 'unavailable' ? e.message : 'voice session closed');
        return;
    }
  }

  private upstreamLost(message: string): void {
    if (this.finished || this.ws.readyState !== this.ws.OPEN) return;
    this.log.warn({ sessionId: this.info.id, message }, 'voice service unavailable; closing session with 1011');
    this.failed = true;
    // Text sessions emit no error codes but binary_frame_unsupported and missing_data: they just close.
    if (!this.isText) this.sendError('upstream_unavailable', 'The voice service is unavailable; the session ends.');
    this.ws.close(1011);
  }

  private async runTools(calls: ToolCallRequest[]): Promise<void> {
    // A slow tool leaves the caller in silence: the agent says a filler line, as its own turn (say()
    // leaves the pending tool call open, unlike a user text turn, which would cancel it).
    const filler = setTimeout(() => {
      if (this.finished || this.ended) return;
      try {
        this.voice.say(FILLER);
      } catch (err) {
        this.log.warn({ err, sessionId: this.info.id }, 'filler could not be sent');
      }
    }, this.opts.toolFillerMs);
    const responses = await Promise.all(
      calls.map(async (call) => {
        const startedAt = this.nowMs();
        this.send({ type: 'tool_call', name: call.name, status: 'started' });
        const outcome: ToolCallOutcome = this.tools
          ? await this.tools.call(this.info.workspaceId, this.info.agentId, call.name, call.args ?? {}, { timeoutMs: this.opts.toolTimeoutMs })
          : { ok: false, result: null, error: `Unknown tool '${call.name}'.`, durationMs: 0, source: 'builtin' };
        this.toolCalls.push({
          name: call.name,
          source: outcome.source,
          arguments: call.args ?? {},
          result: boundedResult(outcome.result),
          ok: outcome.ok,
          error: outcome.ok ? null : (outcome.error ?? 'failed'),
          duration_ms: Math.max(0, Math.round(outcome.durationMs)),
          started_at: startedAt / 1000,
        });
        this.send({ type: 'tool_call', name: call.name, status: outcome.ok ? 'completed' : 'failed' });
        return { id: call.id, name: call.name, response: outcome.ok ? { result: outcome.result ?? null } : { error: outcome.error ?? 'failed' } };
      }),
    );
    clearTimeout(filler);
    const live = responses.filter((r) => !this.cancelledToolIds.has(r.id));
    if (live.length && !this.finished) {
      try {
        this.voice.sendToolResponses(live);
      } catch (err) {
        this.log.warn({ err, sessionId: this.info.id }, 'tool responses could not be sent');
      }
    }
  }

  /** Closes the client socket from the server side (shutdown), which then finishes the session. */
  close(code: number, reason: string): void {
    if (this.ws.readyState === this.ws.OPEN || this.ws.readyState === this.ws.CONNECTING) this.ws.close(code, reason);
    else void this.finish();
  }

  private async finish(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    this.closeModelUtterance();
    const endedAt = this.clock.now();
    await this.voice.close().catch((err) => this.log.warn({ err, sessionId: this.info.id }, 'voice session close failed'));
    this.resolveDone({
      status: this.failed ? 'failed' : 'completed',
      endedAt,
      transcript: [...this.transcript].sort((a, b) => a.timestamp - b.timestamp),
      interruptionCount: this.interruptionCount,
      latenciesMs: this.latenciesMs,
      toolCalls: this.toolCalls,
      firstMessageDelivered: this.firstMessageDelivered,
    });
  }
}
