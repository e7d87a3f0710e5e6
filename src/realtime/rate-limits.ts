/**
 * The per-address WebSocket connection-attempt limit: at most `attempts` in any `windowMs`, counted in
 * PostgreSQL so instances sharing the database share it. A sliding log (one row per admitted attempt,
 * on the database clock) rather than rate-limiter-flexible's fixed windows, which let twice the limit
 * through across a window boundary. Refused attempts are not logged, so a client that waits gets in
 * as soon as its oldest attempt leaves the window. The per-workspace creation limit lives in
 * RealtimeStore.issueToken (it counts the issued tokens).
 */
import type { Knex } from 'knex';

export class IpAttemptLimiter {
  constructor(
    private readonly knex: Knex,
    private readonly opts: { attempts: number; windowMs: number },
  ) {}

  /** Counts one attempt; resolves the seconds to wait when the attempt is over the limit, else null. */
  async attempt(address: string): Promise<number | null> {
    return this.knex.transaction(async (trx) => {
      // One address's attempts are decided one at a time, on every instance.
      await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`ws-ip:${address}`]);
      const window = trx.raw(`now() - ? * interval '1 millisecond'`, [this.opts.windowMs]);
      await trx('realtime_ip_attempt_log').where({ address }).where('at', '<=', window).delete();
      const recent = await trx('realtime_ip_attempt_log')
        .where({ address })
        .orderBy('at', 'desc')
        .offset(this.opts.attempts - 1)
        .first('at');
      if (recent) {
        const r = await trx.raw(`select extract(epoch from (?::timestamptz + ? * interval '1 millisecond' - now())) * 1000 as ms`, [
          recent.at,
          this.opts.windowMs,
        ]);
        return Math.max(1, Math.ceil(Number(r.rows[0].ms) / 1000));
      }
      await trx('realtime_ip_attempt_log').insert({ address });
      return null;
    });
  }

  /** Forgets attempts older than the window (addresses that never came back). */
  async prune(): Promise<void> {
    await this.knex('realtime_ip_attempt_log')
      .where('at', '<=', this.knex.raw(`now() - ? * interval '1 millisecond'`, [this.opts.windowMs]))
      .delete();
  }
}
