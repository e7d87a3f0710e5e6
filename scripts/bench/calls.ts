/**
 * Phone calls: `npm run bench -- calls`.
 *
 * 1. Transcoding, ns per 20 ms frame each way (in this process): caller mu-law 8 kHz -> PCM16 16 kHz
 *    and agent PCM16 24 kHz -> mu-law 8 kHz frames, through the call's CallTranscoder (G.711 by lookup
 *    table), against a baseline of the same path with alawmulaw's own per-call encoder and decoder.
 * 2. N concurrent sandbox calls end to end. The sandbox carriers run in their own process
 *    (`npm run sandbox -- carriers`, scripts/sandbox.ts), the service in another, its voice service (the sandbox) in a third,
 *    as the real ones are peers (scripts/bench/calls/child.ts); every call streams 20 ms frames both
 *    ways while a simulated caller talks. In the same run the same carrier streams the same calls'
 *    frames to a bare `ws` relay that passes them to and from the same voice service process with the
 *    same transcoding (so the voice service's load is the same) and nothing else. Figures per N: frames/s, added latency p50/p99 per caller frame
 *    (receipt on the media socket to hand-over), event-loop delay p99, CPU (% of one core) and RSS per
 *    call; then the largest N whose p99 + loop-delay p99 stays under 10 ms, for both, and their ratio
 *    (goal: the service at least 80% of the relay's N).
 * BENCH_SECONDS (default 10) is each measured phase; BENCH_CALLS_LEVELS (default 50,100,...,450,500)
 * the values of N; BENCH_CALLS_PER_SECOND (default 10) the rate at which each level's calls are placed,
 * in groups of 25 (the relay's calls come at the same rate).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import alawmulaw from 'alawmulaw';
import { benchDatabase, benchWorkspace, forkChild, answeringNumbers, placeCalls, table, TALKING_CALLEE, type BenchChild } from './lib.js';
import type { ChildStats } from './child-stats.js';
import { CallTranscoder } from '../../src/carriers/transcode.js';
import { Downsampler24kTo8k, Upsampler8kTo16k } from '../../src/audio/pcm16.js';
import { FRAMES_B64 } from '../../src/sandbox/voice/speech.js';

const ADMIN = 'bench-operator-token-0123456789';
const root = path.resolve(import.meta.dirname, '../..');

// 1. Transcoding

function nsPerFrame(frames: Buffer[], rounds: number, fn: (f: Buffer) => unknown): number {
  for (let r = 0; r < rounds / 4; r++) for (let i = 0; i < frames.length; i++) fn(frames[i]); // warm-up (JIT)
  const t0 = process.hrtime.bigint();
  for (let r = 0; r < rounds; r++) for (let i = 0; i < frames.length; i++) fn(frames[i]);
  return Number(process.hrtime.bigint() - t0) / (rounds * frames.length);
}

function transcoding(): void {
  const ulaw = readFileSync(path.join(root, 'test/fixtures/audio/caller-question.ulaw-8k.raw'));
  const inFrames: Buffer[] = [];
  for (let i = 0; i + 160 <= ulaw.length; i += 160) inFrames.push(ulaw.subarray(i, i + 160));
  const outFrames = FRAMES_B64.map((b) => Buffer.from(b, 'base64'));
  const rounds = 200;

  const t = new CallTranscoder();
  const toModel = nsPerFrame(inFrames, rounds, (f) => t.toModel(f));
  const toCaller = nsPerFrame(outFrames, rounds, (f) => t.toCaller(f));

  const up = new Upsampler8kTo16k();
  const down = new Downsampler24kTo8k();
  const baseIn = nsPerFrame(inFrames, rounds, (f) => {
    const pcm = alawmulaw.mulaw.decode(f);
    return up.process(Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength));
  });
  const baseOut = nsPerFrame(outFrames, rounds, (f) => {
    const pcm8 = down.process(f);
    return alawmulaw.mulaw.encode(new Int16Array(pcm8.buffer, pcm8.byteOffset, pcm8.length >> 1));
  });
  table([
    {
      direction: 'caller -> model (mu-law 8k -> PCM16 16k)',
      'ns/frame': Math.round(toModel),
      'baseline ns/frame': Math.round(baseIn),
      '% of 20 ms': ((toModel / 20e6) * 100).toFixed(4),
    },
    {
      direction: 'model -> caller (PCM16 24k -> mu-law 8k)',
      'ns/frame': Math.round(toCaller),
      'baseline ns/frame': Math.round(baseOut),
      '% of 20 ms': ((toCaller / 20e6) * 100).toFixed(4),
    },
  ]);
  console.log(
    `Transcoding: ${(inFrames.length * rounds).toLocaleString()} and ${(outFrames.length * rounds).toLocaleString()} frames; baseline = alawmulaw's per-call codec on the same resamplers.`,
  );
}

// 2. Concurrent calls

type Stats = ChildStats;
type Child = BenchChild;

/** BENCH_CPU_PROF_DIR: a V8 CPU profile of the service process, written there when it exits. */
const profile = () => (process.env.BENCH_CPU_PROF_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF_DIR}`] : []);

async function api(
  base: string,
  method: string,
  p: string,
  token: string | null,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Record<string, any>> {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const json = text ? (JSON.parse(text) as Record<string, any>) : {};
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${text.slice(0, 300)}`);
  return json;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitLive(child: Child, n: number, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await child.ask<Stats>({ cmd: 'stats' }, 'stats');
    if (s.live >= n) return;
    if (Date.now() > deadline) throw new Error(`only ${s.live} of ${n} streams live`);
    await sleep(200);
  }
}

