/**
 * The overload guard (src/system/overload.ts) on its own: queries waiting for a database connection
 * through two windows make the instance busy (a shorter burst does not), an event loop held busy
 * makes it busy after two slow windows running (one does not), and two windows at ease running clear either. The loop here is this
 * test's own, blocked on purpose.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { OverloadGuard } from '../../src/system/overload.js';

const silent = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function waitUntil(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(20);
  }
}
const block = (ms: number) => {
  const until = Date.now() + ms;
  while (Date.now() < until);
};

describe('overload guard', () => {
  it('is busy once dbWaiting queries kept waiting for a connection through two windows; a burst does not count', async () => {
    let waiting = 0;
    const guard = new OverloadGuard({ loopDelayMs: 0, dbWaiting: 3, sampleMs: 100 }, () => waiting, silent);
    guard.start();
    try {
      // A burst shorter than a window: not starved.
      waiting = 10;
      await sleep(40);
      waiting = 0;
      await sleep(350);
      assert.equal(guard.reason(), null, 'a burst of waiting queries does not count');
      // Waiting all along.
      waiting = 3;
      await waitUntil(() => guard.reason() !== null);
      assert.match(guard.reason() ?? '', /3 or more database queries keep waiting/);
      waiting = 2;
      await waitUntil(() => guard.reason() === null);
    } finally {
      guard.stop();
    }
  });

  it('watches nothing when both signals are 0', async () => {
    const guard = new OverloadGuard({ loopDelayMs: 0, dbWaiting: 0, sampleMs: 50 }, () => 1_000, silent);
    guard.start();
    await sleep(200);
    assert.equal(guard.reason(), null);
    guard.stop();
  });

  it('is busy after two windows of a delayed event loop, not after one, and clear after two at ease', async () => {
    const guard = new OverloadGuard({ loopDelayMs: 100, dbWaiting: 0, sampleMs: 300 }, () => 0, silent);
    guard.start();
    try {
      // One blocked stretch (a long garbage collection, say): one slow window at most.
      await sleep(400);
      block(200);
      await sleep(10);
      assert.equal(guard.reason(), null, 'one slow window does not count');
      // Blocked in every window for a while.
      const deadline = Date.now() + 10_000;
      let busy: string | null = null;
      while (busy === null && Date.now() < deadline) {
        block(200);
        await sleep(5);
        busy = guard.reason();
      }
      assert.match(busy ?? '', /event loop is delayed over 100 ms/);
      // At ease again: two windows of normal delay clear it.
      const calm = Date.now() + 10_000;
      while (guard.reason() !== null && Date.now() < calm) await sleep(20);
      assert.equal(guard.reason(), null);
    } finally {
      guard.stop();
    }
  });
});
