/**
 * SIP calls against WebSocket media streams: `npm run bench -- sip` (issue 33).
 *
 * At each N, in the same service process one after the other:
 * - SIP: N concurrent calls from sipp (Debian's sip-tester) through a trunk that lets loopback in by
 *   source, to an agent bound to the trunk's number; RTP both ways: sipp plays the fixtures' caller
 *   speech (with pauses, so the agent answers) as each call's RTP, and the service sends the agent's
 *   audio, silence between turns, one 20 ms packet at a time on its pacer. Every packet of ours is
 *   timed at the receiving end, by a UDP receiver of ours (scripts/bench/sip/receiver.ts) at the port
 *   sipp's offer names for the call: sipp keeps no arrival times. The figure is how far each packet
 *   arrives behind its schedule (the stream's RTP clock, anchored at its earliest packet in the
 *   window): p99 over every packet of every call.
 * - provider_a: N concurrent calls placed through the API to the sandbox carrier (a process of its
 *   own), whose media streams (WebSocket, 20 ms frames both ways) carry a simulated caller talking.
 *   The service does not pace these frames (the carrier plays them out), so their real-time figure is
 *   the calls benchmark's: the added latency p99 of a caller frame plus the event-loop delay p99.
 * Both use the same agent settings and the same sandbox voice service (a process of its own). Per N:
 * the service process's CPU per call (user + system, % of one core), its event-loop delay p99 and
 * caller-frame p99 for both; then the largest N (stepping up, stopping at the first miss) with our
 * RTP's lateness p99 under 10 ms for SIP and with frame p99 + loop p99 under 10 ms for provider_a,
 * and whether the goal holds: SIP carries at least as many calls as the WebSocket carrier with less
 * CPU per call.
 *
 * Needs `sipp` on the PATH and root (or CAP_NET_RAW) for sipp's pcap play, as test/sip/ does.
 * BENCH_SECONDS (default 10) is each measured phase; BENCH_SIP_LEVELS (default 25,50,100,150,200) the
 * values of N, stepped up until both sides missed (BENCH_SIP_EVERY_LEVEL=1 runs them all, for CPU per
 * call at each N on a busy machine); BENCH_SIP_CALLS_PER_SECOND (default 20) the rate calls are placed
 * at on both sides. CPU per call is the service's above its CPU with no call (measured first).
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { api, benchDatabase, benchWorkspace, forkChild, peerEnv, answeringNumbers, placeCalls, table, TALKING_CALLEE, type BenchChild } from './lib.js';
import type { ChildStats } from './child-stats.js';
import type { RtpFigures } from './sip/receiver.js';
import { rtpPcap } from './sip/pcap.js';
import { freePort, LOOPBACK } from '../../test/helpers/sipp.js';

const ADMIN = 'bench-operator-token-0123456789';
const root = path.resolve(import.meta.dirname, '../..');
const SIP_NUMBER = '+14155550160';
/** Under this p99 (ms) a level holds. */
const BUDGET_MS = 10;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** Live media streams of the service, polled until `n` or the deadline: the count reached. */
async function waitLive(service: BenchChild, n: number, timeoutMs: number, atMost = false): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { live } = await service.ask<ChildStats>({ cmd: 'stats' }, 'stats');
    if (atMost ? live <= n : live >= n) return live;
    if (Date.now() > deadline) return live;
    await sleep(200);
  }
}

interface Phase {
  live: number;
  stats: ChildStats;
  rtp?: RtpFigures;
}

/** Settles, then one measured window of the service (and the receiver, for SIP). */
async function measure(service: BenchChild, seconds: number, receiver?: BenchChild): Promise<Omit<Phase, 'live'>> {
  await sleep(2000);
  await Promise.all([service.ask({ cmd: 'reset' }, 'reset'), receiver?.ask({ cmd: 'reset' }, 'reset')]);
  await sleep(seconds * 1000);
  const [stats, rtp] = await Promise.all([service.ask<ChildStats>({ cmd: 'stats' }, 'stats'), receiver?.ask<RtpFigures>({ cmd: 'stats' }, 'rtp')]);
  return { stats, rtp };
}

