/**
 * The process under load in the calls benchmark (scripts/bench/calls.ts). Two modes:
 * - `service`: the real service (in-process sandbox voice service; carriers at the URLs given in the
 *   environment, i.e. the sandbox carriers in their own process), timing each caller frame from its
 *   receipt on the media WebSocket to its hand-over to the voice session (decode, upsample, send);
 * - `relay`: a bare `ws` relay of the same frames: a provider_b media stream server that parses each
 *   JSON frame, decodes the base64 payload and sends it on to an upstream WebSocket (a sink here).
 * Reports over IPC: {ready, url}; {cmd: 'reset'} clears the figures; {cmd: 'stats'} answers
 * {count, p50Ms, p99Ms, loopDelayP99Ms, cpuUs, wallMs, rss, live}.
 */
import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { WebSocketServer, WebSocket } from 'ws';
import { loadConfig } from '../../../src/config.js';
import { createLogger } from '../../../src/log.js';
import { startService, type RunningService } from '../../../src/service.js';

let samples: number[] = [];
let cpu = process.cpuUsage();
let wall = performance.now();
let liveStreams = () => 0;
const record = (ns: bigint) => samples.push(Number(ns) / 1e6);
const loopDelay = monitorEventLoopDelay({ resolution: 1 });
loopDelay.enable();

function stats() {
  const sorted = samples.slice().sort((a, b) => a - b);
  const at = (p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : NaN);
  const used = process.cpuUsage(cpu);
  return {
    count: sorted.length,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    loopDelayP99Ms: loopDelay.percentile(99) / 1e6,
    cpuUs: used.user + used.system,
    wallMs: performance.now() - wall,
    rss: process.memoryUsage().rss,
    live: liveStreams(),
  };
}

process.on('message', (m: { cmd: string }) => {
  if (m.cmd === 'reset') {
    samples = [];
    cpu = process.cpuUsage();
    wall = performance.now();
    loopDelay.reset();
    process.send!({ reset: true });
  } else if (m.cmd === 'stats') {
    process.send!({ stats: stats() });
  } else if (m.cmd === 'exit') {
    void (running?.close() ?? Promise.resolve()).finally(() => process.exit(0));
  }
});

let running: RunningService | undefined;

async function service(): Promise<string> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-bench-calls-'));
  const config = loadConfig({ ...process.env, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', CONTRACT_CHECK: 'off' });
  running = await startService(config, createLogger('silent'), { onCallFrameForwarded: record });
  const s = running;
  liveStreams = () => s.telephony.media.size;
  return s.url;
}

async function relay(): Promise<string> {
  const sink = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise<void>((r) => sink.once('listening', () => r()));
  sink.on('connection', (ws) => ws.on('message', () => undefined));
  const sinkUrl = `ws://127.0.0.1:${(sink.address() as AddressInfo).port}`;
  const server = http.createServer((_req, res) => res.writeHead(200).end());
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      const upstream = new WebSocket(sinkUrl);
      ws.on('message', (data: Buffer) => {
        const t0 = process.hrtime.bigint();
        const msg = JSON.parse(data.toString()) as { event: string; media?: { payload?: string } };
        if (msg.event !== 'media' || !msg.media?.payload) return;
        const ulaw = Buffer.from(msg.media.payload, 'base64');
        if (upstream.readyState === upstream.OPEN) upstream.send(ulaw);
        record(process.hrtime.bigint() - t0);
      });
      ws.on('close', () => upstream.close());
    });
  });
  liveStreams = () => wss.clients.size;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const url = process.argv[2] === 'relay' ? await relay() : await service();
process.send!({ ready: true, url });
