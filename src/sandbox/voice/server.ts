/**
 * The sandbox voice service: a local server speaking the Gemini Live BidiGenerateContent protocol over
 * WebSocket (and the REST generateContent call used for post-call analysis, with structured output:
 * the fixed fields, and `data`/`success` by the rules of extraction.ts), so the real adapter runs in
 * development and in every test. Listens on 127.0.0.1, random port by default.
 *
 * Operations for tests and demos (the peer's own controls, not a protocol feature):
 * - goAway(timeLeftMs): every open connection gets `goAway` and is closed after timeLeftMs;
 * - setUnavailable(true): new connections are refused with HTTP 503 (as an overloaded service does);
 * - dropConnections(): every open connection is cut without a close frame.
 */
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { analyzeTranscript, parseAnalysisPrompt } from '../../voice/analysis.js';
import { extractData, judgeSuccess } from './extraction.js';
import { DEFAULT_SPEECH_RMS } from '../../audio/pcm16.js';
import { BIDI_PATH } from '../../voice/live-protocol.js';
import { SandboxConnection, type Conversation, type ConversationRegistry, type SandboxTiming, type SetupRecord } from './connection.js';

export interface SandboxOptions extends Partial<SandboxTiming> {
  host?: string;
  port?: number;
}

export interface SandboxVoiceService {
  /** ws://host:port: the adapter adds the BidiGenerateContent path. */
  readonly url: string;
  /** Every setup received, in order (model and the resumption handle it carried). */
  readonly setups: readonly SetupRecord[];
  /** Every post-call analysis answered, in order: the model asked (`models/...`) and the agent instruction it was for. */
  readonly analyses: readonly AnalysisRecord[];
  openConnections(): number;
  /** Input audio received over every connection so far, ms. */
  audioReceivedMs(): number;
  /** Text inputs (typed messages and keys, each a user turn) and images received over every connection so far. */
  inputsReceived(): { texts: number; images: number };
  /** Connection attempts refused while unavailable. */
  refusedConnections(): number;
  goAway(timeLeftMs?: number): void;
  setUnavailable(unavailable: boolean): void;
  dropConnections(): void;
  close(): Promise<void>;
}

export interface AnalysisRecord {
  model: string;
  instruction: string;
}

/** Conversations by resumption handle; only a conversation's latest handle is kept. */
class Registry implements ConversationRegistry {
  private byHandle = new Map<string, Conversation>();
  constructor(private readonly max = 10_000) {}

  get(handle: string) {
    return this.byHandle.get(handle);
  }

  issue(conversation: Conversation): string {
    if (conversation.handle) this.byHandle.delete(conversation.handle);
    const handle = randomBytes(16).toString('base64url');
    conversation.handle = handle;
    this.byHandle.set(handle, conversation);
    if (this.byHandle.size > this.max) this.byHandle.delete(this.byHandle.keys().next().value!);
    return handle;
  }

  forget(conversation: Conversation): void {
    if (conversation.handle) this.byHandle.delete(conversation.handle);
    conversation.handle = null;
  }
}

const GENERATE_CONTENT = /^\/v1beta\/(models\/[^/:]+):generateContent$/;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The answer to a post-call analysis request, as the real API's structured output gives it: the JSON
 * text of the deterministic analysis (voice/analysis.ts), plus `data` and `success` when the
 * `responseJsonSchema` asks for them (extraction.ts). Refused as the real API would: a
 * `responseJsonSchema` without `responseMimeType: application/json`, or beside `responseSchema`.
 */
