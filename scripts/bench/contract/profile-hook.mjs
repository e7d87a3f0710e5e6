/**
 * Loaded with `node --import` into the contract benchmark's server processes when BENCH_CPU_PROF or
 * BENCH_HEAP_PROF is set: `{cmd: 'profile-start', name}` over IPC starts a profile of the process
 * (cpu-profile.ts), `{cmd: 'profile-stop'}` writes it and answers `{profile: file}`. Plain JavaScript
 * so the compiled service runs under plain node as in production; node strips cpu-profile.ts's types.
 */
import { cpuProfiler } from '../cpu-profile.ts';

let profiler;
process.on('message', (m) => {
  if (m?.cmd === 'profile-start') {
    profiler = cpuProfiler(m.name);
    void profiler.start().then(() => process.send({ profiling: true }));
  } else if (m?.cmd === 'profile-stop') {
    void (profiler?.stop() ?? Promise.resolve(null)).then((file) => process.send({ profile: file }));
  }
});
// The channel must not keep a server that was told to stop alive, nor outlive the benchmark.
process.channel?.unref();
process.on('disconnect', () => process.exit(0));
