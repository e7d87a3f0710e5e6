/**
 * One BidiGenerateContent connection of the sandbox voice service: reads `setup`, `realtimeInput`,
 * `clientContent` and `toolResponse`, detects spoken turns by energy, and answers through the rules of
 * model.ts with streamed audio, transcripts, tool calls, interruptions and resumption handles.
 * A spoken turn's audio (from a little before its onset, at most 60 s) is kept; at the end of the turn
 * it goes through decodeSpokenText (spoken-text.ts). Audio made from a text by encodeSpokenText (the
 * sandbox carrier's simulated caller) is a text turn: its input transcription is that text and the rules
 * apply to it as to typed text. Any other audio (real speech, or a turn longer than 60 s) is speech: the
 * transcription is the placeholder `[speech n.ns]`. Barge-in does not wait for the decoding.
 * The conversation state lives in a Conversation, kept under its resumption handle so a new connection
 * can take it over. The setup's `realtimeInputConfig` sets the turn detection and barge-in (turn-rules.ts).
 * A setup naming the model REFUSED_MODEL is refused as the Live API refuses a model it
 * does not serve: the socket closes with 1008 and the model's name.
 */
import { randomBytes } from 'node:crypto';
import type { WebSocket, RawData } from 'ws';
import { rms } from '../../audio/pcm16.js';
import { INPUT_BYTES_PER_MS, OUTPUT_AUDIO_MIME, type LiveClientMessage } from '../../voice/live-protocol.js';
import { END_CONVERSATION, afterResponse, decide, sayExactly, speechPlaceholder, type DeclaredFunction, type UserTurn } from './model.js';
import { FRAMES_B64, FRAME_MS } from './speech.js';
import { decodeSpokenText, spokenTextCutShort } from '../spoken-text.js';
import { turnRules, type TurnRules } from './turn-rules.js';

/** Audio of one spoken turn kept for decodeSpokenText; a longer turn is plain speech. */
const MAX_TURN_AUDIO_BYTES = 60_000 * INPUT_BYTES_PER_MS;
/** Quiet audio kept before a turn: the onset of an encoded text may lie in a frame too quiet to start it. */
const PRE_ROLL_BYTES = 100 * INPUT_BYTES_PER_MS;

export interface SandboxTiming {
  /** Silence (audio time, or wall time when audio stops outside an encoded text) that ends a spoken turn. */
  endOfTurnMs: number;
  /** Agent speech per reply character. */
  msPerChar: number;
  /** Playout speed of agent audio: 1 = real time. */
  speed: number;
  speechRms: number;
  /** Shorter bursts of energy are not a turn (and do not interrupt). */
  minSpeechMs: number;
}

export interface Conversation {
  instruction: string;
  functions: DeclaredFunction[];
  textMode: boolean;
  transcribeInput: boolean;
  transcribeOutput: boolean;
  resumable: boolean;
  lastUserText: string | null;
  calls: number;
  handle: string | null;
  /** The connection currently serving the conversation. */
  owner: object | null;
}

export interface ConversationRegistry {
  get(handle: string): Conversation | undefined;
  issue(conversation: Conversation): string;
  forget(conversation: Conversation): void;
}

export interface SetupRecord {
  model: string;
  resumedFrom: string | null;
}

/** The model id the sandbox refuses at setup (documented in the README): how a test meets a refused model. */
export const REFUSED_MODEL = 'sandbox-refused-model';

const AUDIO_FRAME_PREFIX = `{"serverContent":{"modelTurn":{"parts":[{"inlineData":{"mimeType":"${OUTPUT_AUDIO_MIME}","data":"`;
const AUDIO_FRAME_SUFFIX = '"}}]}}}';

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  const parts = (content as { parts?: Array<{ text?: unknown }> } | null)?.parts;
  return Array.isArray(parts) ? parts.map((p) => (typeof p?.text === 'string' ? p.text : '')).join('\n') : '';
}

