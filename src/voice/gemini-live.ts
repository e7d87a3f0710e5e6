/**
 * The Gemini Live adapter: VoiceService/VoiceSession over the BidiGenerateContent WebSocket protocol.
 *
 * It speaks the raw protocol with `ws` rather than `@google/genai`'s `live.connect`, because that call
 * (2.x) cannot be bounded: it awaits the socket's open event without a timeout or rejection (a refused
 * connection leaves it pending forever), always puts `?key=` in the URL even without a key, and converts
 * every outgoing frame through its generic request transformers. The message shapes are the SDK's own
 * types (live-protocol.ts), so they stay checked against it.
 *
 * Reconnection: on `goAway` (and on any unexpected close) the session reconnects with the latest
 * `sessionResumptionUpdate` handle, retrying with exponential backoff up to VOICE_RETRY_MAX times; after
 * that it emits one `unavailable` event, then `closed`. While reconnecting, outgoing messages wait in a
 * bounded queue: beyond it the oldest audio/image is dropped (stale media is worth least), and a message
 * that finds none to displace is refused with VoiceForwardError, as is anything sent after the session
 * ended; callers tell their client the message was not passed on (forward_failed). Text and tool responses sent since the
 * latest handle are sent again after resuming, since a cut connection may have swallowed them.
 *
 * Transcripts: the service sends transcription deltas; the adapter emits the whole utterance so far.
 * The service does not transcribe text input, so sendText() itself emits the user's final input_transcript.
 */
import WebSocket, { type RawData } from 'ws';
import type { Logger } from 'pino';
import type { ActivityHandling, EndSensitivity, Modality, RealtimeInputConfig, StartSensitivity } from '@google/genai';
import { analyzeWithModel, restOrigin } from './analysis.js';
import { INPUT_AUDIO_MIME, bidiUrl, loggableUrl, type LiveClientMessage, type LiveServerMessage } from './live-protocol.js';
import {
  VoiceModelRefusedError,
  type ToolCallRequest,
  type ToolCallResponse,
  type VoiceEvent,
  type VoiceService,
  type VoiceSession,
  type VoiceSessionConfig,
} from './types.js';
import type { ConversationSettings } from './conversation-settings.js';

export const END_CONVERSATION_TOOL = 'end_conversation';

/** A message the session could not take (ended, or the reconnect queue is full); safe to send again later. */
export class VoiceForwardError extends Error {}

/** How the Live API refuses a model it does not have or that cannot stream: 1008 "models/... is not found ... or is not supported". */
const MODEL_REFUSED = (code: number, reason: string) => code === 1008 && /\bmodels?\b/i.test(reason);

export interface GeminiLiveOptions {
  /** ws:// or wss:// endpoint (a bare host gets the standard path). */
  url: string;
  apiKey?: string;
  model: string;
  analysisModel: string;
  connectTimeoutMs: number;
  retryMax: number;
  retryBaseMs: number;
  retryMaxDelayMs: number;
  /** Messages held while reconnecting (see send()). */
  reconnectQueueLimit?: number;
  log: Logger;
}

/** Default of GeminiLiveOptions.reconnectQueueLimit. */
const OUTBOX_LIMIT = 500;
/** Text and tool responses sent since the last resumption handle, replayed after a resumption. */
const REPLAY_LIMIT = 50;
/** More than VOICE_RETRY_MAX + 1 reconnections within this window count as unavailable. */
const FLAP_WINDOW_MS = 60_000;

/**
 * The setup's `realtimeInputConfig` for the agent's conversation settings: turn detection as automatic
 * activity detection, `never` interruptions as NO_INTERRUPTION (`after_first_message` interrupts; the
 * conversation holds the person's audio back while the first message plays, src/conversation/engine.ts).
 * Only what is set is sent, so the rest keeps the voice service's defaults; undefined: nothing set.
 */
export function realtimeInputConfig(settings: ConversationSettings | null | undefined): RealtimeInputConfig | undefined {
  if (!settings) return undefined;
  const t = settings.turn_detection;
  const detection = {
    ...(t?.start_sensitivity ? { startOfSpeechSensitivity: START_SENSITIVITY[t.start_sensitivity] as StartSensitivity } : {}),
    ...(t?.end_sensitivity ? { endOfSpeechSensitivity: END_SENSITIVITY[t.end_sensitivity] as EndSensitivity } : {}),
    ...(t?.prefix_padding_ms != null ? { prefixPaddingMs: t.prefix_padding_ms } : {}),
    ...(t?.silence_ms != null ? { silenceDurationMs: t.silence_ms } : {}),
  };
  const config: RealtimeInputConfig = {
    ...(Object.keys(detection).length ? { automaticActivityDetection: detection } : {}),
    ...(settings.interruptions === 'always' ? {} : { activityHandling: ACTIVITY_HANDLING[settings.interruptions] as ActivityHandling }),
  };
  return Object.keys(config).length ? config : undefined;
}

