/**
 * The processes of the calls benchmark (scripts/bench/calls.ts), one mode each:
 * - `service`: the real service (carriers and voice service at the URLs in the environment, each in a
 *   process of its own, as in production), timing each caller frame from its receipt on the media
 *   WebSocket to its hand-over to the voice session (decode, upsample, send);
 * - `relay`: a bare `ws` relay of the same frames both ways: a provider_b media stream server that opens
 *   a session on the same voice service (VOICE_URL) per call (with the same opening turn), passes each
 *   caller frame on as `realtimeInput` audio and each audio part back as `media` frames, transcoding
 *   with the same CallTranscoder (so the voice service hears and says the same in both runs), and
 *   nothing else: no conversation engine, no carrier protocol state, no database;
 * - `voice`: the sandbox voice service alone (the upstream of both).
 * Reports over IPC: {ready, url}; {cmd: 'reset'} clears the figures; {cmd: 'stats'} answers
 * {count, p50Ms, p99Ms, loopDelayP99Ms, cpuUs, wallMs, rss, live}.
 */
import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, WebSocket } from 'ws';
import { loadConfig } from '../../../src/config.js';
import { createLogger } from '../../../src/log.js';
import { startService, type RunningService } from '../../../src/service.js';
import { startSandboxVoiceService } from '../../../src/sandbox/voice/server.js';
import { bidiUrl } from '../../../src/voice/live-protocol.js';
import { CallTranscoder } from '../../../src/carriers/transcode.js';
import { childStats } from '../child-stats.js';

let running: RunningService | undefined;
const stats = childStats({ onExit: () => running?.close() ?? Promise.resolve() });

async function service(): Promise<string> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-bench-calls-'));
  const config = loadConfig({ ...process.env, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', CONTRACT_CHECK: 'off' });
  // Warnings and errors go to stderr (the benchmark's output), so a failure under load shows its cause.
  running = await startService(config, createLogger('warn', process.stderr), { onCallFrameForwarded: stats.record });
  const s = running;
  stats.setLive(() => s.telephony.media.size);
  return s.url;
}

async function voice(): Promise<string> {
  const v = await startSandboxVoiceService({});
  return v.url;
}

async function relay(): Promise<string> {
  const upstreamUrl = bidiUrl(process.env.VOICE_URL!, undefined).toString();
  const setup = JSON.stringify({
    setup: {
      model: 'models/bench',
      generationConfig: { responseModalities: ['AUDIO'] },
      systemInstruction: { parts: [{ text: 'You are the receptionist of Acme Dental.' }] },
    },
  });
  const opening = JSON.stringify({
    clientContent: {
      turns: [
        {
          role: 'user',
          parts: [{ text: '(The conversation has started.) Open it now: say exactly: "Hello! This is Acme Dental. How can I help you today?"' }],
        },
      ],
      turnComplete: true,
    },
  });
  const server = http.createServer((_req, res) => res.writeHead(200).end());
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      const transcoder = new CallTranscoder();
      const upstream = new WebSocket(upstreamUrl, { perMessageDeflate: false });
      upstream.on('open', () => upstream.send(setup));
      upstream.on('message', (data: Buffer) => {
        const msg = JSON.parse(data.toString()) as {
          setupComplete?: unknown;
          serverContent?: { modelTurn?: { parts?: Array<{ inlineData?: { data?: string } }> } };
        };
        if (msg.setupComplete) upstream.send(opening);
        for (const part of msg.serverContent?.modelTurn?.parts ?? []) {
          if (!part.inlineData?.data) continue;
          for (const frame of transcoder.toCaller(Buffer.from(part.inlineData.data, 'base64')))
            ws.send(`{"event":"media","media":{"payload":"${frame.toString('base64')}"}}`);
        }
      });
      upstream.on('error', () => undefined);
      ws.on('message', (data: Buffer) => {
        const t0 = process.hrtime.bigint();
        const msg = JSON.parse(data.toString()) as { event: string; media?: { payload?: string } };
        if (msg.event !== 'media' || !msg.media?.payload) return;
        const pcm = transcoder.toModel(Buffer.from(msg.media.payload, 'base64'));
        if (upstream.readyState === upstream.OPEN)
          upstream.send(`{"realtimeInput":{"audio":{"mimeType":"audio/pcm;rate=16000","data":"${pcm.toString('base64')}"}}}`);
        stats.record(process.hrtime.bigint() - t0);
      });
      ws.on('close', () => upstream.close());
    });
  });
  stats.setLive(() => wss.clients.size);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const modes: Record<string, () => Promise<string>> = { service, relay, voice };
const url = await modes[process.argv[2] ?? 'service']();
process.send!({ ready: true, url });
