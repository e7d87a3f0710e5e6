/**
 * The service process of the turn-latency benchmark (scripts/bench/turn-latency.ts): the real service,
 * its carriers and voice service at the URLs in the environment (each a process of its own), keeping
 * the stamps of every caller turn's reply (`onCallTurnTiming`, src/calls/live/bridge.ts `TurnTiming`)
 * as milliseconds between them. Reports over IPC: {ready, url}; {cmd: 'timings'} answers
 * {timings: [{callId, inboundMs, voiceMs, outboundMs}]} (every turn since the last ask) and
 * {cmd: 'exit'} closes the service and exits.
 */
import os from 'node:os';
import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../../src/config.js';
import { createLogger } from '../../../src/log.js';
import { startService, type RunningService } from '../../../src/service.js';

export interface TurnShares {
  callId: string;
  /** Receipt of the turn's last loud caller frame to its hand-over to the voice session. */
  inboundMs: number;
  /** That hand-over to the receipt of the voice service's first audio message of the reply. */
  voiceMs: number;
  /** That receipt to the send of the reply's first frame to the carrier. */
  outboundMs: number;
}

const ms = (ns: bigint) => Number(ns) / 1e6;
let timings: TurnShares[] = [];

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-bench-turns-'));
const config = loadConfig({ ...process.env, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', CONTRACT_CHECK: 'off' });
const running: RunningService = await startService(config, createLogger('warn', process.stderr), {
  onCallTurnTiming: (t) =>
    timings.push({
      callId: t.callId,
      inboundMs: ms(t.forwardedAt - t.receivedAt),
      voiceMs: ms(t.voiceAudioAt - t.forwardedAt),
      outboundMs: ms(t.sentAt - t.voiceAudioAt),
    }),
});

process.on('disconnect', () => process.exit(0));
process.on('message', (m: { cmd: string }) => {
  if (m.cmd === 'timings') {
    process.send!({ timings });
    timings = [];
  } else if (m.cmd === 'exit') {
    void running.close().finally(() => process.exit(0));
  }
});
process.send!({ ready: true, url: running.url });
