/**
 * The process under load in the realtime benchmark (scripts/bench/realtime.ts), so the clients do not
 * share its event loop or its CPU figures. Two modes:
 * - `service`: the real service (with the in-process sandbox voice service), timing each audio frame
 *   from its receipt on the WebSocket to its hand-over to the voice session;
 * - `relay`: a bare `ws` relay doing the least the same job needs: parse the JSON frame, decode the
 *   base64, send it on to an upstream WebSocket (a sink in this process, as the sandbox is for the service).
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
import { childStats } from '../child-stats.js';

const stats = childStats();

async function service(): Promise<string> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-bench-rt-'));
  const config = loadConfig({ ...process.env, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', CONTRACT_CHECK: 'off' });
  const s = await startService(config, createLogger('silent'), { onFrameForwarded: stats.record });
  return s.url;
}

async function relay(): Promise<string> {
  const sink = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise<void>((r) => sink.once('listening', () => r()));
  sink.on('connection', (ws) => ws.on('message', () => undefined));
  const sinkUrl = `ws://127.0.0.1:${(sink.address() as AddressInfo).port}`;
  const server = http.createServer();
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      const upstream = new WebSocket(sinkUrl);
      upstream.on('open', () => ws.send(JSON.stringify({ type: 'session_started' })));
      ws.on('message', (data: Buffer) => {
        const t0 = process.hrtime.bigint();
        const msg = JSON.parse(data.toString()) as { mime_type: string; data: string };
        const pcm = Buffer.from(msg.data, 'base64');
        upstream.send(`{"realtimeInput":{"audio":{"mimeType":"audio/pcm;rate=16000","data":"${pcm.toString('base64')}"}}}`);
        stats.record(process.hrtime.bigint() - t0);
      });
      ws.on('close', () => upstream.close());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const url = process.argv[2] === 'relay' ? await relay() : await service();
process.send!({ ready: true, url });
