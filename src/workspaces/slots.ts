/**
 * Concurrency slots: one lease row per live web session or phone call in PostgreSQL, taken atomically
 * against the workspace's concurrent_session_limit, so sessions and calls share one count.
 *
 * A web session's lease is renewed by this instance's heartbeat; when the heartbeat stops (closed tab
 * detected by ping/pong, crashed instance) it expires and stops counting within REALTIME_LEASE_EXPIRY_MS.
 * A phone call's lease is fixed-term (`takeFixed`): a call moves between instances (callbacks and its
 * media stream may land anywhere), so no one instance renews it; it lasts until the call's own deadline
 * and is released by whichever instance finalises the call.
 *
 * Expiry is set and compared on the database clock (now()), so instances with skewed clocks agree.
 *
 * A lease can vanish under a live session: when this instance's heartbeat lags past the expiry,
 * another instance deletes it as expired. The heartbeat notices (the renewal touches fewer rows than
 * it holds) and takes the missing leases again, so the session counts again. If the workspace is at
 * its limit by then (another session took the freed slot), the session is NOT cut: a user mid
 * conversation keeps it, the limit is exceeded until one of them ends, and this is logged (warn,
 * `session lease could not be re-acquired`); the heartbeat keeps trying to re-acquire it.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { AdmissionStore } from './admission-store.js';

interface HeldLease {
  workspaceId: string;
  kind: string;
}

export class SlotKeeper {
  private readonly held = new Map<string, HeldLease>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: AdmissionStore,
    private readonly opts: { instanceId: string; heartbeatMs: number; expiryMs: number },
    private readonly log: Logger,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.heartbeat(), this.opts.heartbeatMs);
    this.timer.unref();
  }

  /** Renews every held lease, re-acquires those that disappeared, then deletes expired ones. */
  async heartbeat(): Promise<void> {
    try {
      const ids = [...this.held.keys()];
      const renewed = new Set(await this.store.renewLeases(ids, this.opts.expiryMs));
      for (const id of ids) {
        if (renewed.has(id)) continue;
        const lease = this.held.get(id);
        if (lease) await this.reacquire(id, lease);
      }
      await this.store.deleteExpiredLeases();
    } catch (err) {
      this.log.warn({ err }, 'session lease heartbeat failed');
    }
  }

  private async reacquire(id: string, lease: HeldLease): Promise<void> {
    const limit = await this.store.sessionLimit(lease.workspaceId);
    if (limit === undefined || !this.held.has(id)) return;
    const ok = await this.store.acquireLease(
      { id, workspace_id: lease.workspaceId, kind: lease.kind, instance_id: this.opts.instanceId },
      limit,
      this.opts.expiryMs,
    );
    // Released while we were re-acquiring: give it back.
    if (ok && !this.held.has(id)) await this.store.releaseLease(id);
    if (ok) this.log.warn({ leaseId: id, workspaceId: lease.workspaceId }, 'session lease had been deleted (heartbeat lag); re-acquired');
    else
      this.log.warn(
        { leaseId: id, workspaceId: lease.workspaceId, limit },
        'session lease could not be re-acquired: the workspace is at its limit; the session continues',
      );
  }

  async acquire(id: string, workspaceId: string, limit: number, kind = 'realtime'): Promise<boolean> {
    const ok = await this.store.acquireLease({ id, workspace_id: workspaceId, kind, instance_id: this.opts.instanceId }, limit, this.opts.expiryMs);
    if (ok) this.held.set(id, { workspaceId, kind });
    return ok;
  }

  async release(id: string): Promise<void> {
    if (!this.held.delete(id)) return;
    await this.store.releaseLease(id).catch((err) => this.log.warn({ err, leaseId: id }, 'could not release session lease'));
  }

  /** A slot held for `ttlMs` with no heartbeat (phone calls); false when the workspace is at its limit. */
  takeFixed(id: string, workspaceId: string, limit: number, ttlMs: number, kind: string): Promise<boolean> {
    return this.store.acquireLease({ id, workspace_id: workspaceId, kind, instance_id: this.opts.instanceId }, limit, ttlMs);
  }

  /** Fixed-term slots for several calls of one workspace, in `trx`: takes the first ones that fit and returns how many. */
  takeFixedIn(trx: Knex.Transaction, ids: string[], workspaceId: string, limit: number, ttlMs: number, kind: string): Promise<number> {
    return this.store.acquireLeasesIn(
      trx,
      workspaceId,
      ids.map((id) => ({ id, workspace_id: workspaceId, kind, instance_id: this.opts.instanceId })),
      limit,
      ttlMs,
    );
  }

  /** Gives back a fixed-term slot (from any instance, in `trx` when given); one already gone is a no-op. */
  async releaseFixed(id: string, trx?: Knex.Transaction): Promise<void> {
    await this.store.releaseLease(id, trx);
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
