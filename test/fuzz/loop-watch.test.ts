/** The fuzzing's measure of a blocked event loop (test/helpers/loop-watch.ts). */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { loopWatch } from '../helpers/loop-watch.js';

/** Keeps the loop busy until this process has used `ms` of CPU, however long a busy machine takes. */
function burn(ms: number): void {
  const start = process.cpuUsage();
  for (;;) {
    const used = process.cpuUsage(start);
    if ((used.user + used.system) / 1000 >= ms) return;
  }
}

describe('loop watch', () => {
  it('counts the CPU a synchronous block used, and little for turns of the loop', async () => {
    const watch = loopWatch();
    try {
      const busy = await watch.measure(async () => {
        await new Promise((resolve) => setImmediate(resolve));
        burn(300);
      });
      assert.ok(busy.blockedMs >= 250, `a block of 300 ms of CPU measured as ${busy.blockedMs} ms`);
      assert.ok(busy.gapMs >= busy.blockedMs);
      const idle = await watch.measure(async () => {
        for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
      });
      assert.ok(idle.blockedMs < busy.blockedMs / 2, `turns of the loop measured as a block of ${idle.blockedMs} ms`);
    } finally {
      watch.stop();
    }
  });
});
