/**
 * Signup and login attempts per client address, counted in PostgreSQL so every instance shares the
 * count (rate-limiter-flexible on the auth_attempts table). Over the limit: 429 with Retry-After.
 */
import type { Knex } from 'knex';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { tooManyRequests } from '../http/errors.js';

export class AuthRateLimit {
  private readonly limiter: RateLimiterPostgres;

  constructor(knex: Knex, perMinute: number) {
    this.limiter = new RateLimiterPostgres({
      storeClient: knex,
      storeType: 'knex',
      tableName: 'auth_attempts',
      tableCreated: true,
      clearExpiredByTimeout: false,
      keyPrefix: 'auth',
      points: perMinute,
      duration: 60,
    });
  }

  async consume(clientAddress: string): Promise<void> {
    try {
      await this.limiter.consume(clientAddress);
    } catch (err) {
      if (err instanceof RateLimiterRes) {
        throw tooManyRequests(err.msBeforeNext / 1000, `Too many sign-up or login attempts from this address; retry after ${Math.ceil(err.msBeforeNext / 1000)} seconds.`);
      }
      throw err;
    }
  }
}
