/**
 * Live events: `npm run bench -- events`.
 *
 * N concurrent sandbox phone calls (BENCH_EVENTS_CALLS, default 100) on one service, the sandbox
 * carriers and voice service each in a process of its own; each call's event stream is followed by an SSE client, and a
 * webhook listing `call.transcript` receives every utterance. Figures: the time from an utterance's
 * end in the bridge (its final transcript event queued by the conversation, `onLiveEvent`) to the SSE
 * client reading it, and to the webhook receiver having read the `call.transcript` request, p50/p99
 * (goal: SSE p99 under 100 ms at 100 calls). One process and one clock for all ends. The calls run
 * in rounds alternating an agent with recording off and one with it on (BENCH_EVENTS_ROUNDS, 3, the
 * first a warm-up), and each round's CPU time per call of this process is compared (goal: recording adds under
 * 10%), also per second of call (the calls' durations summed), since how long the calls talk varies
 * from round to round. Then recording alone (recordingAlone): its CPU per call-second against a
 * call-second with recording off.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { benchDatabase, cpuProfiler, forkChild, percentile, table } from './lib.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startService } from '../../src/service.js';
import { openSse } from '../../test/helpers/sse.js';
import { providerConfig, sandboxNumber } from '../../test/helpers/calls.js';
import type { RecordingService } from '../../src/recordings/service.js';

const ADMIN = 'bench-operator-token-0123456789';
const ms = (n: number) => Math.round(n * 10) / 10;
const keyOf = (conversationId: string, role: unknown, text: unknown) => `${conversationId}|${String(role)}|${String(text)}`;

async function api(base: string, method: string, path: string, token: string, body?: unknown): Promise<any> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await res.json().catch(() => null);
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/**
 * What recording alone costs this process, without the rest of a call around it (whose round-to-round
 * spread is larger than recording's share): `calls` recordings fed through the service's
 * RecordingService as a call's bridge feeds them (a caller frame and an agent frame of 20 ms mu-law each
 * per frame period, at CALL_AUDIO_RATE 2, so 100 frames a second each), written to the database
 * each RECORDING_FLUSH_MS, for BENCH_EVENTS_RECORDING_S seconds; CPU per call-second, the time to
 * complete them included.
 */
async function recordingAlone(recordings: RecordingService, workspaceId: string, calls: number): Promise<{ seconds: number; cpuMsPerCallSecond: number }> {
  const seconds = Number(process.env.BENCH_EVENTS_RECORDING_S ?? 10);
  const speech = fs.readFileSync(path.join(import.meta.dirname, '../../test/fixtures/audio/caller-question.ulaw-8k.raw'));
  const frames = Array.from({ length: Math.floor(speech.length / 160) }, (_, i) => speech.subarray(i * 160, (i + 1) * 160));
  const log = createLogger('silent');
  const profiler = cpuProfiler('events-recording-alone');
  await profiler.start();
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  const recorders = Array.from({ length: calls }, (_, i) =>
    recordings.startTwoChannel({ workspaceId, conversationId: `bench-recording-${Date.now()}-${i}`, kind: 'phone_call', sampleRate: 8000 }, log),
  );
  let tick = 0;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      // Frame periods due so far (10 ms each at twice real time), caught up if a tick was late.
      const due = Math.floor((performance.now() - started) / 10);
      for (; tick < due; tick++) {
        recorders.forEach((r, i) => {
          r.agent(Buffer.from(frames[(tick + i * 7 + 3) % frames.length]));
          r.person(frames[(tick + i * 7) % frames.length]);
        });
      }
      if (performance.now() - started >= seconds * 1000) {
        clearInterval(timer);
        resolve();
      }
    }, 20);
  });
  await Promise.all(recorders.map((r) => r.close()));
  const used = process.cpuUsage(cpuBefore);
  await profiler.stop();
  return { seconds, cpuMsPerCallSecond: (used.user + used.system) / 1000 / (calls * seconds) };
}

