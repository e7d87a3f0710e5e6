/**
 * Rate limits of realtime sessions: the per-IP WebSocket connection-attempt limit (rate-limiter-flexible
 * on PostgreSQL, so instances sharing the database share the count), and the client address it keys on.
 * The per-workspace creation limit lives in RealtimeStore.issueToken (it counts the issued tokens).
 */
import type { Knex } from 'knex';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';

export class IpAttemptLimiter {
  private readonly limiter: RateLimiterPostgres;

  constructor(knex: Knex, opts: { attempts: number; windowMs: number }) {
    this.limiter = new RateLimiterPostgres({
      storeClient: knex,
      storeType: 'knex',
      tableName: 'realtime_ip_attempts',
      tableCreated: true,
      keyPrefix: 'ws-ip',
      points: opts.attempts,
      duration: Math.max(1, Math.ceil(opts.windowMs / 1000)),
    });
  }

  /** Counts one attempt; resolves the seconds to wait when the attempt is over the limit, else null. */
  async attempt(ip: string): Promise<number | null> {
    try {
      await this.limiter.consume(ip);
      return null;
    } catch (res) {
      if (res instanceof RateLimiterRes) return Math.max(1, Math.ceil(res.msBeforeNext / 1000));
      throw res;
    }
  }
}

