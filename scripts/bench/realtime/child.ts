/**
 * The process under load in the realtime benchmark (scripts/bench/realtime.ts), so the clients do not
 * share its event loop or its CPU figures. Modes:
 * - `service`: the real service, timing each audio frame from its receipt on the WebSocket to its
 *   hand-over to the voice session; its voice service is the in-process sandbox, or the one at
 *   VOICE_SERVICE_URL (a `voice` process, the default; in-process with BENCH_REALTIME_VOICE=service);
 * - `relay`: a bare `ws` relay doing the least the same job needs: parse the JSON frame, decode the
 *   base64, send it on to an upstream WebSocket (a sink in this process, as the sandbox is for the service);
 * - `relay-voice`: the same relay with the sandbox voice service at VOICE_URL as its upstream, one
 *   session per client with the same setup and opening turn as the service's, passing the voice
 *   service's audio and transcripts back to the client as the realtime messages, and nothing else;
 * - `voice`: the sandbox voice service alone (the upstream of `service` and `relay-voice`).
 * Reports over IPC: {ready, url}; on {cmd: 'reset'} clears the figures; on {cmd: 'stats'} answers
 * {count, p50Ms, p99Ms, loopDelayP99Ms, cpuUs, wallMs, rss}.
 */
import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, WebSocket } from 'ws';
import { loadConfig } from '../../../src/config.js';
import { createLogger } from '../../../src/log.js';
import { startService } from '../../../src/service.js';
import { startSandboxVoiceService } from '../../../src/sandbox/voice/server.js';
import { bidiUrl } from '../../../src/voice/live-protocol.js';
import { buildSetup, openingTurn } from '../../../src/voice/gemini-live.js';
import { childStats } from '../child-stats.js';

const stats = childStats();

async function service(): Promise<string> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-bench-rt-'));
  const config = loadConfig({ ...process.env, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', CONTRACT_CHECK: 'off' });
  const s = await startService(config, createLogger('silent'), { onFrameForwarded: stats.record });
  return s.url;
}

async function voice(): Promise<string> {
  return (await startSandboxVoiceService({})).url;
}

/** Parse, decode, send on: the relay's whole work per client frame. */
function forward(data: Buffer, upstream: WebSocket): void {
  const t0 = process.hrtime.bigint();
  const msg = JSON.parse(data.toString()) as { mime_type: string; data: string };
  const pcm = Buffer.from(msg.data, 'base64');
  if (upstream.readyState === upstream.OPEN)
    upstream.send(`{"realtimeInput":{"audio":{"mimeType":"audio/pcm;rate=16000","data":"${pcm.toString('base64')}"}}}`);
  stats.record(process.hrtime.bigint() - t0);
}

async function relayServer(connect: (ws: WebSocket) => WebSocket): Promise<string> {
  const server = http.createServer();
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      const upstream = connect(ws);
      ws.on('message', (data: Buffer) => forward(data, upstream));
      ws.on('close', () => upstream.close());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function relay(): Promise<string> {
  const sink = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise<void>((r) => sink.once('listening', () => r()));
  sink.on('connection', (ws) => ws.on('message', () => undefined));
  const sinkUrl = `ws://127.0.0.1:${(sink.address() as AddressInfo).port}`;
  return relayServer((ws) => {
    const upstream = new WebSocket(sinkUrl);
    upstream.on('open', () => ws.send(JSON.stringify({ type: 'session_started' })));
    return upstream;
  });
}

async function relayVoice(): Promise<string> {
  const upstreamUrl = bidiUrl(process.env.VOICE_URL!, undefined);
  const config = {
    instruction: 'You are the receptionist of Acme Dental.',
    firstMessage: 'Hello! How can I help you today?',
    voiceId: null,
    language: null,
    languageCode: null,
    tools: [],
    canEndConversation: false,
    source: 'voice' as const,
  };
  const setup = JSON.stringify(buildSetup(config, 'models/bench', null));
  const opening = JSON.stringify(openingTurn(config));
  return relayServer((ws) => {
    const upstream = new WebSocket(upstreamUrl, { perMessageDeflate: false });
    const send = (m: object) => ws.readyState === ws.OPEN && ws.send(JSON.stringify(m));
    upstream.on('open', () => upstream.send(setup));
    upstream.on('error', () => undefined);
    upstream.on('message', (data: Buffer) => {
      const msg = JSON.parse(data.toString()) as {
        setupComplete?: unknown;
        serverContent?: {
          modelTurn?: { parts?: Array<{ inlineData?: { data?: string } }> };
          inputTranscription?: { text?: string; finished?: boolean };
          outputTranscription?: { text?: string };
          turnComplete?: boolean;
          interrupted?: boolean;
        };
      };
      if (msg.setupComplete) {
        upstream.send(opening);
        send({ type: 'session_started' });
      }
      const sc = msg.serverContent;
      if (!sc) return;
      for (const part of sc.modelTurn?.parts ?? []) {
        if (part.inlineData?.data) send({ type: 'audio', mime_type: 'audio/pcm;rate=24000', data: part.inlineData.data });
      }
      if (sc.inputTranscription?.text)
        send({ type: 'transcript', role: 'user', text: sc.inputTranscription.text, final: Boolean(sc.inputTranscription.finished) });
      if (sc.outputTranscription?.text) send({ type: 'transcript', role: 'agent', text: sc.outputTranscription.text, final: false });
      if (sc.interrupted) send({ type: 'interrupted' });
      if (sc.turnComplete) send({ type: 'turn_complete' });
    });
    return upstream;
  });
}

const modes: Record<string, () => Promise<string>> = { service, relay, 'relay-voice': relayVoice, voice };
const url = await modes[process.argv[2] ?? 'service']();
process.send!({ ready: true, url });
