/**
 * Turn latency: `npm run bench -- turn-latency` (issue 34).
 *
 * For each caller turn of a phone call, the time from the caller's end of speech to the agent's first
 * audio frame sent to the carrier, split into shares, each stamped inside the service
 * (`onCallTurnTiming`, src/calls/live/bridge.ts; the voice adapter's `onAudioReceived`):
 * - inbound: our media socket's receipt of the turn's last loud caller frame to its hand-over to the
 *   voice session (parse, transcode, send);
 * - voice: that hand-over to the receipt of the voice service's first audio message of the reply (the
 *   voice service's end-of-turn detection, which the turn-taking setting moves, its answer, and the
 *   loopback between us);
 * - outbound: that receipt to the send of the reply's first 20 ms frame to the carrier (parse, decode,
 *   engine, transcode, frame);
 * ours = inbound + outbound; total = ours + voice. Goal: ours p99 under 20 ms.
 *
 * The service runs in a child process (turn-latency/child.ts), the sandbox carriers (speed 1, real
 * time) and the sandbox voice service in processes of their own, as the real peers are. Each call is a
 * scripted caller of BENCH_TURNS turns (default 2: each line said once the agent has finished, then a
 * hang-up), BENCH_CALLS concurrent calls per row (default 1; a list such as `1,50` gives a row per
 * value), on every provider of BENCH_PROVIDERS (default `provider_a,provider_b`; provider `sip` is not
 * run yet), at each turn-taking setting of BENCH_SETTINGS (default all of SETTINGS below). A row per
 * (provider, setting, N): turns measured, total, voice and ours p50/p99 with the inbound/outbound
 * split, and PASS/FAIL against the goal. The default run takes about two and a half minutes.
 */
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { api, benchDatabase, benchWorkspace, forkChild, peerEnv, percentile, table, type BenchChild } from './lib.js';
import type { TurnShares } from './turn-latency/child.js';

const ADMIN = 'bench-operator-token-0123456789';
const root = path.resolve(import.meta.dirname, '../..');

/** The turn-taking settings measured (an agent's `conversation`). */
const SETTINGS: Record<string, Record<string, unknown> | null> = {
  default: null,
  'high+300ms': { turn_detection: { end_sensitivity: 'high', silence_ms: 300 } },
  '800ms': { turn_detection: { silence_ms: 800 } },
  'low+1500ms': { turn_detection: { end_sensitivity: 'low', silence_ms: 1500 } },
  'interruptions never': { interruptions: 'never' },
};

const LINES = [
  'Hello, this is Sam calling about my appointment.',
  'Can you move it to Tuesday afternoon please?',
  'And do you take my insurance card?',
  'Is there parking near the clinic?',
  'What should I bring with me?',
  'How long will the visit take?',
  'Can my daughter come along?',
  'Do you send a reminder the day before?',
  'Is the clinic open on Saturdays?',
  'Thank you, that is all I needed to know.',
];

function callerScript(turns: number): unknown[] {
  const steps: unknown[] = [];
  for (let i = 0; i < turns; i++) steps.push({ waitForAgent: true, startWithinMs: 10_000 }, { say: LINES[i % LINES.length] });
  steps.push({ waitForAgent: true, startWithinMs: 10_000 }, { hangup: true });
  return steps;
}

const TERMINAL = new Set(['completed', 'failed', 'busy', 'no_answer', 'canceled', 'voicemail']);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitEnded(base: string, key: string, ids: string[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const id of ids) {
    for (;;) {
      const call = await api(base, 'GET', `/api/v1/calls/${id}`, key);
      if (TERMINAL.has(call.status as string)) break;
      if (Date.now() > deadline) throw new Error(`call ${id} still ${call.status} after ${timeoutMs} ms`);
      await sleep(500);
    }
  }
}

const f = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : 'n/a');

