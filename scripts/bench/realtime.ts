/**
 * Realtime sessions under load: N concurrent voice sessions, each sending a 20 ms audio frame (640 bytes
 * of PCM16 16 kHz, base64 in the JSON frame) 50 times a second through the service and its in-process
 * sandbox voice service, against a bare `ws` relay doing the same parse-decode-forward in the same run.
 * The audio is the fixtures' speech and silence in a loop, so the sandbox also answers with agent audio.
 * The process under load is a child (scripts/bench/realtime/child.ts); the clients run here.
 * Figures per N: frames/s handled, p50/p99 added latency per frame (receipt on the socket to hand-over
 * to the voice session), the event-loop delay p99 (how long an arrived frame can wait for its handler;
 * the handling time above does not include it), CPU (% of one core) and RSS per session; then the largest
 * N whose handling p99 + loop-delay p99 < 10 ms.
 * BENCH_SECONDS (default 10) is the length of each measured phase; BENCH_REALTIME_LEVELS (default
 * 10,25,50,100,200,300,400) the values of N.
 * The sandbox voice service runs in a process of its own (as production's voice service is a peer:
 * production requires VOICE_SERVICE_URL): the service uses it, and the relay opens a session on it per
 * client with the same setup and passes its audio and transcripts back, so neither side's figures
 * include the simulator and both carry the agent's audio to the client. BENCH_REALTIME_VOICE=service
 * runs it inside the service's process instead (the relay then sends to a sink), as the benchmark did
 * until 2026-11-26: the simulator's work is then counted against the service.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import WebSocket from 'ws';
import { benchDatabase, forkChild, table, type BenchChild } from './lib.js';
import type { ChildStats } from './child-stats.js';

const ADMIN = 'bench-operator-token-0123456789';
const FIXTURES = path.resolve(import.meta.dirname, '../../test/fixtures/audio');
const FRAME_BYTES = 640;

type Stats = ChildStats;

function audioFrames(): string[] {
  const clip = Buffer.concat(
    ['caller-question', 'silence-1s', 'caller-hello', 'silence-1s'].map((f) => readFileSync(path.join(FIXTURES, `${f}.pcm16le-16k.raw`))),
  );
  const frames: string[] = [];
  for (let i = 0; i + FRAME_BYTES <= clip.length; i += FRAME_BYTES) {
    frames.push(JSON.stringify({ mime_type: 'audio/pcm', data: clip.subarray(i, i + FRAME_BYTES).toString('base64') }));
  }
  return frames;
}

async function api(base: string, method: string, p: string, token: string | null, body?: unknown): Promise<Record<string, any>> {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, any>;
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** Opens n sockets (from distinct loopback addresses) and waits for each to start. */
async function openSockets(n: number, url: (i: number) => Promise<string>): Promise<WebSocket[]> {
  const sockets: WebSocket[] = [];
  for (let i = 0; i < n; i += 25) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(25, n - i) }, async (_, j) => {
        const k = i + j;
        const ws = new WebSocket(await url(k), { localAddress: `127.9.${Math.floor(k / 250)}.${(k % 250) + 1}`, perMessageDeflate: false });
        await new Promise<void>((resolve, reject) => {
          ws.on('message', (d) => {
            if (String(d).includes('session_started')) resolve();
          });
          ws.once('close', (code) => reject(new Error(`socket closed with ${code} before session_started`)));
          ws.once('error', reject);
        });
        return ws;
      }),
    );
    sockets.push(...batch);
  }
  return sockets;
}

/** Every socket sends one frame per 20 ms tick, each at its own offset into the clip. */
async function stream(sockets: WebSocket[], frames: string[], ms: number): Promise<number> {
  let tick = 0;
  let sent = 0;
  const started = performance.now();
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      // Catch up if a tick was late, so each socket keeps 50 frames/s on average.
      const due = Math.floor((performance.now() - started) / 20);
      for (; tick <= due; tick++) {
        for (let i = 0; i < sockets.length; i++) {
          sockets[i].send(frames[(tick + i * 37) % frames.length]);
          sent++;
        }
      }
      if (performance.now() - started >= ms) {
        clearInterval(timer);
        resolve();
      }
    }, 20);
  });
  return sent;
}

