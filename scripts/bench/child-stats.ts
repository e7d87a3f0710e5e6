/**
 * The figures a benchmark's child process keeps and reports over IPC (the realtime and calls
 * benchmarks' processes under load): per-frame handling times, event-loop delay, CPU, RSS.
 * `{cmd: 'reset'}` clears them (answers `{reset: true}`), `{cmd: 'stats'}` answers `{stats}`,
 * `{cmd: 'exit'}` runs `onExit` then exits.
 * With BENCH_CPU_PROF=<dir>, each measured phase (reset to stats) is also recorded as a V8 CPU profile
 * in that directory (cpu-profile.ts).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { cpuProfiler } from './cpu-profile.js';

export interface ChildStats {
  count: number;
  p50Ms: number;
  p99Ms: number;
  loopDelayP99Ms: number;
  cpuUs: number;
  wallMs: number;
  rss: number;
  /** Streams or sessions live now (when the child reports it). */
  live: number;
}

export function childStats(opts: { live?: () => number; onExit?: () => Promise<unknown> } = {}): { record(ns: bigint): void; setLive(fn: () => number): void } {
  let samples: number[] = [];
  let cpu = process.cpuUsage();
  let wall = performance.now();
  let live = opts.live ?? (() => 0);
  // How long a message that has arrived may wait before its handler runs.
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  loopDelay.enable();
  const profiler = cpuProfiler(`${process.argv[2] ?? 'child'}-${process.pid}`);

  const stats = (): ChildStats => {
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
      live: live(),
    };
  };

  // Orphaned (the benchmark stopped without saying goodbye): go too.
  process.on('disconnect', () => process.exit(0));
  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'reset') {
      samples = [];
      cpu = process.cpuUsage();
      wall = performance.now();
      loopDelay.reset();
      void profiler.start().then(() => process.send!({ reset: true }));
    } else if (m.cmd === 'stats') {
      const s = stats();
      void profiler.stop().then(() => process.send!({ stats: s }));
    } else if (m.cmd === 'exit') {
      void (opts.onExit?.() ?? Promise.resolve()).finally(() => process.exit(0));
    }
  });

  return {
    record: (ns: bigint) => samples.push(Number(ns) / 1e6),
    setLive: (fn) => (live = fn),
  };
}