function declaredFunctions(tools: unknown): DeclaredFunction[] {
  const out: DeclaredFunction[] = [];
  for (const tool of Array.isArray(tools) ? tools : []) {
    for (const fd of (tool as { functionDeclarations?: unknown[] })?.functionDeclarations ?? []) {
      const f = fd as { name?: unknown; description?: unknown; parametersJsonSchema?: unknown; parameters?: unknown };
      if (typeof f.name !== 'string') continue;
      const params = (f.parametersJsonSchema ?? f.parameters ?? null) as Record<string, unknown> | null;
      out.push({ name: f.name, description: typeof f.description === 'string' ? f.description : '', parameters: params });
    }
  }
  return out;
}

interface Stream {
  frames: number;
  sent: number;
  words: string[];
  wordsSent: number;
  startedAt: number;
  then: () => void;
}

export class SandboxConnection {
  private conversation: Conversation | null = null;
  private closed = false;
  private input = Buffer.alloc(64 * 1024);
  private inSpeech = false;
  private speechMs = 0;
  private silenceMs = 0;
  private bargedIn = false;
  /** The current spoken turn's audio (copies), or the quiet audio before one. */
  private turnAudio: Buffer[] = [];
  private turnBytes = 0;
  /** The turn outgrew MAX_TURN_AUDIO_BYTES: its audio is dropped and it is plain speech. */
  private turnOverflow = false;
  private endOfTurnTimer: NodeJS.Timeout | null = null;
  private stream: Stream | null = null;
  private streamTimer: NodeJS.Timeout | null = null;
  private pendingCall: { id: string; name: string } | null = null;
  private frameCursor = 0;
  /** The setup's turn detection and interruption rules (turn-rules.ts). */
  private rules: TurnRules;

  constructor(
    private readonly ws: WebSocket,
    private readonly timing: SandboxTiming,
    private readonly registry: ConversationRegistry,
    private readonly onSetup: (record: SetupRecord) => void,
    /** Counts the input audio received, ms (the service's audio budget is tested by it). */
    private readonly onAudioMs: (ms: number) => void = () => undefined,
    /** Counts the text inputs (typed messages, keys) and images received (the service's budgets are tested by them). */
    private readonly onInput: (kind: 'text' | 'image') => void = () => undefined,
  ) {
    this.rules = turnRules(timing, undefined);
    ws.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    ws.on('close', (code) => this.onClose(code));
    ws.on('error', () => {});
  }

  /** Announces the end of this connection; the server closes it after `timeLeftMs`. */
  goAway(timeLeftMs: number): void {
    this.sendJson({ goAway: { timeLeft: `${(timeLeftMs / 1000).toFixed(3)}s` } });
    setTimeout(() => this.ws.close(1001, 'going away'), timeLeftMs).unref();
  }

  private sendJson(message: unknown): void {
    this.sendRaw(JSON.stringify(message));
  }

  /** The Live service sends its JSON in binary frames; so does the sandbox. */
  private sendRaw(json: string): void {
    if (this.closed || this.ws.readyState !== this.ws.OPEN) return;
    this.ws.send(json, { binary: true });
  }

