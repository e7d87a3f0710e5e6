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
 * A conversation is admitted with its slot and its reservation (the credit and plan minutes it holds,
 * reservations.ts) in one transaction. A web session's reservation is renewed by the same heartbeat,
 * and kept renewed after its slot is released until its usage is charged (`settled`): the session
 * gives its slot back as soon as it closes, its credit only when it is billed. It lasts twice the
 * lease expiry without renewal, so a dead instance's sessions are billed (by another instance, after
 * one lease expiry) while their credit is still held. A phone call's reservation lasts as long as its
 * fixed-term slot and is released by the finaliser's charge.
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
import type { AdmissionStore, AdmitRefusal, Admitted } from './admission-store.js';
import type { ReservationAsk } from './reservations.js';

interface HeldLease {
  workspaceId: string;
  kind: string;
  /** false once the slot was released (the reservation is still renewed until the session is billed). */
  slot: boolean;
}

export class SlotKeeper {
  private readonly held = new Map<string, HeldLease>();
  private timer: NodeJS.Timeout | undefined;
  /** The heartbeat under way: one at a time, and `stop` waits for it. */
  private beating: Promise<void> | undefined;

  constructor(
    private readonly store: AdmissionStore,
    private readonly opts: { instanceId: string; heartbeatMs: number; expiryMs: number },
    private readonly log: Logger,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void (this.beating ?? this.heartbeat()), this.opts.heartbeatMs);
    this.timer.unref();
  }

  /** How long a heartbeat-renewed reservation lasts without renewal. */
  get reservationExpiryMs(): number {
    return 2 * this.opts.expiryMs;
  }

  /** Renews every held lease and reservation, re-acquires leases that disappeared, then deletes expired ones. */
  heartbeat(): Promise<void> {
    const beat = (this.beating ?? Promise.resolve()).then(() => this.beat());
    this.beating = beat;
    void beat.finally(() => {
      if (this.beating === beat) this.beating = undefined;
    });
    return beat;
  }

  private async beat(): Promise<void> {
    try {
      await this.store.renewReservations([...this.held.keys()], this.reservationExpiryMs);
      const ids = [...this.held].filter(([, l]) => l.slot).map(([id]) => id);
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
    if (limit === undefined || !this.held.get(id)?.slot) return;
    const ok = await this.store.acquireLease(
      { id, workspace_id: lease.workspaceId, kind: lease.kind, instance_id: this.opts.instanceId },
      limit,
      this.opts.expiryMs,
    );
    // Released while we were re-acquiring: give it back.
    if (ok && !this.held.get(id)?.slot) await this.store.releaseLease(id);
    if (ok) this.log.warn({ leaseId: id, workspaceId: lease.workspaceId }, 'session lease had been deleted (heartbeat lag); re-acquired');
    else
      this.log.warn(
        { leaseId: id, workspaceId: lease.workspaceId, limit },
        'session lease could not be re-acquired: the workspace is at its limit; the session continues',
      );
  }

  /**
   * Admits a web session: its reservation (`ask`) and a heartbeat-renewed slot, in one transaction;
   * or why not (plan minutes, credit, then the concurrency limit).
   */
  async admit(id: string, workspaceId: string, limit: number, ask: ReservationAsk, kind = 'realtime'): Promise<Admitted | AdmitRefusal> {
    const result = await this.store.admit({ id, workspace_id: workspaceId, kind, instance_id: this.opts.instanceId }, limit, this.opts.expiryMs, ask);
    if (typeof result !== 'string') this.held.set(id, { workspaceId, kind, slot: true });
    return result;
  }

  /** Gives back a web session's slot; its reservation stays (renewed) until `settled`. */
  async release(id: string): Promise<void> {
    const lease = this.held.get(id);
    if (!lease?.slot) return;
    lease.slot = false;
    await this.store.releaseLease(id).catch((err) => this.log.warn({ err, leaseId: id }, 'could not release session lease'));
  }

  /** A web session was billed (its reservation released with the charge), or never ran: nothing of it is renewed any more. */
  async settled(id: string, opts: { releaseReservation?: boolean } = {}): Promise<void> {
    await this.release(id);
    this.held.delete(id);
    if (opts.releaseReservation) await this.store.releaseReservation(id).catch((err) => this.log.warn({ err, leaseId: id }, 'could not release a reservation'));
  }

  /** Admits a phone call: its reservation and a slot held for `ttlMs` with no heartbeat, in one transaction. */
  admitFixed(id: string, workspaceId: string, limit: number, ttlMs: number, ask: ReservationAsk, kind = 'call'): Promise<Admitted | AdmitRefusal> {
    return this.store.admit({ id, workspace_id: workspaceId, kind, instance_id: this.opts.instanceId }, limit, ttlMs, ask);
  }

  /**
   * Admits several calls of one workspace in `trx` (fixed-term slots and their reservations): the first
   * ones that fit; returns how many, and what stopped the others.
   */
  admitFixedIn(
    trx: Knex.Transaction,
    ids: string[],
    workspaceId: string,
    limit: number,
    ttlMs: number,
    ask: ReservationAsk,
    kind = 'call',
  ): Promise<{ taken: number; short: AdmitRefusal | null }> {
    return this.store.admitManyIn(
      trx,
      workspaceId,
      ids.map((id) => ({ id, workspace_id: workspaceId, kind, instance_id: this.opts.instanceId })),
      limit,
      ttlMs,
      ask,
    );
  }

  /** The workspace whose live conversation holds the slot `id` (from admission to release, on any instance). */
  holder(id: string): Promise<string | undefined> {
    return this.store.leaseWorkspace(id);
  }

  /** Gives back a fixed-term slot (from any instance, in `trx` when given); one already gone is a no-op. */
  async releaseFixed(id: string, trx?: Knex.Transaction): Promise<void> {
    await this.store.releaseLease(id, trx);
  }

  /** Gives back a call's slot and reservation when the call was never written (its transaction failed). */
  async releaseUnused(id: string): Promise<void> {
    await this.store.releaseLease(id);
    await this.store.releaseReservation(id);
  }

  /** Stops the heartbeat; resolves once a heartbeat under way has finished (so none touches a lease after). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.beating;
  }
}