// The SDK's enum values as strings (the SDK stays a type-only import); `${Enum}` keeps them checked against it.
const START_SENSITIVITY = { low: 'START_SENSITIVITY_LOW', high: 'START_SENSITIVITY_HIGH' } as const satisfies Record<string, `${StartSensitivity}`>;
const END_SENSITIVITY = { low: 'END_SENSITIVITY_LOW', high: 'END_SENSITIVITY_HIGH' } as const satisfies Record<string, `${EndSensitivity}`>;
const ACTIVITY_HANDLING = {
  never: 'NO_INTERRUPTION',
  after_first_message: 'START_OF_ACTIVITY_INTERRUPTS',
} as const satisfies Record<string, `${ActivityHandling}`>;

export function buildSetup(config: VoiceSessionConfig, model: string, handle: string | null): LiveClientMessage {
  const textOnly = config.source === 'text';
  const lines = [config.instruction];
  if (config.language) lines.push(`Speak ${config.language}.`);
  const functionDeclarations = config.tools.map((t) => ({
    name: t.name,
    description: t.description,
    parametersJsonSchema: t.parameters,
  }));
  if (config.canEndConversation) {
    functionDeclarations.push({
      name: END_CONVERSATION_TOOL,
      description: 'Ends the conversation. Call it after saying goodbye, when the user says goodbye or the conversation is over.',
      parametersJsonSchema: { type: 'object', properties: {} },
    });
  }
  const speechConfig =
    !textOnly && (config.voiceId || config.languageCode)
      ? {
          ...(config.voiceId ? { voiceConfig: { prebuiltVoiceConfig: { voiceName: config.voiceId } } } : {}),
          ...(config.languageCode ? { languageCode: config.languageCode } : {}),
        }
      : undefined;
  const input = realtimeInputConfig(config.conversation);
  return {
    setup: {
      model: model.startsWith('models/') ? model : `models/${model}`,
      generationConfig: {
        responseModalities: [(textOnly ? 'TEXT' : 'AUDIO') as Modality],
        ...(speechConfig ? { speechConfig } : {}),
      },
      systemInstruction: { parts: [{ text: lines.join('\n\n') }] },
      ...(functionDeclarations.length ? { tools: [{ functionDeclarations }] } : {}),
      inputAudioTranscription: {},
      ...(textOnly ? {} : { outputAudioTranscription: {} }),
      ...(input && !textOnly ? { realtimeInputConfig: input } : {}),
      sessionResumption: handle ? { handle } : {},
    },
  };
}

/**
 * The user turn that makes the model say the first message (first connection only); null when there is
 * none: the model then waits for the user's first turn, as the contract says.
 */
export function openingTurn(config: VoiceSessionConfig): LiveClientMessage | null {
  if (!config.firstMessage) return null;
  const text = `(The conversation has started.) Open it now: say exactly: ${JSON.stringify(config.firstMessage)}`;
  return { clientContent: { turns: [{ role: 'user', parts: [{ text }] }], turnComplete: true } };
}

/** How keys the person pressed on the phone keypad reach the model: a text input naming them. */
export function keypadInput(keys: string): string {
  return `(Keys pressed on the phone keypad: ${keys})`;
}

/** A line the agent is told to say (fillers): a user-role turn the model answers by speaking it. */
export function sayTurn(text: string): LiveClientMessage {
  const directive = `(Tell the user this now, the pending request continues.) Say exactly: ${JSON.stringify(text)}`;
  return { clientContent: { turns: [{ role: 'user', parts: [{ text: directive }] }], turnComplete: true } };
}

interface SocketHandlers {
  message(ws: WebSocket, data: RawData): void;
  close(ws: WebSocket, code: number): void;
}

