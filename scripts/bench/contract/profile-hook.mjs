/**
 * Loaded with `node --import` into the contract benchmark's server processes when BENCH_CPU_PROF,
 * BENCH_HEAP_PROF or BENCH_GC is set: `{cmd: 'profile-start', name}` over IPC starts a profile of the
 * process (cpu-profile.ts), `{cmd: 'profile-stop'}` writes it and answers `{profile: file}`;
 * `{cmd: 'gc'}` answers `{gc}`, the collections so far (BENCH_GC: counted from node's `gc` performance
 * entries). Plain JavaScript so the compiled service runs under plain node as in production; node
 * strips cpu-profile.ts's types.
 */
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { cpuProfiler } from '../cpu-profile.ts';

const gc = { scavenges: 0, scavengeMs: 0, others: 0, otherMs: 0 };
if (process.env.BENCH_GC) {
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      if (entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR) {
        gc.scavenges++;
        gc.scavengeMs += entry.duration;
      } else {
        gc.others++;
        gc.otherMs += entry.duration;
      }
    }
  }).observe({ entryTypes: ['gc'] });
}

let profiler;
process.on('message', (m) => {
  if (m?.cmd === 'profile-start') {
    profiler = cpuProfiler(m.name);
    void profiler.start().then(() => process.send({ profiling: true }));
  } else if (m?.cmd === 'gc') {
    process.send({ gc });
  } else if (m?.cmd === 'profile-stop') {
    void (profiler?.stop() ?? Promise.resolve(null)).then((file) => process.send({ profile: file }));
  }
});
// The channel must not keep a server that was told to stop alive, nor outlive the benchmark.
process.channel?.unref();
process.on('disconnect', () => process.exit(0));
