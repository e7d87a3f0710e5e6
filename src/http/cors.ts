/**
 * CORS for a fixed list of origins (CORS_ORIGINS, which includes a local development origin). Browsers
 * from other origins get no CORS headers, and their preflights are refused with 403 in the envelope.
 */
import cors from '@koa/cors';
import type { Middleware } from 'koa';
import { forbidden } from './errors.js';

export function corsPolicy(origins: string[]): Middleware {
  const allowed = new Set(origins);
  const inner = cors({
    origin: (ctx) => (allowed.has(ctx.get('Origin')) ? ctx.get('Origin') : ''),
    allowMethods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
    allowHeaders: ['Authorization', 'Content-Type', 'Idempotency-Key', 'X-Request-Id'],
    exposeHeaders: ['X-Request-Id', 'Retry-After', 'Idempotent-Replayed'],
    maxAge: 600,
  });
  return async (ctx, next) => {
    const origin = ctx.get('Origin');
    if (origin && !allowed.has(origin) && ctx.method === 'OPTIONS' && ctx.get('Access-Control-Request-Method')) {
      throw forbidden('origin_not_allowed', `Origin ${origin} may not call this API from a browser.`);
    }
    return inner(ctx, next);
  };
}