export async function run(): Promise<void> {
  const turns = Number(process.env.BENCH_TURNS ?? 2);
  const levels = (process.env.BENCH_CALLS ?? '1').split(',').map(Number);
  const providers = (process.env.BENCH_PROVIDERS ?? 'provider_a,provider_b').split(',');
  const settings = process.env.BENCH_SETTINGS ? process.env.BENCH_SETTINGS.split(',') : Object.keys(SETTINGS);
  const callTimeoutMs = Number(process.env.BENCH_CALL_TIMEOUT_MS ?? 30_000 * turns + 30_000);
  for (const p of providers) if (!['provider_a', 'provider_b'].includes(p)) throw new Error(`BENCH_PROVIDERS: ${p} is not run by this benchmark`);
  for (const s of settings) if (!(s in SETTINGS)) throw new Error(`BENCH_SETTINGS: no setting '${s}' (${Object.keys(SETTINGS).join(', ')})`);

  const db = await benchDatabase();
  const carrier = await forkChild(path.join(root, 'scripts/sandbox.ts'), ['carriers'], { PORT: '0', SPEED: '1', RING_MS: '50', LOG_LEVEL: 'silent' });
  const voice = await forkChild(path.join(import.meta.dirname, 'calls/child.ts'), ['voice'], {});
  const service: BenchChild = await forkChild(
    path.join(import.meta.dirname, 'turn-latency/child.ts'),
    [],
    peerEnv({ databaseUrl: db.url, voiceUrl: voice.info.url, carrier, adminToken: ADMIN }),
  );
  try {
    const s = service.info.url;
    const { key } = await benchWorkspace(s, ADMIN, { name: 'Turns', concurrentSessions: 10_000, noDailyCap: true });
    let serial = 0;
    const number = () => `+1415${200 + Math.floor(serial / 5000)}${5000 + (serial++ % 5000)}`;
    const rows: Array<Record<string, string | number>> = [];
    for (const provider of providers) {
      for (const setting of settings) {
        const agent = await api(s, 'POST', '/api/v1/agents', key, {
          name: `Turns ${provider} ${setting}`,
          instruction: 'You are the receptionist of Acme Dental.',
          first_message: 'Hello! This is Acme Dental. How can I help you today?',
          conversation: SETTINGS[setting],
          ...(provider === 'provider_a'
            ? {
                provider_a_config: {
                  account_sid: `AC${randomBytes(16).toString('hex')}`,
                  auth_token: randomBytes(16).toString('hex'),
                  phone_number: '+14155550100',
                },
              }
            : {
                provider_b_config: {
                  api_key: `KEY${randomBytes(12).toString('hex')}`,
                  connection_id: '1234567',
                  phone_number: '+14155550100',
                  public_key: carrier.info.providerBPublicKey,
                },
              }),
        });
        for (const n of levels) {
          await service.ask({ cmd: 'timings' }, 'timings');
          const ids = await Promise.all(
            Array.from({ length: n }, async () => {
              const to = number();
              carrier.proc.send({ cmd: 'script', to, script: callerScript(turns) });
              return (await api(s, 'POST', '/api/v1/calls', key, { agent_id: agent.agent_id, to_number: to, provider })).call_id as string;
            }),
          );
          await waitEnded(s, key, ids, callTimeoutMs);
          const mine = new Set(ids);
          const got = (await service.ask<TurnShares[]>({ cmd: 'timings' }, 'timings')).filter((x) => mine.has(x.callId));
          const sorted = (fn: (x: TurnShares) => number) => got.map(fn).sort((a, b) => a - b);
          const ours = sorted((x) => x.inboundMs + x.outboundMs);
          const total = sorted((x) => x.inboundMs + x.voiceMs + x.outboundMs);
          const voiceMs = sorted((x) => x.voiceMs);
          const inbound = sorted((x) => x.inboundMs);
          const outbound = sorted((x) => x.outboundMs);
          const row = {
            provider,
            setting,
            N: n,
            turns: got.length,
            'total p50 ms': f(percentile(total, 50)),
            'total p99 ms': f(percentile(total, 99)),
            'voice p50 ms': f(percentile(voiceMs, 50)),
            'voice p99 ms': f(percentile(voiceMs, 99)),
            'ours p50 ms': f(percentile(ours, 50)),
            'ours p99 ms': f(percentile(ours, 99)),
            'inbound p99 ms': f(percentile(inbound, 99)),
            'outbound p99 ms': f(percentile(outbound, 99)),
            goal: got.length === 0 ? 'no turns' : percentile(ours, 99) < 20 ? 'PASS' : 'FAIL',
          };
          rows.push(row);
          console.log(JSON.stringify(row));
        }
      }
    }
    table(rows);
    const load = os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');
    console.log(
      `Turn latency: ${turns} caller turns a call, sandbox carriers at speed 1 and the sandbox voice service in processes of their own; load average ${load}. Goal: ours p99 < 20 ms.`,
    );
  } finally {
    for (const p of [service, voice]) {
      p.proc.send({ cmd: 'exit' });
      await new Promise((r) => p.proc.once('exit', r));
    }
    carrier.proc.kill('SIGTERM');
    await new Promise((r) => carrier.proc.once('exit', r));
    await db.drop();
  }
}