/** One connection: open the socket, send setup, resolve on setupComplete; bounded by timeoutMs. */
function connectOnce(url: URL, setup: string, timeoutMs: number, handlers: SocketHandlers): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    let settled = false;
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      ws.removeAllListeners();
      ws.on('error', () => {});
      ws.terminate();
      reject(err);
    };
    const timer = setTimeout(() => fail(new Error(`no setupComplete within ${timeoutMs} ms`)), timeoutMs);
    ws.on('open', () => ws.send(setup));
    ws.on('error', (err) => fail(err));
    ws.on('close', (code, reason) => {
      const text = `closed during setup: ${code} ${reason.toString()}`.trim();
      fail(MODEL_REFUSED(code, reason.toString()) ? new VoiceModelRefusedError(text) : new Error(text));
    });
    ws.on('message', (data) => {
      let msg: LiveServerMessage;
      try {
        msg = JSON.parse(data.toString()) as LiveServerMessage;
      } catch {
        return fail(new Error('invalid JSON from the voice service'));
      }
      if (!msg.setupComplete) return;
      settled = true;
      clearTimeout(timer);
      // Switch to the session's handlers synchronously: later messages may already be in this chunk.
      ws.removeAllListeners();
      ws.on('message', (d) => handlers.message(ws, d));
      ws.on('close', (code) => handlers.close(ws, code));
      ws.on('error', () => {});
      resolve(ws);
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

class LiveSession implements VoiceSession {
  private ws: WebSocket | null = null;
  private state: 'connecting' | 'open' | 'reconnecting' | 'closed' = 'connecting';
  private handle: string | null = null;
  private listener: ((event: VoiceEvent) => void) | null = null;
  private backlog: VoiceEvent[] = [];
  private outbox: Array<{ json: string; media: boolean }> = [];
  /** Non-media messages the state behind the latest handle may not include (a cut connection loses them). */
  private replay: string[] = [];
  private recentReconnects: number[] = [];
  private inputText = '';
  private outputText = '';
  private readonly url: URL;
  private readonly handlers: SocketHandlers = {
    message: (ws, data) => this.onMessage(ws, data),
    close: (ws, code) => this.onSocketClose(ws, code),
  };

  constructor(
    private readonly opts: GeminiLiveOptions,
    private readonly config: VoiceSessionConfig,
    private readonly onEnd: (s: LiveSession) => void,
  ) {
    this.url = bidiUrl(opts.url, opts.apiKey);
  }

  async start(): Promise<void> {
    const ws = await this.connectWithRetries('open');
    if (this.state === 'closed') {
      ws.terminate();
      throw new Error('session closed');
    }
    this.ws = ws;
    this.state = 'open';
    const opening = openingTurn(this.config);
    if (opening) ws.send(JSON.stringify(opening));
  }

  private async connectWithRetries(why: string): Promise<WebSocket> {
    let lastError: Error = new Error('not attempted');
    for (let attempt = 0; attempt <= this.opts.retryMax; attempt++) {
      if (attempt > 0) await sleep(Math.min(this.opts.retryMaxDelayMs, this.opts.retryBaseMs * 2 ** (attempt - 1)));
      if (this.state === 'closed') throw new Error('session closed');
      try {
        const setup = JSON.stringify(buildSetup(this.config, this.config.model ?? this.opts.model, this.handle));
        return await connectOnce(this.url, setup, this.opts.connectTimeoutMs, this.handlers);
      } catch (err) {
        if (err instanceof VoiceModelRefusedError) throw err;
        lastError = err as Error;
        this.opts.log.warn(
          { url: loggableUrl(this.url), attempt: attempt + 1, of: this.opts.retryMax + 1, why, err: lastError.message },
          'voice service connection attempt failed',
        );
      }
    }
    throw lastError;
  }

  private async reconnect(why: 'goAway' | 'closed'): Promise<void> {
    if (this.state !== 'open') return;
    // A service that accepts and then drops every connection must not keep us reconnecting forever.
    const now = Date.now();
    this.recentReconnects = this.recentReconnects.filter((t) => now - t < FLAP_WINDOW_MS);
    this.recentReconnects.push(now);
    if (this.recentReconnects.length > this.opts.retryMax + 1) {
      this.ws?.terminate();
      this.finish({ type: 'unavailable', message: 'voice service unavailable: connection keeps dropping' });
      return;
    }
    this.state = 'reconnecting';
    // Taken now: the new connection's first handle update would otherwise clear it before it is sent.
    const replay = this.replay;
    this.replay = [];
    const previous = this.ws;
    if (why === 'closed') this.ws = null;
    try {
      const ws = await this.connectWithRetries(why);
      if (this.state !== 'reconnecting') {
        ws.terminate();
        return;
      }
      if (previous && previous !== ws) {
        previous.removeAllListeners();
        previous.on('error', () => {});
        previous.close(1000);
      }
      this.ws = ws;
      this.state = 'open';
      if (ws.readyState !== WebSocket.OPEN) {
        // Lost again before the hand-over (its close event went to a socket we did not yet own).
        this.replay = replay;
        void this.reconnect('closed');
        return;
      }
      this.opts.log.info({ why, resumed: this.handle !== null }, 'voice service session reconnected');
      for (const json of replay) {
        ws.send(json);
        this.remember(json);
      }
      for (const { json, media } of this.outbox.splice(0)) {
        ws.send(json);
        if (!media) this.remember(json);
      }
    } catch (err) {
      if (this.isClosed()) return;
      previous?.terminate();
      this.finish({ type: 'unavailable', message: `voice service unavailable: ${(err as Error).message}` });
    }
  }

  /** A method, so TypeScript does not narrow `state` across awaits (close() may run meanwhile). */
  private isClosed(): boolean {
    return this.state === 'closed';
  }

  private onSocketClose(ws: WebSocket, code: number): void {
    if (ws !== this.ws || this.state !== 'open') return;
    this.opts.log.warn({ code }, 'voice service connection lost; reconnecting');
    void this.reconnect('closed');
  }

  private onMessage(ws: WebSocket, data: RawData): void {
    if (this.state === 'closed') return;
    const receivedAt = this.config.onAudioReceived ? process.hrtime.bigint() : 0n;
    let msg: LiveServerMessage;
    try {
      msg = JSON.parse(data.toString()) as LiveServerMessage;
    } catch {
      this.opts.log.warn('voice service sent a message that is not JSON; ignored');
      return;
    }
    if (msg.sessionResumptionUpdate) {
      const u = msg.sessionResumptionUpdate;
      if (u.resumable !== false && u.newHandle) {
        this.handle = u.newHandle;
        this.replay = [];
      }
    }
    if (msg.serverContent) this.onServerContent(msg.serverContent, receivedAt);
    if (msg.toolCall?.functionCalls?.length) this.onToolCall(ws, msg.toolCall.functionCalls);
    if (msg.toolCallCancellation?.ids?.length) this.emit({ type: 'tool_call_cancellation', ids: msg.toolCallCancellation.ids });
    if (msg.goAway && ws === this.ws) void this.reconnect('goAway');
  }

  /** `receivedAt`: the message's receipt (benchmarks' `onAudioReceived`; 0 without it). */
  private onServerContent(sc: NonNullable<LiveServerMessage['serverContent']>, receivedAt: bigint): void {
    if (sc.inputTranscription) {
      this.inputText += sc.inputTranscription.text ?? '';
      if (sc.inputTranscription.finished) this.finishInput();
      else if (this.inputText) this.emit({ type: 'input_transcript', text: this.inputText, final: false });
    }
    let audioStamped = false;
    for (const part of sc.modelTurn?.parts ?? []) {
      if (part.inlineData?.data && part.inlineData.mimeType?.startsWith('audio/')) {
        if (!audioStamped && this.config.onAudioReceived) this.config.onAudioReceived(receivedAt);
        audioStamped = true;
        this.finishInput();
        this.emit({ type: 'audio', pcm: Buffer.from(part.inlineData.data, 'base64') });
      } else if (part.text && !part.thought) {
        this.finishInput();
        this.emit({ type: 'text', text: part.text });
      }
    }
    if (sc.outputTranscription?.text) {
      this.finishInput();
      this.outputText += sc.outputTranscription.text;
      this.emit({ type: 'output_transcript', text: this.outputText });
    }
    if (sc.interrupted) {
      this.outputText = '';
      this.emit({ type: 'interrupted' });
    }
    if (sc.turnComplete) {
      this.finishInput();
      this.outputText = '';
      this.emit({ type: 'turn_complete' });
    }
  }

  private finishInput(): void {
    if (!this.inputText) return;
    const text = this.inputText;
    this.inputText = '';
    this.emit({ type: 'input_transcript', text, final: true });
  }

  private onToolCall(ws: WebSocket, functionCalls: NonNullable<NonNullable<LiveServerMessage['toolCall']>['functionCalls']>): void {
    this.finishInput();
    const calls: ToolCallRequest[] = [];
    let end: { id: string } | null = null;
    for (const fc of functionCalls) {
      const id = fc.id ?? '';
      if (fc.name === END_CONVERSATION_TOOL) end = { id };
      else calls.push({ id, name: fc.name ?? '', args: fc.args ?? {} });
    }
    if (calls.length) this.emit({ type: 'tool_call', calls });
    if (end) {
      const response = this.config.canEndConversation ? { result: 'ok' } : { error: 'end_conversation is not available' };
      ws.send(JSON.stringify({ toolResponse: { functionResponses: [{ id: end.id, name: END_CONVERSATION_TOOL, response }] } }));
      if (this.config.canEndConversation) this.emit({ type: 'end_conversation' });
    }
  }

  private emit(event: VoiceEvent): void {
    if (!this.listener) {
      this.backlog.push(event);
      return;
    }
    try {
      this.listener(event);
    } catch (err) {
      this.opts.log.error({ err, event: event.type }, 'voice event listener failed');
    }
  }

  /** Terminal: emits `event` (if any) then `closed`, once. */
  private finish(event: VoiceEvent | null): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.outbox = [];
    this.onEnd(this);
    if (event) this.emit(event);
    this.emit({ type: 'closed' });
  }

  private remember(json: string): void {
    this.replay.push(json);
    if (this.replay.length > REPLAY_LIMIT) this.replay.shift();
  }

  /** Throws VoiceForwardError when a message could not be taken now (see the module head). */
  private admit(): void {
    if (this.state === 'closed') throw new VoiceForwardError('The voice session has ended.');
    const live = this.state === 'open' && this.ws?.readyState === WebSocket.OPEN;
    if (!live && this.outbox.length >= (this.opts.reconnectQueueLimit ?? OUTBOX_LIMIT) && !this.outbox.some((m) => m.media)) {
      throw new VoiceForwardError('The voice service is reconnecting and cannot hold more messages.');
    }
  }

  private send(json: string, media: boolean): void {
    this.admit();
    if (this.state === 'open' && this.ws?.readyState === WebSocket.OPEN) {
      this.ws.send(json);
      if (!media) this.remember(json);
      return;
    }
    if (this.outbox.length >= (this.opts.reconnectQueueLimit ?? OUTBOX_LIMIT)) {
      this.outbox.splice(
        this.outbox.findIndex((m) => m.media),
        1,
      );
    }
    this.outbox.push({ json, media });
  }

  sendAudio(pcm16k: Buffer): void {
    this.send(`{"realtimeInput":{"audio":{"mimeType":"${INPUT_AUDIO_MIME}","data":"${pcm16k.toString('base64')}"}}}`, true);
  }

  sendImage(jpeg: Buffer): void {
    this.send(`{"realtimeInput":{"video":{"mimeType":"image/jpeg","data":"${jpeg.toString('base64')}"}}}`, true);
  }

  sendText(text: string): void {
    this.admit();
    queueMicrotask(() => {
      this.finishInput();
      this.emit({ type: 'input_transcript', text, final: true });
    });
    this.send(JSON.stringify({ realtimeInput: { text } } satisfies LiveClientMessage), false);
  }

  sendKeys(keys: string): void {
    this.send(JSON.stringify({ realtimeInput: { text: keypadInput(keys) } } satisfies LiveClientMessage), false);
  }

  say(text: string): void {
    this.send(JSON.stringify(sayTurn(text)), false);
  }

  sendToolResponses(responses: ToolCallResponse[]): void {
    const message: LiveClientMessage = {
      toolResponse: { functionResponses: responses.map((r) => ({ id: r.id, name: r.name, response: r.response })) },
    };
    this.send(JSON.stringify(message), false);
  }

  onEvent(listener: (event: VoiceEvent) => void): void {
    this.listener = listener;
    for (const event of this.backlog.splice(0)) this.emit(event);
  }

  async close(): Promise<void> {
    if (this.state === 'closed') return;
    const ws = this.ws;
    this.ws = null;
    this.finish(null);
    if (!ws || ws.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        ws.terminate();
        resolve();
      }, 1000);
      ws.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      ws.close(1000);
    });
  }
}

export function createGeminiLiveService(opts: GeminiLiveOptions): VoiceService {
  const sessions = new Set<LiveSession>();
  return {
    async open(config) {
      const session = new LiveSession(opts, config, (s) => sessions.delete(s));
      sessions.add(session);
      try {
        await session.start();
      } catch (err) {
        sessions.delete(session);
        const message = `voice service session could not start: ${(err as Error).message}`;
        throw err instanceof VoiceModelRefusedError ? new VoiceModelRefusedError(message, { cause: err }) : new Error(message, { cause: err });
      }
      return session;
    },
    analyze(input) {
      return analyzeWithModel(
        { origin: restOrigin(opts.url), apiKey: opts.apiKey, model: input.model ?? opts.analysisModel, timeoutMs: 30_000, log: opts.log },
        input,
      );
    },
    async close() {
      await Promise.all([...sessions].map((s) => s.close()));
    },
  };
}