  private fail(code: number, reason: string): void {
    this.ws.close(code, reason);
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    let msg: LiveClientMessage;
    try {
      msg = JSON.parse(isBinary || typeof data !== 'string' ? data.toString() : data) as LiveClientMessage;
    } catch {
      return this.fail(1007, 'Request contains an invalid argument: not JSON');
    }
    if (!this.conversation) {
      if (!msg.setup) return this.fail(1007, 'Request contains an invalid argument: the first message must be setup');
      return this.onSetupMessage(msg.setup);
    }
    if (msg.realtimeInput) {
      const ri = msg.realtimeInput;
      if (ri.audio) {
        if (!ri.audio.mimeType?.startsWith('audio/pcm')) return this.fail(1007, 'Unsupported audio mime type');
        this.onAudio(ri.audio.data ?? '');
      }
      if (ri.video) this.onInput('image');
      if (ri.audioStreamEnd && this.inSpeech) this.endSpeechTurn();
      if (typeof ri.text === 'string' && ri.text.trim()) {
        this.onInput('text');
        this.onUserTurn({ kind: 'text', text: ri.text });
      }
      return;
    }
    if (msg.clientContent) {
      const text = (msg.clientContent.turns ?? [])
        .filter((t) => t.role !== 'model')
        .map(textOf)
        .join('\n')
        .trim();
      if (!msg.clientContent.turnComplete || !text) return;
      // While a function runs, a line to say (a filler) is spoken without cancelling the call.
      const aside = this.pendingCall ? sayExactly(text) : null;
      if (aside !== null) this.speakNext(aside);
      else this.onUserTurn({ kind: 'text', text });
      return;
    }
    if (msg.toolResponse) {
      for (const r of msg.toolResponse.functionResponses ?? []) this.onToolResponse(r.id, r.response);
    }
  }

