/**
 * The overload guard (src/system/overload.ts) on its own: queries waiting for a database connection
 * make the instance busy at once and no longer once they are served; an event loop held busy makes it
 * busy only after two slow windows running, and one window at ease clears it. The loop here is this
 * test's own, blocked on purpose.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { OverloadGuard } from '../../src/system/overload.js';

const silent = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const block = (ms: number) => {
  const until = Date.now() + ms;
  while (Date.now() < until);
};

describe('overload guard', () => {
  it('is busy while at least dbWaiting queries wait for a connection', () => {
    let waiting = 0;
    const guard = new OverloadGuard({ loopDelayMs: 0, dbWaiting: 3, sampleMs: 1000 }, () => waiting, silent);
    assert.equal(guard.reason(), null);
    waiting = 2;
    assert.equal(guard.reason(), null);
    waiting = 3;
    assert.match(guard.reason() ?? '', /3 database queries are waiting/);
    waiting = 0;
    assert.equal(guard.reason(), null);
  });

  it('with dbWaiting 0 the pool is not watched', () => {
    const guard = new OverloadGuard({ loopDelayMs: 0, dbWaiting: 0, sampleMs: 1000 }, () => 1_000, silent);
    assert.equal(guard.reason(), null);
  });

  it('is busy after two windows of a delayed event loop, not after one, and clear after one at ease', async () => {
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
      // At ease again: one window of normal delay clears it.
      const calm = Date.now() + 10_000;
      while (guard.reason() !== null && Date.now() < calm) await sleep(20);
      assert.equal(guard.reason(), null);
    } finally {
      guard.stop();
    }
  });
});