async function level(child: BenchChild, n: number, url: (i: number) => Promise<string>, frames: string[], seconds: number) {
  const before = await child.ask<Stats>({ cmd: 'stats' }, 'stats');
  const sockets = await openSockets(n, url);
  await stream(sockets, frames, 1000); // warm-up
  await child.ask({ cmd: 'reset' }, 'reset');
  const sent = await stream(sockets, frames, seconds * 1000);
  await new Promise((r) => setTimeout(r, 200));
  const s = await child.ask<Stats>({ cmd: 'stats' }, 'stats');
  await Promise.all(sockets.map((ws) => new Promise<void>((r) => (ws.readyState === ws.CLOSED ? r() : (ws.once('close', () => r()), ws.close(1000))))));
  return {
    framesPerSec: Math.round(s.count / seconds),
    sentPerSec: Math.round(sent / seconds),
    p50: s.p50Ms,
    p99: s.p99Ms,
    loopP99: s.loopDelayP99Ms,
    cpuPct: (s.cpuUs / 1000 / s.wallMs) * 100,
    cpuPctPerSession: (s.cpuUs / 1000 / s.wallMs / n) * 100,
    rssMbPerSession: Math.max(0, s.rss - before.rss) / 2 ** 20 / n,
  };
}

/** The child's CPU with no session at all (%, over `seconds`): its fixed work (the service's job polling, heartbeats...). */
async function idleCpuPct(child: BenchChild, seconds: number): Promise<number> {
  await child.ask({ cmd: 'reset' }, 'reset');
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const s = await child.ask<Stats>({ cmd: 'stats' }, 'stats');
  return (s.cpuUs / 1000 / s.wallMs) * 100;
}

