/**
 * Per-process caches of rows that are read on every call and almost never written (an agent, which
 * event kinds a workspace's webhooks list), kept right across instances by PostgreSQL NOTIFY: row
 * triggers (migration 030) send `<table> <key>` on CACHE_CHANNEL for every row inserted, updated or
 * deleted, whatever wrote it (the API, a workspace's cascading delete, raw SQL), and every instance
 * drops that key from its cache of the table. The instance's LISTEN connection (listener.ts) serves every cache.
 *
 * What keeps a cache from serving what the database no longer holds:
 * - an entry is used only while the LISTEN connection is up (otherwise every read goes to the database);
 * - each time the connection is listening again, every cache is emptied (what was kept before may
 *   have missed a notification while it was down);
 * - a load overtaken by an invalidation of its key, or by an emptying, is returned to its caller but
 *   not kept (it may have read the row before the write that was notified);
 * - entries expire after `ttlMs` anyway, and at most `maxEntries` are kept per cache (the least
 *   recently used go first).
 * A load that runs in a caller's transaction must run at READ COMMITTED (the default), so that it
 * reads what was committed when it started, not an older snapshot.
 *
 * Values are kept in memory only and shared by every caller, so each value a cache hands out is
 * frozen, kept or not (a caller that would change one fails at once, whether the cache is on or off).
 */
import type { Listener } from './listener.js';

export const CACHE_CHANNEL = 'cache_invalidations';

export interface CacheOptions {
  /** How long an entry is used at most (0: nothing is cached). */
  ttlMs: number;
  /** Entries per cache at most (0: nothing is cached). */
  maxEntries: number;
  /** Monotonic milliseconds (tests move it). */
  now?: () => number;
}

export class NotifiedCaches {
  private readonly caches = new Map<string, NotifiedCache<unknown>>();
  private readonly listener: Listener | undefined;
  private stopped = false;

  /** `listener`: the instance's LISTEN connection (none: nothing is cached). */
  constructor(
    listener: Listener | undefined,
    private readonly opts: CacheOptions,
  ) {
    const enabled = listener !== undefined && opts.ttlMs > 0 && opts.maxEntries > 0;
    this.listener = enabled ? listener : undefined;
    this.listener?.on(CACHE_CHANNEL, (payload) => this.notified(payload), { onListening: () => this.clear() });
  }

  /** The cache of `table`'s rows, by the key its trigger sends (one per table). */
  of<V>(table: string): NotifiedCache<V> {
    let cache = this.caches.get(table);
    if (!cache) {
      cache = new NotifiedCache<unknown>(() => this.listening, this.opts);
      this.caches.set(table, cache);
    }
    return cache as NotifiedCache<V>;
  }

  /** Whether entries are used now (the LISTEN connection is up). */
  get listening(): boolean {
    return !this.stopped && (this.listener?.listening ?? false);
  }

  /** Nothing is cached from here on (the instance is stopping). */
  stop(): void {
    this.stopped = true;
    this.clear();
  }

  private clear(): void {
    for (const cache of this.caches.values()) cache.clear();
  }

  private notified(payload: string | undefined): void {
    const space = payload?.indexOf(' ') ?? -1;
    if (!payload || space < 0) return;
    this.caches.get(payload.slice(0, space))?.invalidate(payload.slice(space + 1));
  }
}

/** Freezes `value` and every object and array it holds. */
export function deepFreeze<T>(value: T): T {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value)) return value;
  Object.freeze(value);
  for (const inner of Object.values(value)) deepFreeze(inner);
  return value;
}

interface Entry<V> {
  value: V;
  expiresAt: number;
}

/** Loads of one key in flight: how many, and the key's generation, raised by each invalidation meanwhile. */
interface Loading {
  count: number;
  generation: number;
}

export class NotifiedCache<V> {
  /** In order of use, least recent first. */
  private readonly entries = new Map<string, Entry<V>>();
  private readonly loading = new Map<string, Loading>();
  /** Raised by each emptying: loads begun before it are not kept. */
  private epoch = 0;
  private readonly now: () => number;

  constructor(
    private readonly active: () => boolean,
    private readonly opts: CacheOptions,
  ) {
    this.now = opts.now ?? (() => performance.now());
  }

  /**
   * The value of `key`: the kept one while it is good, else what `load` reads (kept unless it is
   * undefined or something invalidated the key meanwhile).
   */
  async get(key: string, load: () => Promise<V | undefined>): Promise<V | undefined> {
    if (!this.active()) return deepFreeze(await load());
    const hit = this.entries.get(key);
    if (hit) {
      this.entries.delete(key);
      if (hit.expiresAt > this.now()) {
        this.entries.set(key, hit);
        return hit.value;
      }
    }
    let loading = this.loading.get(key);
    if (!loading) this.loading.set(key, (loading = { count: 0, generation: 0 }));
    loading.count += 1;
    const { generation } = loading;
    const epoch = this.epoch;
    try {
      const value = deepFreeze(await load());
      if (value !== undefined && loading.generation === generation && this.epoch === epoch && this.active()) this.keep(key, value);
      return value;
    } finally {
      loading.count -= 1;
      if (loading.count === 0) this.loading.delete(key);
    }
  }

  /** The row behind `key` was written: its entry goes, and loads of it in flight are not kept. */
  invalidate(key: string): void {
    this.entries.delete(key);
    const loading = this.loading.get(key);
    if (loading) loading.generation += 1;
  }

  /** Every entry goes, and no load in flight is kept. */
  clear(): void {
    this.entries.clear();
    this.epoch += 1;
  }

  /** Entries kept now (tests). */
  get size(): number {
    return this.entries.size;
  }

  private keep(key: string, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, { value, expiresAt: this.now() + this.opts.ttlMs });
    while (this.entries.size > this.opts.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }
}
