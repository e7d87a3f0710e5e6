/**
 * BENCH_CPU_PROF=<dir>: a V8 CPU profile of each measured phase of a benchmark, written to
 * <dir>/<name>-<n>.cpuprofile (open it in Chrome DevTools or speedscope as a flame graph).
 * BENCH_HEAP_PROF=<dir>: a sampling profile of what each phase allocates, garbage included, written to
 * <dir>/<name>-<n>.heapprofile (Chrome DevTools, Memory): where the collector's work comes from.
 * Without either, start and stop do nothing. Its own module, so the relay children load nothing of
 * the service.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Session } from 'node:inspector/promises';

export function cpuProfiler(name: string): { start(): Promise<void>; stop(): Promise<string | null> } {
  const cpuDir = process.env.BENCH_CPU_PROF;
  const heapDir = process.env.BENCH_HEAP_PROF;
  let session: Session | undefined;
  let n = 0;
  const write = (dir: string, ext: string, profile: unknown) => {
    fs.mkdirSync(dir, { recursive: true });
    const file = path.resolve(dir, `${name}-${n}.${ext}`);
    fs.writeFileSync(file, JSON.stringify(profile));
    return file;
  };
  return {
    async start() {
      if ((!cpuDir && !heapDir) || session) return;
      session = new Session();
      session.connect();
      if (cpuDir) {
        await session.post('Profiler.enable');
        await session.post('Profiler.start');
      }
      if (heapDir) {
        await session.post('HeapProfiler.enable');
        await session.post('HeapProfiler.startSampling', {
          samplingInterval: 16384,
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        });
      }
    },
    async stop() {
      if (!session) return null;
      n++;
      let file: string | null = null;
      if (cpuDir) file = write(cpuDir, 'cpuprofile', (await session.post('Profiler.stop')).profile);
      if (heapDir) file = write(heapDir, 'heapprofile', (await session.post('HeapProfiler.stopSampling')).profile);
      session.disconnect();
      session = undefined;
      return file;
    },
  };
}