async function measure(child: Child, n: number, seconds: number, before: Stats) {
  await sleep(2000);
  await child.ask({ cmd: 'reset' }, 'reset');
  await sleep(seconds * 1000);
  const s = await child.ask<Stats>({ cmd: 'stats' }, 'stats');
  return {
    framesPerSec: Math.round(s.count / seconds),
    p50: s.p50Ms,
    p99: s.p99Ms,
    loopP99: s.loopDelayP99Ms,
    cpuPctPerCall: (s.cpuUs / 1000 / s.wallMs / n) * 100,
    rssMbPerCall: Math.max(0, s.rss - before.rss) / 2 ** 20 / n,
  };
}

export async function run(): Promise<void> {
  transcoding();
  const seconds = Number(process.env.BENCH_SECONDS ?? 10);
  const levels = (process.env.BENCH_CALLS_LEVELS ?? '50,100,200,250,300,350,400,450,500').split(',').map(Number);
  const callsPerSecond = Number(process.env.BENCH_CALLS_PER_SECOND ?? 10);
  const db = await benchDatabase();
  const carrier = await forkChild(path.join(root, 'scripts/sandbox.ts'), ['carriers'], { PORT: '0', SPEED: '1', RING_MS: '50', LOG_LEVEL: 'silent' });
  const c = carrier.info;
  const child = path.join(import.meta.dirname, 'calls/child.ts');
  const voice = await forkChild(child, ['voice'], {});
  const service = await forkChild(
    child,
    ['service'],
    {
      VOICE_SERVICE_URL: voice.info.url,
      DATABASE_URL: db.url,
      ADMIN_TOKEN: ADMIN,
      PROVIDER_A_API_URL: c.providerAUrl,
      PROVIDER_B_API_URL: c.providerBUrl,
      CALL_SILENCE_TIMEOUT_MS: '0',
      DATABASE_POOL_MAX: '40',
    },
    profile(),
  );
  const relay = await forkChild(child, ['relay'], { VOICE_URL: voice.info.url });
  const apiKey = `KEY${randomBytes(12).toString('hex')}`;
  const number = answeringNumbers();
  try {
    const s = service.info.url;
    const { key } = await benchWorkspace(s, ADMIN, { name: 'Bench', concurrentSessions: 100_000, noDailyCap: true });
    const agent = await api(s, 'POST', '/api/v1/agents', key, {
      name: 'Bench',
      instruction: 'You are the receptionist of Acme Dental.',
      first_message: 'Hello! This is Acme Dental. How can I help you today?',
      provider_b_config: { api_key: apiKey, connection_id: '1234567', phone_number: '+14155550100', public_key: c.providerBPublicKey },
    });

    const rows: Array<Record<string, string | number>> = [];
    let bestService = 0;
    let bestRelay = 0;
    let serviceHolds = true;
    let relayHolds = true;
    for (const n of levels) {
      // The service: N calls placed through the API.
      const sBefore = await service.ask<Stats>({ cmd: 'stats' }, 'stats');
      // Calls arrive at BENCH_CALLS_PER_SECOND; the streams, not their set-up, are what this measures
      // (batches measure set-up rates). Refused ones (503, at capacity) are counted, not a failure.
      const { ids: callIds, refused } = await placeCalls({
        base: s,
        key,
        agentId: agent.agent_id,
        n,
        perSecond: callsPerSecond,
        carrier,
        script: TALKING_CALLEE,
        number,
      });
      await waitLive(service, n - refused);
      const svc = await measure(service, n, seconds, sBefore);
      // Every call of this level ends before the next (a hang-up refused under load is sent again).
      for (let attempt = 1; attempt <= 3; attempt++) {
        await Promise.all(callIds.map((id) => api(s, 'POST', `/api/v1/calls/${id}/hangup`, key).catch(() => undefined)));
        const over = await waitLive(service, 0, 20_000).then(
          () => true,
          () => false,
        );
        if (over) break;
        if (attempt === 3) console.log(`N=${n}: calls of this level still live after three rounds of hang-ups`);
      }

      // The relay: the same carrier streams N calls' frames to it.
      const rBefore = await relay.ask<Stats>({ cmd: 'stats' }, 'stats');
      const relayWs = relay.info.url.replace(/^http/, 'ws');
      const controlIds: string[] = [];
      for (let i = 0; i < n; i += 25) {
        const groupStart = Date.now();
        const batch = await Promise.all(
          Array.from({ length: Math.min(25, n - i) }, async () => {
            const to = number();
            carrier.proc.send({ cmd: 'script', to, script: TALKING_CALLEE });
            const r = await api(c.providerBUrl, 'POST', '/calls', apiKey, {
              connection_id: '1234567',
              to,
              from: '+14155550100',
              webhook_url: relay.info.url,
              stream_url: `${relayWs}/media`,
              stream_track: 'inbound_track',
              stream_bidirectional_mode: 'rtp',
              stream_bidirectional_codec: 'PCMU',
            });
            return r.data.call_control_id as string;
          }),
        );
        controlIds.push(...batch);
        await sleep(groupStart + (25 / callsPerSecond) * 1000 - Date.now());
      }
      await waitLive(relay, n);
      const bare = await measure(relay, n, seconds, rBefore);
      await Promise.all(
        controlIds.map((id) => api(c.providerBUrl, 'POST', `/calls/${encodeURIComponent(id)}/actions/hangup`, apiKey, {}).catch(() => undefined)),
      );
      await waitLive(relay, 0).catch(() => undefined);

      // The largest N below the first level that misses (a later level that passes, for instance because
      // calls failed under the load and stopped streaming, does not count).
      if (svc.p99 + svc.loopP99 < 10 && refused === 0 && serviceHolds) bestService = n;
      else serviceHolds = false;
      if (bare.p99 + bare.loopP99 < 10 && relayHolds) bestRelay = n;
      else relayHolds = false;
      rows.push({
        N: n,
        'service refused (at capacity)': refused,
        'service frames/s': svc.framesPerSec,
        'service p50 ms': svc.p50.toFixed(3),
        'service p99 ms': svc.p99.toFixed(3),
        'service loop p99 ms': svc.loopP99.toFixed(1),
        'relay frames/s': bare.framesPerSec,
        'relay p50 ms': bare.p50.toFixed(3),
        'relay p99 ms': bare.p99.toFixed(3),
        'relay loop p99 ms': bare.loopP99.toFixed(1),
        'service CPU %/call': svc.cpuPctPerCall.toFixed(2),
        'relay CPU %/call': bare.cpuPctPerCall.toFixed(2),
        'service MB/call': svc.rssMbPerCall.toFixed(2),
        'relay MB/call': bare.rssMbPerCall.toFixed(2),
      });
      console.log(JSON.stringify(rows.at(-1)));
      await sleep(2000);
    }
    table(rows);
    const ratio = bestRelay ? ((bestService / bestRelay) * 100).toFixed(0) : 'n/a';
    console.log(
      `Largest N with added p99 + loop-delay p99 < 10 ms: service ${bestService || 'none'}, relay ${bestRelay || 'none'} (${ratio}% of the relay; of ${levels.join(', ')}; ${seconds} s per phase).`,
    );
  } finally {
    for (const p of [service, relay, voice]) {
      p.proc.send({ cmd: 'exit' });
      await new Promise((r) => p.proc.once('exit', r));
    }
    carrier.proc.kill('SIGTERM');
    await new Promise((r) => carrier.proc.once('exit', r));
    await db.drop();
  }
}
