/**
 * Signup and login attempts per client address, counted in PostgreSQL so every instance shares the
 * count (rate-limiter-flexible on the auth_attempts table). Over the limit: 429 with Retry-After.
 * The address comes from the socket, or from X-Forwarded-For only behind a trusted proxy.
 */
import type { IncomingMessage } from 'node:http';
import type { Knex } from 'knex';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { tooManyRequests } from '../errors/api-error.js';
import { clientAddressResolver } from '../net/client-address.js';

/** Counters whose window ended over an hour ago are deleted this often. */
const PURGE_INTERVAL_MS = 5 * 60_000;

export class AuthRateLimit {
  private readonly limiter: RateLimiterPostgres;
  private readonly addressOf: (req: IncomingMessage) => string;
  private readonly purge: NodeJS.Timeout;

  constructor(knex: Knex, opts: { perMinute: number; trustedProxies: string[] }) {
    this.addressOf = clientAddressResolver(opts.trustedProxies);
    this.limiter = new RateLimiterPostgres({
      storeClient: knex,
      storeType: 'knex',
      tableName: 'auth_attempts',
      tableCreated: true,
      // Its own purge timer outlives the pool; ours stops with the service.
      clearExpiredByTimeout: false,
      keyPrefix: 'auth',
      points: opts.perMinute,
      duration: 60,
    });
    this.purge = setInterval(() => {
      knex('auth_attempts')
        .where('expire', '<', Date.now() - 3_600_000)
        .delete()
        .catch(() => undefined);
    }, PURGE_INTERVAL_MS).unref();
  }

  async consume(req: IncomingMessage): Promise<void> {
    try {
      await this.limiter.consume(this.addressOf(req));
    } catch (err) {
      if (err instanceof RateLimiterRes) {
        throw tooManyRequests(
          err.msBeforeNext / 1000,
          `Too many sign-up or login attempts from this address; retry after ${Math.ceil(err.msBeforeNext / 1000)} seconds.`,
        );
      }
      throw err;
    }
  }

  close(): void {
    clearInterval(this.purge);
  }
}
