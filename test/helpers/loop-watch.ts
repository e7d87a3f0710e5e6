/**
 * How long the event loop of this process was blocked by work while something ran: the longest gap
 * between ticks of a 10 ms interval timer, less the interval, counted only as far as the process used
 * CPU in that gap. On a busy machine the process also waits for a core, which delays the timer
 * without anything blocking the loop; `gapMs` keeps the whole gap for the report. The test service
 * runs in the test's process, so a request it handles on its loop shows here. (perf_hooks'
 * monitorEventLoopDelay is not used: its reset() forgets the last tick, so a block right after a reset
 * is never recorded, and it cannot tell work from waiting for a core.)
 */
const INTERVAL_MS = 10;

export interface LoopBlock {
  /** The longest block by work: min(gap, CPU time used in the gap), less the timer's interval. */
  blockedMs: number;
  /** The longest gap between ticks, less the interval, however it came about. */
  gapMs: number;
}

export interface LoopWatch {
  /** Runs `fn` and returns its value with the longest block of the loop while it ran. */
  measure<T>(fn: () => Promise<T>): Promise<{ value: T } & LoopBlock>;
  stop(): void;
}

/**
 * CPU time of this thread, the event loop's (Node 23.9+): the process's total would count the worker
 * threads too (the schema and extraction pools compiling a tenant's schema or a PDF beside the loop),
 * which take cores, not the loop.
 */
export const cpuMs = (): number => {
  // Declared by @types/node 24, absent at run time on older Node (20 has none): the total stands in.
  const u = typeof process.threadCpuUsage === 'function' ? process.threadCpuUsage() : process.cpuUsage();
  return (u.user + u.system) / 1000;
};

export function loopWatch(): LoopWatch {
  let last = performance.now();
  let lastCpu = cpuMs();
  let worst: LoopBlock = { blockedMs: 0, gapMs: 0 };
  const tick = () => {
    const now = performance.now();
    const cpu = cpuMs();
    const gap = now - last - INTERVAL_MS;
    const blocked = Math.min(now - last, cpu - lastCpu) - INTERVAL_MS;
    worst = { blockedMs: Math.max(worst.blockedMs, blocked, 0), gapMs: Math.max(worst.gapMs, gap, 0) };
    last = now;
    lastCpu = cpu;
  };
  const timer = setInterval(tick, INTERVAL_MS);
  timer.unref();
  return {
    async measure(fn) {
      // What blocked the loop before `fn` (the caller's own work) is not `fn`'s: start the gap now.
      last = performance.now();
      lastCpu = cpuMs();
      worst = { blockedMs: 0, gapMs: 0 };
      const value = await fn();
      // A block just before `fn` ended leaves the interval overdue: a timer due now runs after it.
      await new Promise((resolve) => setTimeout(resolve, 0));
      tick();
      return { value, ...worst };
    },
    stop: () => clearInterval(timer),
  };
}
