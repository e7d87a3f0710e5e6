/**
 * The rules of a NOTIFY-invalidated cache (src/db/notified-cache.ts) on their own, with loads the test
 * resolves by hand and a clock it moves: entries are used only while listening; an invalidation or an
 * emptying that overtakes a load keeps that load's result out; the TTL and the cap (least recently
 * used first) bound what is kept; values handed out are frozen. The database side (triggers, a dropped
 * LISTEN connection) is in test/integration/notified-cache.test.ts.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { NotifiedCache } from '../../src/db/notified-cache.js';

function deferred<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

function rig(opts: { ttlMs?: number; maxEntries?: number } = {}) {
  const state = { listening: true, now: 0, loads: 0 };
  const cache = new NotifiedCache<{ v: number }>(() => state.listening, {
    ttlMs: opts.ttlMs ?? 1000,
    maxEntries: opts.maxEntries ?? 100,
    now: () => state.now,
  });
  /** A load that counts itself and answers `v`. */
  const load = (v: number) => async () => {
    state.loads += 1;
    return { v };
  };
  return { state, cache, load };
}

describe('NotifiedCache', () => {
  it('keeps what a load read and serves it again without loading', async () => {
    const { state, cache, load } = rig();
    assert.deepEqual(await cache.get('a', load(1)), { v: 1 });
    assert.deepEqual(await cache.get('a', load(2)), { v: 1 });
    assert.equal(state.loads, 1);
    cache.invalidate('a');
    assert.deepEqual(await cache.get('a', load(3)), { v: 3 });
    assert.equal(state.loads, 2);
  });

  it('keeps nothing and serves nothing kept while not listening', async () => {
    const { state, cache, load } = rig();
    await cache.get('a', load(1));
    state.listening = false;
    assert.deepEqual(await cache.get('a', load(2)), { v: 2 }, 'a kept entry is not used while notifications may be lost');
    assert.deepEqual(await cache.get('b', load(3)), { v: 3 });
    assert.equal(cache.size, 1, 'b was not kept');
  });

  it('does not keep a load that an invalidation of its key overtook; a later load is kept', async () => {
    const { cache } = rig();
    const slow = deferred<{ v: number }>();
    const first = cache.get('a', () => slow.promise);
    cache.invalidate('a');
    // A load begun after the invalidation read the new row: it is kept.
    assert.deepEqual(await cache.get('a', async () => ({ v: 2 })), { v: 2 });
    slow.resolve({ v: 1 });
    assert.deepEqual(await first, { v: 1 }, 'its caller still gets what it read');
    assert.deepEqual(await cache.get('a', async () => ({ v: 9 })), { v: 2 }, 'the overtaken load did not replace the newer entry');
  });

  it('an invalidation of another key does not hold a load back', async () => {
    const { cache } = rig();
    const slow = deferred<{ v: number }>();
    const pending = cache.get('a', () => slow.promise);
    cache.invalidate('b');
    slow.resolve({ v: 1 });
    await pending;
    assert.equal(cache.size, 1);
  });

  it('an emptying (the LISTEN connection is back) empties it and keeps out every load begun before', async () => {
    const { cache, load } = rig();
    await cache.get('a', load(1));
    const slow = deferred<{ v: number }>();
    const pending = cache.get('b', () => slow.promise);
    cache.clear();
    assert.equal(cache.size, 0);
    slow.resolve({ v: 2 });
    await pending;
    assert.equal(cache.size, 0, 'the load begun before the emptying was not kept');
  });

  it('a load that ends while not listening is not kept', async () => {
    const { state, cache } = rig();
    const slow = deferred<{ v: number }>();
    const pending = cache.get('a', () => slow.promise);
    state.listening = false;
    slow.resolve({ v: 1 });
    await pending;
    state.listening = true;
    assert.equal(cache.size, 0);
  });

  it('does not keep undefined (nothing found) or a failed load', async () => {
    const { cache } = rig();
    assert.equal(await cache.get('a', async () => undefined), undefined);
    await assert.rejects(
      cache.get('b', async () => {
        throw new Error('database gone');
      }),
      /database gone/,
    );
    assert.equal(cache.size, 0);
  });

  it('an entry expires after the TTL', async () => {
    const { state, cache, load } = rig({ ttlMs: 100 });
    await cache.get('a', load(1));
    state.now = 99;
    assert.deepEqual(await cache.get('a', load(2)), { v: 1 });
    state.now = 100;
    assert.deepEqual(await cache.get('a', load(3)), { v: 3 });
  });

  it('keeps at most maxEntries, dropping the least recently used', async () => {
    const { state, cache, load } = rig({ maxEntries: 2 });
    await cache.get('a', load(1));
    await cache.get('b', load(2));
    await cache.get('a', load(0)); // a is used again: b is now the least recent
    await cache.get('c', load(3));
    assert.equal(cache.size, 2);
    const loads = state.loads;
    assert.deepEqual(await cache.get('a', load(0)), { v: 1 });
    assert.deepEqual(await cache.get('c', load(0)), { v: 3 });
    assert.equal(state.loads, loads, 'a and c are kept');
    assert.deepEqual(await cache.get('b', load(4)), { v: 4 }, 'b was dropped');
  });

  it('hands out frozen values, kept or not', async () => {
    const { state, cache } = rig();
    const kept = await cache.get('a', async () => ({ v: 1, inner: { list: [1] } }));
    assert.ok(Object.isFrozen(kept) && Object.isFrozen((kept as unknown as { inner: { list: number[] } }).inner.list));
    state.listening = false;
    const passed = await cache.get('b', async () => ({ v: 2 }));
    assert.throws(() => {
      (passed as { v: number }).v = 3;
    }, TypeError);
  });
});