  private onSetupMessage(setup: NonNullable<LiveClientMessage['setup']>): void {
    const model = (setup.model ?? '').replace(/^models\//, '');
    if (model === REFUSED_MODEL) return this.fail(1008, `models/${model} is not found for API version v1beta, or is not supported for bidiGenerateContent.`);
    if (setup.realtimeInputConfig?.automaticActivityDetection?.disabled) {
      return this.fail(1007, 'Request contains an invalid argument: the sandbox does not support client-signalled activity');
    }
    this.rules = turnRules(this.timing, setup.realtimeInputConfig);
    const handle = setup.sessionResumption?.handle ?? null;
    let conversation: Conversation;
    if (handle) {
      const found = this.registry.get(handle);
      if (!found) return this.fail(1008, 'Session resumption handle not found');
      conversation = found;
    } else {
      const modalities = (setup.generationConfig?.responseModalities ?? ['AUDIO']).map(String);
      conversation = {
        instruction: textOf(setup.systemInstruction),
        functions: declaredFunctions(setup.tools),
        textMode: modalities.includes('TEXT') && !modalities.includes('AUDIO'),
        transcribeInput: setup.inputAudioTranscription !== undefined,
        transcribeOutput: setup.outputAudioTranscription !== undefined,
        resumable: setup.sessionResumption !== undefined,
        lastUserText: null,
        calls: 0,
        handle: null,
        owner: null,
      };
    }
    conversation.owner = this;
    this.conversation = conversation;
    this.onSetup({ model: setup.model ?? '', resumedFrom: handle });
    this.sendJson({ setupComplete: {} });
    this.sendResumptionUpdate();
  }

  private sendResumptionUpdate(): void {
    const c = this.conversation;
    if (!c?.resumable) return;
    this.sendJson({ sessionResumptionUpdate: { newHandle: this.registry.issue(c), resumable: true } });
  }

  private onAudio(b64: string): void {
    if (this.input.length < b64.length) this.input = Buffer.alloc(b64.length);
    const len = this.input.write(b64, 'base64');
    const frame = this.input.subarray(0, len & ~1);
    const ms = frame.length / INPUT_BYTES_PER_MS;
    this.onAudioMs(ms);
    if (rms(frame) >= this.rules.speechRms) {
      if (!this.inSpeech) {
        this.inSpeech = true;
        this.speechMs = 0;
        this.silenceMs = 0;
        this.bargedIn = false;
        this.turnOverflow = false;
      }
      this.keepTurnAudio(frame);
      this.speechMs += this.silenceMs + ms;
      this.silenceMs = 0;
      if (!this.bargedIn && this.speechMs >= this.rules.minSpeechMs) {
        this.bargedIn = true;
        if (this.rules.interrupts) this.interrupt();
      }
      this.armEndOfTurn();
    } else if (this.inSpeech) {
      this.keepTurnAudio(frame);
      this.silenceMs += ms;
      if (this.silenceMs >= this.rules.endOfTurnMs) this.endSpeechTurn();
      else this.armEndOfTurn();
    } else {
      this.keepPreRoll(frame);
    }
  }

  private keepTurnAudio(frame: Buffer): void {
    if (this.turnOverflow) return;
    if (this.turnBytes + frame.length > MAX_TURN_AUDIO_BYTES) {
      this.turnOverflow = true;
      this.turnAudio = [];
      this.turnBytes = 0;
      return;
    }
    this.turnAudio.push(Buffer.from(frame));
    this.turnBytes += frame.length;
  }

  private keepPreRoll(frame: Buffer): void {
    this.turnAudio.push(Buffer.from(frame));
    this.turnBytes += frame.length;
    while (this.turnBytes - this.turnAudio[0].length >= PRE_ROLL_BYTES) this.turnBytes -= this.turnAudio.shift()!.length;
  }

  private armEndOfTurn(): void {
    if (this.endOfTurnTimer) this.endOfTurnTimer.refresh();
    else this.endOfTurnTimer = setTimeout(() => this.audioStopped(), this.rules.endOfTurnMs);
  }

  /**
   * No audio for endOfTurnMs of wall time ends the turn, unless it stopped inside an encoded text:
   * the sandbox carrier's caller never stops mid-sentence, so the audio is late (a busy machine), not
   * over; the turn ends on its audio's silence or audioStreamEnd instead.
   */
  private audioStopped(): void {
    this.endOfTurnTimer = null;
    if (!this.inSpeech) return;
    if (!this.turnOverflow && spokenTextCutShort(Buffer.concat(this.turnAudio, this.turnBytes), 16_000)) return;
    this.endSpeechTurn();
  }

  private endSpeechTurn(): void {
    if (this.endOfTurnTimer) clearTimeout(this.endOfTurnTimer);
    this.endOfTurnTimer = null;
    if (!this.inSpeech) return;
    this.inSpeech = false;
    const audio = this.turnOverflow ? null : Buffer.concat(this.turnAudio, this.turnBytes);
    this.turnAudio = [];
    this.turnBytes = 0;
    if (this.speechMs < this.rules.minSpeechMs) return;
    const text = audio ? decodeSpokenText(audio, 16_000) : null;
    if (text !== null) this.onUserTurn({ kind: 'text', text }, text);
    else this.onUserTurn({ kind: 'speech', seconds: this.speechMs / 1000 }, speechPlaceholder(this.speechMs / 1000));
  }

  /** Barge-in: the reply being spoken stops, a pending function call is cancelled. */
  private interrupt(): void {
    if (this.stream) {
      this.stopStream();
      this.sendJson({ serverContent: { interrupted: true } });
      this.sendJson({ serverContent: { turnComplete: true } });
    }
    if (this.pendingCall) {
      this.sendJson({ toolCallCancellation: { ids: [this.pendingCall.id] } });
      this.pendingCall = null;
    }
  }

  /** `transcript`: what the service heard of a spoken turn (a typed turn has none). */
  private onUserTurn(turn: UserTurn, transcript: string | null = null): void {
    const c = this.conversation!;
    const speaking = this.stream;
    if (!this.rules.interrupts && speaking) {
      // NO_INTERRUPTION: the reply being spoken is finished first; this turn is answered after it
      // (after any turn deferred before it: each waits for the reply then being spoken).
      if (transcript !== null && c.transcribeInput) this.sendJson({ serverContent: { inputTranscription: { text: transcript, finished: true } } });
      const then = speaking.then;
      speaking.then = () => {
        then();
        this.onUserTurn(turn);
      };
      return;
    }
    this.interrupt();
    if (transcript !== null && c.transcribeInput) {
      this.sendJson({ serverContent: { inputTranscription: { text: transcript, finished: true } } });
    }
    this.answer(turn);
  }

  private answer(turn: UserTurn): void {
    const c = this.conversation!;
    const previousUserText = c.lastUserText;
    c.lastUserText = turn.kind === 'text' ? turn.text.trim() : speechPlaceholder(turn.seconds);
    const action = decide({ instruction: c.instruction, functions: c.functions, turn, previousUserText });
    if (action.kind === 'say') this.speak(action.text, () => this.finishTurn());
    else if (action.kind === 'farewell') {
      this.speak(action.text, () => (action.endConversation ? this.call(END_CONVERSATION, {}) : this.finishTurn()));
    } else this.call(action.name, action.args);
  }

  private call(name: string, args: Record<string, unknown>): void {
    const c = this.conversation!;
    const id = `call_${++c.calls}_${randomBytes(3).toString('hex')}`;
    this.pendingCall = { id, name };
    this.sendJson({ toolCall: { functionCalls: [{ id, name, args }] } });
  }

  private onToolResponse(id: string | undefined, response: unknown): void {
    const pending = this.pendingCall;
    if (!pending || pending.id !== id) return;
    this.pendingCall = null;
    if (pending.name === END_CONVERSATION) this.finishTurn();
    else this.speakNext(afterResponse(pending.name, response));
  }

  /** Speaks a whole turn after the one being spoken, if any. */
  private speakNext(text: string): void {
    const current = this.stream;
    if (!current) return this.speak(text, () => this.finishTurn());
    const then = current.then;
    current.then = () => {
      then();
      this.speak(text, () => this.finishTurn());
    };
  }

  private finishTurn(): void {
    this.sendJson({ serverContent: { generationComplete: true } });
    this.sendJson({ serverContent: { turnComplete: true } });
    this.sendResumptionUpdate();
  }

  private speak(text: string, then: () => void): void {
    const c = this.conversation!;
    if (c.textMode) {
      this.sendJson({ serverContent: { modelTurn: { role: 'model', parts: [{ text }] } } });
      return then();
    }
    const frames = Math.max(5, Math.round((text.length * this.timing.msPerChar) / FRAME_MS));
    this.stream = { frames, sent: 0, words: text.split(/(?<=\s)/), wordsSent: 0, startedAt: Date.now(), then };
    this.tick();
    if (this.stream) this.streamTimer = setInterval(() => this.tick(), FRAME_MS);
  }

  private tick(): void {
    const s = this.stream;
    if (!s) return;
    const due = Math.min(s.frames, Math.floor(((Date.now() - s.startedAt) * this.timing.speed) / FRAME_MS) + 1);
    while (s.sent < due) {
      this.sendRaw(AUDIO_FRAME_PREFIX + FRAMES_B64[this.frameCursor] + AUDIO_FRAME_SUFFIX);
      this.frameCursor = (this.frameCursor + 1) % FRAMES_B64.length;
      s.sent++;
    }
    const wordsDue = Math.ceil((s.words.length * s.sent) / s.frames);
    if (wordsDue > s.wordsSent) {
      if (this.conversation!.transcribeOutput) {
        this.sendJson({ serverContent: { outputTranscription: { text: s.words.slice(s.wordsSent, wordsDue).join('') } } });
      }
      s.wordsSent = wordsDue;
    }
    if (s.sent >= s.frames) {
      this.stopStream();
      s.then();
    }
  }

  private stopStream(): void {
    if (this.streamTimer) clearInterval(this.streamTimer);
    this.streamTimer = null;
    this.stream = null;
  }

  private onClose(code: number): void {
    this.closed = true;
    this.stopStream();
    if (this.endOfTurnTimer) clearTimeout(this.endOfTurnTimer);
    // A conversation the client ended normally cannot be resumed; one cut off (goAway, drop) can.
    if (code === 1000 && this.conversation?.owner === this) this.registry.forget(this.conversation);
  }
}
