/**
 * Concurrency slots: one lease row per live session in PostgreSQL, taken atomically against the
 * workspace's concurrent_session_limit and renewed by this instance's heartbeat. A lease whose
 * heartbeat stops (closed tab detected by ping/pong, crashed instance) expires and stops counting
 * within REALTIME_LEASE_EXPIRY_MS.
 */
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import type { RealtimeStore } from './store.js';

export class LeaseKeeper {
  private readonly held = new Set<string>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: RealtimeStore,
    private readonly clock: Clock,
    private readonly opts: { instanceId: string; heartbeatMs: number; expiryMs: number },
    private readonly log: Logger,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.heartbeat(), this.opts.heartbeatMs);
    this.timer.unref();
  }

  private expiry(): Date {
    return new Date(this.clock.now().getTime() + this.opts.expiryMs);
  }

  async heartbeat(): Promise<void> {
    try {
      await this.store.renewLeases([...this.held], this.expiry());
      await this.store.deleteExpiredLeases(this.clock.now());
    } catch (err) {
      this.log.warn({ err }, 'session lease heartbeat failed');
    }
  }

  async acquire(id: string, workspaceId: string, limit: number, kind = 'realtime'): Promise<boolean> {
    const ok = await this.store.acquireLease({ id, workspace_id: workspaceId, kind, instance_id: this.opts.instanceId }, limit, this.clock.now(), this.expiry());
    if (ok) this.held.add(id);
    return ok;
  }

  async release(id: string): Promise<void> {
    if (!this.held.delete(id)) return;
    await this.store.releaseLease(id).catch((err) => this.log.warn({ err, leaseId: id }, 'could not release session lease'));
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