/** The caller's side of every SIP call: the fixtures' question, then four seconds of silence, over and over. */
function callerPcap(dir: string, seconds: number): string {
  const speech = fs.readFileSync(path.join(root, 'test/fixtures/audio/caller-question.ulaw-8k.raw'));
  const cycle: Buffer[] = [];
  for (let i = 0; i + 160 <= speech.length; i += 160) cycle.push(speech.subarray(i, i + 160));
  for (let i = 0; i < 200; i++) cycle.push(Buffer.alloc(160, 0xff));
  const frames = Array.from({ length: Math.ceil((seconds * 1000) / 20) }, (_, k) => cycle[k % cycle.length]);
  const file = path.join(dir, 'caller.pcap');
  fs.writeFileSync(file, rtpPcap(frames, 0));
  return file;
}

/** sipp placing `n` calls at `rate` per second to `target`, each held until the service's BYE. */
function startSipp(o: { scenario: string; target: string; n: number; rate: number; mediaBase: number; sipPort: number; timeoutS: number; cwd: string }) {
  const args = [
    o.target,
    '-sf',
    o.scenario,
    '-m',
    String(o.n),
    '-l',
    String(o.n),
    '-r',
    String(o.rate),
    '-rp',
    '1000',
    '-i',
    LOOPBACK,
    '-p',
    String(o.sipPort),
    '-mi',
    LOOPBACK,
    '-mp',
    String(o.mediaBase),
    '-s',
    SIP_NUMBER,
    '-t',
    'u1',
    '-aa',
    '-nostdin',
    '-timeout',
    `${o.timeoutS}s`,
    '-timeout_error',
  ];
  const child = spawn('sipp', args, { cwd: o.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (d: Buffer) => (out = (out + d.toString()).slice(-4000));
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const done = new Promise<{ code: number | null; out: string }>((resolve) => {
    child.once('error', (err) => resolve({ code: -1, out: `${out}\n${err.message}` }));
    child.once('close', (code) => resolve({ code, out }));
  });
  return { done, kill: () => child.kill('SIGKILL') };
}

export async function run(): Promise<void> {
  if (spawnSync('sipp', ['-v']).error) throw new Error('sipp is not on the PATH (Debian: apt-get install sip-tester)');
  if (process.getuid?.() !== 0)
    console.log("Not root: sipp's pcap play needs CAP_NET_RAW, without which the SIP calls carry no caller audio (see 'SIP in frames/s/call').");
  const seconds = Number(process.env.BENCH_SECONDS ?? 10);
  const levels = (process.env.BENCH_SIP_LEVELS ?? '25,50,100,150,200').split(',').map(Number);
  const rate = Number(process.env.BENCH_SIP_CALLS_PER_SECOND ?? 20);
  const everyLevel = process.env.BENCH_SIP_EVERY_LEVEL === '1';
  const maxN = Math.max(...levels);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-bench-sip-'));
  // Long enough for the slowest set-up of the largest level, its window and the hang-ups.
  const pcap = callerPcap(dir, maxN / rate + 30 + seconds + 30);
  const scenario = path.join(dir, 'uac-bench.xml');
  fs.writeFileSync(scenario, fs.readFileSync(path.join(import.meta.dirname, 'sip/uac-bench.xml'), 'utf8').replaceAll('@PCAP@', pcap));

  const db = await benchDatabase();
  const carrier = await forkChild(path.join(root, 'scripts/sandbox.ts'), ['carriers'], { PORT: '0', SPEED: '1', RING_MS: '50', LOG_LEVEL: 'silent' });
  const child = path.join(import.meta.dirname, 'calls/child.ts');
  const voice = await forkChild(child, ['voice'], {});
  const sipPort = await freePort();
  const service = await forkChild(child, ['service'], {
    ...peerEnv({ databaseUrl: db.url, voiceUrl: voice.info.url, carrier, adminToken: ADMIN }),
    DATABASE_POOL_MAX: '40',
    SIP_PORT: String(sipPort),
    SIP_HOST: LOOPBACK,
    SIP_ADVERTISED_ADDRESS: LOOPBACK,
    SIP_RTP_PORT_MIN: '10000',
    SIP_RTP_PORT_MAX: String(10_000 + Math.max(2_000, 4 * maxN)),
  });
  const receiver = await forkChild(path.join(import.meta.dirname, 'sip/receiver.ts'), [], {});
  const number = answeringNumbers();
  try {
    const s = service.info.url;
    const { key } = await benchWorkspace(s, ADMIN, { name: 'Bench SIP', concurrentSessions: 100_000, noDailyCap: true });
    const agentBody = {
      name: 'Bench',
      instruction: 'You are the receptionist of Acme Dental.',
      first_message: 'Hello! This is Acme Dental. How can I help you today?',
    };
    const trunk = await api(s, 'POST', '/api/v1/sip-trunks', key, { name: 'Bench PBX', inbound: { allowed_sources: [LOOPBACK], numbers: [SIP_NUMBER] } });
    await api(s, 'POST', '/api/v1/agents', key, { ...agentBody, sip_config: { trunk_id: trunk.trunk_id, phone_number: SIP_NUMBER } });
    const providerAAgent = await api(s, 'POST', '/api/v1/agents', key, {
      ...agentBody,
      provider_a_config: { account_sid: `AC${randomBytes(16).toString('hex')}`, auth_token: randomBytes(16).toString('hex'), phone_number: '+14155550100' },
    });

    /** Hangs up the calls `ids` lists (again, for hang-ups refused under load) until no stream is live. */
    const hangUpAll = async (ids: () => Promise<string[]>) => {
      for (let round = 0; round < 3; round++) {
        await Promise.all((await ids()).map((id) => api(s, 'POST', `/api/v1/calls/${id}/hangup`, key).catch(() => undefined)));
        if ((await waitLive(service, 0, 20_000, true)) === 0) return;
      }
      console.log('calls still live after three rounds of hang-ups');
    };
    const inProgress = async (direction: string) => {
      const ids: string[] = [];
      for (let cursor: string | null = null; ;) {
        const page = await api(s, 'GET', `/api/v1/calls?direction=${direction}&status=in_progress&limit=100${cursor ? `&starting_after=${cursor}` : ''}`, key);
        ids.push(...(page.data as Array<{ call_id: string }>).map((c) => c.call_id));
        if (!page.has_more) return ids;
        cursor = page.next_cursor as string;
      }
    };

    const sipPhase = async (n: number): Promise<Phase> => {
      const base = await receiver.ask<number>({ cmd: 'open', n }, 'opened');
      if (base < 0) throw new Error('the RTP receiver found no free ports');
      const sipp = startSipp({
        scenario,
        target: `${LOOPBACK}:${sipPort}`,
        n,
        rate,
        mediaBase: base,
        sipPort: await freePort(),
        timeoutS: Math.ceil(n / rate + 30 + seconds + 60),
        cwd: dir,
      });
      const live = await waitLive(service, n, (n / rate) * 1000 + 30_000);
      const m = live > 0 ? await measure(service, seconds, receiver) : null;
      await hangUpAll(() => inProgress('inbound'));
      const ended = await Promise.race([sipp.done, sleep(30_000).then(() => null)]);
      if (!ended) sipp.kill();
      const result = ended ?? (await sipp.done);
      if (result.code !== 0) console.log(`N=${n}: sipp ended with ${result.code}:\n${result.out.slice(-1500)}`);
      await receiver.ask({ cmd: 'close' }, 'closed');
      if (!m) throw new Error(`N=${n}: no SIP call went live`);
      return { live, ...m };
    };

    const providerAPhase = async (n: number): Promise<Phase & { refused: number }> => {
      const { ids, refused } = await placeCalls({
        base: s,
        key,
        agentId: providerAAgent.agent_id,
        n,
        perSecond: rate,
        carrier,
        script: TALKING_CALLEE,
        number,
      });
      const live = await waitLive(service, n - refused, 60_000);
      const m = await measure(service, seconds);
      await hangUpAll(async () => ids);
      return { live, ...m, refused };
    };

    const rows: Array<Record<string, string | number>> = [];
    // sipLoop: SIP by provider_a's own measure (caller-frame p99 + loop p99), for a like-for-like reading.
    const held = { sip: 0, providerA: 0, sipLoop: 0 };
    const holding = { sip: true, providerA: true, sipLoop: true };
    // The service's CPU with no call at all (its timers and polls) is taken off before dividing by the calls.
    const cpuPct = (st: ChildStats) => (st.cpuUs / 1000 / st.wallMs) * 100;
    const idle = cpuPct((await measure(service, seconds)).stats);
    console.log(`The service with no call: ${idle.toFixed(2)}% of a core.`);
    const cpuPerCall = (p: Phase) => (cpuPct(p.stats) - idle) / Math.max(1, p.live);
    // CPU per call at the levels where both held, and (for a busy machine, where none may) where every call was live.
    const bothHeld: Array<{ n: number; sip: number; providerA: number }> = [];
    const allLive: Array<{ n: number; sip: number; providerA: number }> = [];
    for (const n of levels) {
      const sip = await sipPhase(n);
      await sleep(2000);
      const pa = await providerAPhase(n);
      await sleep(2000);
      const rtp = sip.rtp!;
      const sipOk = sip.live === n && rtp.lateP99Ms < BUDGET_MS;
      const paOk = pa.refused === 0 && pa.live === n && pa.stats.p99Ms + pa.stats.loopDelayP99Ms < BUDGET_MS;
      if (sipOk && holding.sip) held.sip = n;
      else holding.sip = false;
      if (sip.live === n && sip.stats.p99Ms + sip.stats.loopDelayP99Ms < BUDGET_MS && holding.sipLoop) held.sipLoop = n;
      else holding.sipLoop = false;
      if (paOk && holding.providerA) held.providerA = n;
      else holding.providerA = false;
      const cpu = { n, sip: cpuPerCall(sip), providerA: cpuPerCall(pa) };
      if (sipOk && paOk) bothHeld.push(cpu);
      if (sip.live === n && pa.live === n) allLive.push(cpu);
      rows.push({
        N: n,
        'SIP live': sip.live,
        'SIP RTP late p50/p99/max ms': `${rtp.lateP50Ms.toFixed(1)}/${rtp.lateP99Ms.toFixed(1)}/${rtp.lateMaxMs.toFixed(0)}`,
        'SIP interval err p99 ms': rtp.intervalErrorP99Ms.toFixed(1),
        'SIP pkts/s/call': (rtp.packets / (rtp.wallMs / 1000) / Math.max(1, rtp.streams)).toFixed(1),
        'SIP lost': rtp.lost,
        'receiver loop p99 ms': rtp.receiverLoopP99Ms.toFixed(1),
        'SIP frame/loop p99 ms': `${sip.stats.p99Ms.toFixed(2)}/${sip.stats.loopDelayP99Ms.toFixed(1)}`,
        'SIP in frames/s/call': (sip.stats.count / seconds / Math.max(1, sip.live)).toFixed(1),
        'pA live (refused)': `${pa.live} (${pa.refused})`,
        'pA frame/loop p99 ms': `${pa.stats.p99Ms.toFixed(2)}/${pa.stats.loopDelayP99Ms.toFixed(1)}`,
        'pA in frames/s/call': (pa.stats.count / seconds / Math.max(1, pa.live)).toFixed(1),
        'SIP CPU %/call above idle': cpuPerCall(sip).toFixed(2),
        'pA CPU %/call above idle': cpuPerCall(pa).toFixed(2),
        'load avg': os.loadavg()[0].toFixed(1),
      });
      console.log(JSON.stringify(rows.at(-1)));
      if (!holding.sip && !holding.providerA && !everyLevel) {
        const left = levels.slice(levels.indexOf(n) + 1);
        if (left.length) console.log(`Both missed at N=${n}: ${left.join(', ')} not run.`);
        break;
      }
    }
    table(rows);
    const cheaper = bothHeld.length > 0 && bothHeld.every((l) => l.sip < l.providerA);
    console.log(
      `Largest N (of ${levels.join(', ')}; ${seconds} s windows, ${rate} calls/s): SIP ${held.sip || 'none'} with our RTP's lateness p99 at the receiver < ${BUDGET_MS} ms; ` +
        `provider_a ${held.providerA || 'none'} with caller-frame p99 + event-loop delay p99 < ${BUDGET_MS} ms (SIP by that measure: ${held.sipLoop || 'none'}).`,
    );
    const cpuLine = (ls: typeof bothHeld) =>
      ls.map((l) => `N=${l.n} SIP ${l.sip.toFixed(2)}% vs provider_a ${l.providerA.toFixed(2)}% (${((l.sip / l.providerA) * 100).toFixed(0)}%)`).join('; ');
    console.log(bothHeld.length ? `CPU per call above idle where both held: ${cpuLine(bothHeld)}.` : 'No level where both held.');
    if (allLive.length) console.log(`CPU per call above idle where every call of both was live: ${cpuLine(allLive)}.`);
    const met = held.sip >= held.providerA && held.sip > 0 && cheaper;
    console.log(`Goal (SIP carries at least as many calls as the WebSocket carrier, with less CPU per call): ${met ? 'met' : 'not met'}.`);
  } finally {
    for (const p of [service, voice]) {
      p.proc.send({ cmd: 'exit' });
      await new Promise((r) => p.proc.once('exit', r));
    }
    for (const p of [carrier, receiver]) {
      p.proc.kill('SIGTERM');
      await new Promise((r) => p.proc.once('exit', r));
    }
    await db.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