export async function run(): Promise<void> {
  const calls = Number(process.env.BENCH_EVENTS_CALLS ?? 100);
  const ended = new Map<string, number>();
  const toSse = new Map<string, number>();
  const toHook = new Map<string, number>();
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const e = JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>;
      if (e.event === 'call.transcript') toHook.set(keyOf(String(e.call_id), e.role, e.text), at);
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const db = await benchDatabase();
  // The carriers and the voice service are peers of the service: processes of their own, so the
  // service's process (whose loop carries the events) is not also doing their work.
  const sandbox = path.join(import.meta.dirname, '../sandbox.ts');
  const carriers = await forkChild(sandbox, ['carriers'], { PORT: '0', SPEED: '2', RING_MS: '40', LOG_LEVEL: 'silent' });
  const voice = await forkChild(sandbox, ['voice'], { PORT: '0', SPEED: '2', MS_PER_CHAR: '30', LOG_LEVEL: 'silent' });
  try {
    const config = loadConfig({
      PROVIDER_A_API_URL: carriers.info.providerAUrl,
      PROVIDER_B_API_URL: carriers.info.providerBUrl,
      VOICE_SERVICE_URL: voice.info.url,
      DATABASE_URL: db.url,
      DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'vas-bench-')),
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      CONTRACT_CHECK: 'off',
      ADMIN_TOKEN: ADMIN,
      CALL_AUDIO_RATE: '2',
      JOBS_POLL_INTERVAL_MS: '200',
      DATABASE_POOL_MAX: '30',
    });
    // The service as startBenchService runs it, told of each live event its conversations queue.
    const live = await startService(config, createLogger('silent'), {
      onLiveEvent: (conversationId, type, data) => {
        if (type === 'transcript' && data.final === true) {
          const key = keyOf(conversationId, data.role, data.text);
          if (!ended.has(key)) ended.set(key, performance.now());
        }
      },
    });
    try {
      const base = live.url;
      const signup = (await fetch(`${base}/api/v1/auth/signup`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ email: `bench-events-${Date.now()}@example.com`, password: 'long-enough-pw', workspace_name: 'Bench events' }),
      }).then((r) => r.json())) as { session_token: string; workspace: { id: string } };
      const key = (await api(base, 'POST', '/api/v1/keys', signup.session_token, { name: 'bench' })).key as string;
      await api(base, 'PATCH', `/admin/v1/workspaces/${signup.workspace.id}`, ADMIN, {
        concurrent_session_limit: calls + 10,
        credit_balance_cents: 100_000_000,
      });
      await api(base, 'POST', '/api/v1/webhooks', key, {
        url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
        events: ['call.transcript'],
      });
      const agentWith = (recording: boolean) =>
        api(base, 'POST', '/api/v1/agents', key, {
          name: 'Receptionist',
          instruction: 'You are the receptionist of Acme Dental.',
          first_message: 'Hello! This is Acme Dental.',
          can_end_conversation: true,
          recording: { enabled: recording },
          ...providerConfig('provider_a'),
        });
      const agents = { off: await agentWith(false), on: await agentWith(true) };
      const rows: Array<Record<string, string | number>> = [];
      const cpu: Record<string, number[]> = { off: [], on: [] };
      const cpuPerSecond: Record<string, number[]> = { off: [], on: [] };
      // Recording off, on, off, on...: the same calls each time, so the CPU difference is the recording's.
      const rounds = Number(process.env.BENCH_EVENTS_ROUNDS ?? 3);
      const rampMs = Number(process.env.BENCH_EVENTS_RAMP_MS ?? 5000);
      for (let round = 0; round < rounds; round++) {
        for (const mode of ['off', 'on'] as const) {
          ended.clear();
          toSse.clear();
          toHook.clear();
          const started = performance.now();
          const cpuBefore = process.cpuUsage();
          // BENCH_CPU_PROF=<dir>: a CPU profile of each round, events-round<r>-<off|on>-1.cpuprofile.
          const profiler = cpuProfiler(`events-round${round}-${mode}`);
          await profiler.start();
          // An overloaded instance refuses new calls (503); those are counted, not measured.
          // Calls arrive over BENCH_EVENTS_RAMP_MS (5 s), as callers do, not in one instant.
          // Each call's stream is opened as soon as the call is placed (as a live dashboard does): a
          // stream opened later replays what was said before, which is not delivery latency.
          const callIds: string[] = [];
          const attempts = await Promise.allSettled(
            Array.from({ length: calls }, async (_, i) => {
              await new Promise((r) => setTimeout(r, (rampMs * i) / calls));
              const call = await api(base, 'POST', '/api/v1/calls', key, { agent_id: agents[mode].agent_id, to_number: sandboxNumber() });
              callIds.push(call.call_id as string);
              return openSse(`${base}/api/v1/calls/${call.call_id}/events`, { Authorization: `Bearer ${key}` }, (m) => {
                if (m.event === 'transcript' && m.data.final) toSse.set(keyOf(String(m.data.conversation_id), m.data.role, m.data.text), performance.now());
              });
            }),
          );
          const streams = attempts.flatMap((a) => (a.status === 'fulfilled' ? [a.value] : []));
          const refused = attempts.length - streams.length;
          await Promise.all(streams.map((s) => s.ended));
          const used = process.cpuUsage(cpuBefore);
          await profiler.stop();
          // The webhook deliveries of the last utterances may still be on their way.
          const deadline = Date.now() + 15_000;
          while (toHook.size < ended.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
          const sse = [...toSse].flatMap(([k, at]) => (ended.has(k) ? [at - ended.get(k)!] : [])).sort((a, b) => a - b);
          const hook = [...toHook].flatMap(([k, at]) => (ended.has(k) ? [at - ended.get(k)!] : [])).sort((a, b) => a - b);
          const cpuMsPerCall = (used.user + used.system) / 1000 / Math.max(1, streams.length);
          // How long the calls talked varies from round to round (turns split or merged by timing), and
          // a recording's cost is per second of audio: CPU per second of call is the fair comparison.
          const callSeconds = (await Promise.all(callIds.map((id) => api(base, 'GET', `/api/v1/calls/${id}`, key)))).reduce(
            (sum, c) => sum + Number(c.duration ?? 0),
            0,
          );
          const cpuMsPerCallSecond = (used.user + used.system) / 1000 / Math.max(1, callSeconds);
          // The first round warms the code up (compilation, pools): shown, not counted.
          if (round > 0 || rounds === 1) {
            cpu[mode].push(cpuMsPerCall);
            cpuPerSecond[mode].push(cpuMsPerCallSecond);
          }
          rows.push({
            round: round === 0 && rounds > 1 ? '0 (warm-up)' : round,
            recording: mode,
            calls: streams.length,
            refused,
            utterances: ended.size,
            'SSE p50 / p99 ms': `${ms(percentile(sse, 50))} / ${ms(percentile(sse, 99))}`,
            'webhook p50 / p99 ms': `${ms(percentile(hook, 50))} / ${ms(percentile(hook, 99))}`,
            'CPU ms per call': ms(cpuMsPerCall),
            'call seconds': Math.round(callSeconds),
            'CPU ms per call-second': ms(cpuMsPerCallSecond),
            seconds: ms((performance.now() - started) / 1000),
          });
          console.log(JSON.stringify(rows.at(-1)));
        }
      }
      table(rows);
      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
      // Alone: once no call of the rounds is bridged here any more.
      const quiet = Date.now() + 30_000;
      while (live.telephony.media.size > 0 && Date.now() < quiet) await new Promise((r) => setTimeout(r, 100));
      await new Promise((r) => setTimeout(r, 1000));
      const alone = await recordingAlone(live.recordings, signup.workspace.id, calls);
      console.log(
        `Recording alone (${calls} phone recordings fed as the bridge feeds them, at the same audio rate, for ${alone.seconds} s): ` +
          `${ms(alone.cpuMsPerCallSecond)} ms CPU per call-second, ${((alone.cpuMsPerCallSecond / mean(cpuPerSecond.off)) * 100).toFixed(1)}% of a call-second with recording off.`,
      );
      console.log(
        `CPU per call (this process: service, SSE clients, receiver): recording off ${ms(mean(cpu.off))} ms, on ${ms(mean(cpu.on))} ms (${(((mean(cpu.on) - mean(cpu.off)) / mean(cpu.off)) * 100).toFixed(1)}%; goal under 10% more).`,
      );
      console.log(
        `CPU per second of call: recording off ${ms(mean(cpuPerSecond.off))} ms, on ${ms(mean(cpuPerSecond.on))} ms (${(((mean(cpuPerSecond.on) - mean(cpuPerSecond.off)) / mean(cpuPerSecond.off)) * 100).toFixed(1)}%).`,
      );
    } finally {
      await live.close();
    }
  } finally {
    receiver.closeAllConnections();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
    for (const child of [carriers, voice]) {
      child.proc.kill('SIGTERM');
      await new Promise((r) => child.proc.once('exit', r));
    }
    await db.drop();
  }
}
