/**
 * BENCH_CPU_PROF=<dir>: a V8 CPU profile of each measured phase of a benchmark, written to
 * <dir>/<name>-<n>.cpuprofile (open it in Chrome DevTools or speedscope as a flame graph). Without it,
 * start and stop do nothing. Its own module, so the relay children load nothing of the service.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Session } from 'node:inspector/promises';

export function cpuProfiler(name: string): { start(): Promise<void>; stop(): Promise<string | null> } {
  const dir = process.env.BENCH_CPU_PROF;
  let session: Session | undefined;
  let n = 0;
  return {
    async start() {
      if (!dir || session) return;
      session = new Session();
      session.connect();
      await session.post('Profiler.enable');
      await session.post('Profiler.start');
    },
    async stop() {
      if (!dir || !session) return null;
      const { profile } = await session.post('Profiler.stop');
      session.disconnect();
      session = undefined;
      fs.mkdirSync(dir, { recursive: true });
      const file = path.resolve(dir, `${name}-${++n}.cpuprofile`);
      fs.writeFileSync(file, JSON.stringify(profile));
      return file;
    },
  };
}