export async function run(): Promise<void> {
  const seconds = Number(process.env.BENCH_SECONDS ?? 10);
  const levels = (process.env.BENCH_REALTIME_LEVELS ?? '10,25,50,100,200,300,400').split(',').map(Number);
  const frames = audioFrames();
  const db = await benchDatabase();
  const max = String(Math.max(...levels) * 4 + 100);
  const childFile = path.join(import.meta.dirname, 'realtime/child.ts');
  const voiceApart = process.env.BENCH_REALTIME_VOICE !== 'service';
  const voice = voiceApart ? await forkChild(childFile, ['voice'], {}) : null;
  const service = await forkChild(childFile, ['service'], {
    DATABASE_URL: db.url,
    ADMIN_TOKEN: ADMIN,
    REALTIME_SESSIONS_PER_HOUR: max,
    REALTIME_SESSIONS_PER_DAY: max,
    REALTIME_IP_ATTEMPTS: max,
    ...(voice ? { VOICE_SERVICE_URL: voice.info.url } : {}),
  });
  const relay = voice ? await forkChild(childFile, ['relay-voice'], { VOICE_URL: voice.info.url }) : await forkChild(childFile, ['relay'], {});
  console.log(
    voice
      ? 'Voice service: the sandbox in a process of its own, used by both.'
      : "Voice service: the sandbox inside the service's process; the relay sends to a sink (BENCH_REALTIME_VOICE=service).",
  );
  try {
    const s = service.info.url;
    const signup = await api(s, 'POST', '/api/v1/auth/signup', null, {
      email: `bench-${Date.now()}@example.com`,
      password: 'correct-horse-battery',
      workspace_name: 'Bench',
    });
    const key = (await api(s, 'POST', '/api/v1/keys', signup.session_token, { name: 'bench' })).key as string;
    await api(s, 'PATCH', `/admin/v1/workspaces/${signup.workspace.id}`, ADMIN, {
      plan: 'enterprise',
      concurrent_session_limit: 100_000,
      credit_balance_cents: 1_000_000_000,
    });
    const agent = await api(s, 'POST', '/api/v1/agents', key, {
      name: 'Bench',
      instruction: 'You are the receptionist of Acme Dental.',
      first_message: 'Hello! How can I help you today?',
    });
    const sessionUrl = async (i: number) =>
      (await api(s, 'POST', '/api/v1/realtime/sessions', key, { agent_id: agent.agent_id, user_id: `bench-${i}`, source: 'voice' })).ws_url as string;
    const relayUrl = async () => relay.info.url.replace(/^http/, 'ws') + '/relay';

    // Each side's fixed CPU with no session, measured apart so the per-session figures can be read without it.
    const idleSeconds = Math.min(seconds, 5);
    const idle = { service: await idleCpuPct(service, idleSeconds), relay: await idleCpuPct(relay, idleSeconds) };
    console.log(`CPU with no session (${idleSeconds} s): service ${idle.service.toFixed(3)}%, relay ${idle.relay.toFixed(3)}%.`);
    const net: string[] = [];
    const rows: Array<Record<string, string | number>> = [];
    let best = 0;
    let relayBest = 0;
    for (const n of levels) {
      const svc = await level(service, n, sessionUrl, frames, seconds);
      const bare = await level(relay, n, relayUrl, frames, seconds);
      if (svc.p99 + svc.loopP99 < 10) best = Math.max(best, n);
      if (bare.p99 + bare.loopP99 < 10) relayBest = Math.max(relayBest, n);
      rows.push({
        N: n,
        'sent frames/s': svc.sentPerSec,
        'service frames/s': svc.framesPerSec,
        'service p50 ms': svc.p50.toFixed(3),
        'service p99 ms': svc.p99.toFixed(3),
        'relay frames/s': bare.framesPerSec,
        'relay p50 ms': bare.p50.toFixed(3),
        'relay p99 ms': bare.p99.toFixed(3),
        'service loop delay p99 ms': svc.loopP99.toFixed(1),
        'relay loop delay p99 ms': bare.loopP99.toFixed(1),
        'service CPU %/session': svc.cpuPctPerSession.toFixed(3),
        'relay CPU %/session': bare.cpuPctPerSession.toFixed(3),
        'service MB/session': svc.rssMbPerSession.toFixed(2),
        'relay MB/session': bare.rssMbPerSession.toFixed(2),
      });
      console.log(JSON.stringify(rows.at(-1)));
      net.push(`${((svc.cpuPct - idle.service) / (bare.cpuPct - idle.relay)).toFixed(2)}x at N=${n}`);
      // Let the sessions finalise (records, events) before the next level.
      await new Promise((r) => setTimeout(r, 1000));
    }
    table(rows);
    console.log(`Largest N measured with service handling p99 + loop-delay p99 < 10 ms: ${best || 'none'} (of ${levels.join(', ')}; ${seconds} s per phase).`);
    console.log(
      `The same for the relay: ${relayBest || 'none'}; the service holds ${relayBest ? `${Math.round((100 * best) / relayBest)}%` : '-'} of the relay's N (goal: at least 90%).`,
    );
    const ratios = rows.map((r) => `${(Number(r['service CPU %/session']) / Number(r['relay CPU %/session'])).toFixed(2)}x at N=${r.N}`);
    console.log(`CPU per session, service / relay: ${ratios.join(', ')} (goal: within 1.2x).`);
    console.log(`The same without each side's CPU with no session: ${net.join(', ')}.`);
  } finally {
    for (const c of [service, relay, ...(voice ? [voice] : [])]) {
      c.proc.send({ cmd: 'exit' });
      await new Promise((r) => c.proc.once('exit', r));
    }
    await db.drop();
  }
}