function analysisAnswer(raw: string): { text: string; instruction: string } | { error: string } {
  let body: Json;
  try {
    const parsed: unknown = JSON.parse(raw);
    if (!isObject(parsed)) return { error: 'Invalid JSON payload received.' };
    body = parsed;
  } catch {
    return { error: 'Invalid JSON payload received.' };
  }
  const config = isObject(body.generationConfig) ? body.generationConfig : {};
  const schema = config.responseJsonSchema;
  if (schema !== undefined && config.responseMimeType !== 'application/json')
    return { error: 'responseJsonSchema requires responseMimeType application/json.' };
  if (schema !== undefined && config.responseSchema !== undefined) return { error: 'responseSchema and responseJsonSchema cannot both be set.' };
  const prompt = (Array.isArray(body.contents) ? body.contents : [])
    .flatMap((c) => (isObject(c) && Array.isArray(c.parts) ? c.parts : []))
    .map((p) => (isObject(p) && typeof p.text === 'string' ? p.text : ''))
    .join('\n');
  const parsed = parseAnalysisPrompt(prompt);
  if (!parsed) return { error: 'Request contains an invalid argument.' };
  const fixed = analyzeTranscript(parsed.transcript);
  const answer: Json = { ...fixed };
  const asked = isObject(schema) && isObject(schema.properties) ? schema.properties : {};
  const userTurns = parsed.transcript.filter((t) => t.role === 'user').map((t) => t.text);
  if ('data' in asked && isObject(schema)) answer.data = extractData(schema, userTurns);
  if ('success' in asked) answer.success = judgeSuccess(parsed.successCriteria ?? '', userTurns, fixed.goal_met);
  return { text: JSON.stringify(answer), instruction: parsed.instruction };
}

export async function startSandboxVoiceService(options: SandboxOptions = {}): Promise<SandboxVoiceService> {
  const timing: SandboxTiming = {
    endOfTurnMs: options.endOfTurnMs ?? 600,
    msPerChar: options.msPerChar ?? 60,
    speed: options.speed ?? 1,
    speechRms: options.speechRms ?? DEFAULT_SPEECH_RMS,
    minSpeechMs: options.minSpeechMs ?? 100,
  };
  const registry = new Registry();
  const setups: SetupRecord[] = [];
  const analyses: AnalysisRecord[] = [];
  const connections = new Map<import('ws').WebSocket, SandboxConnection>();
  let unavailable = false;
  let refused = 0;
  let audioMs = 0;
  const inputs = { texts: 0, images: 0 };

  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const model = GENERATE_CONTENT.exec(path)?.[1];
    if (req.method !== 'POST' || !model) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"code":404,"message":"Not found"}}');
      return;
    }
    if (unavailable) {
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"code":503,"message":"Unavailable"}}');
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let answer: ReturnType<typeof analysisAnswer>;
      try {
        answer = analysisAnswer(Buffer.concat(chunks).toString());
      } catch {
        // No request may end the process: what the rules could not answer is the API's own 500.
        res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"code":500,"message":"Internal error","status":"INTERNAL"}}');
        return;
      }
      if ('error' in answer) {
        res
          .writeHead(400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ error: { code: 400, message: answer.error, status: 'INVALID_ARGUMENT' } }));
        return;
      }
      analyses.push({ model, instruction: answer.instruction });
      if (analyses.length > 10_000) analyses.shift();
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ candidates: [{ content: { role: 'model', parts: [{ text: answer.text }] }, finishReason: 'STOP' }] }));
    });
  });

  const wss = new WebSocketServer({ noServer: true, maxPayload: 16 * 1024 * 1024 });
  server.on('upgrade', (req, socket, head) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== BIDI_PATH || unavailable) {
      if (path === BIDI_PATH) refused++;
      socket.end(path !== BIDI_PATH ? 'HTTP/1.1 404 Not Found\r\n\r\n' : 'HTTP/1.1 503 Service Unavailable\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      connections.set(
        ws,
        new SandboxConnection(
          ws,
          timing,
          registry,
          (r) => setups.push(r),
          (ms) => (audioMs += ms),
          (kind) => (kind === 'text' ? inputs.texts++ : inputs.images++),
        ),
      );
      ws.on('close', () => connections.delete(ws));
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;

  return {
    url: `ws://${address.includes(':') ? `[${address}]` : address}:${port}`,
    setups,
    analyses,
    openConnections: () => connections.size,
    audioReceivedMs: () => audioMs,
    inputsReceived: () => ({ ...inputs }),
    refusedConnections: () => refused,
    goAway(timeLeftMs = 100) {
      for (const c of connections.values()) c.goAway(timeLeftMs);
    },
    setUnavailable(value: boolean) {
      unavailable = value;
    },
    dropConnections() {
      for (const ws of connections.keys()) ws.terminate();
    },
    async close() {
      for (const ws of connections.keys()) ws.terminate();
      wss.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
