/**
 * CORS for a fixed list of origins (CORS_ORIGINS, which includes a local development origin). Browsers
 * from other origins get no CORS headers, and their preflights are refused with 403 in the envelope.
 *
 * The public paths (the browser SDK under /sdk/ and the credential-free reads under /api/v1/public/)
 * are open to every origin instead: `Access-Control-Allow-Origin: *` on every answer, errors included,
 * so a widget on any site can tell a 404 from a network failure. No credentials are ever allowed there.
 */
import cors from '@koa/cors';
import type { Context, Middleware } from 'koa';
import { forbidden } from './errors.js';

const OPEN_PATH_PREFIXES = ['/api/v1/public/', '/sdk/'];

const EXPOSE_HEADERS = ['X-Request-Id', 'Retry-After', 'Idempotent-Replayed', 'ETag'];

const isOpenPath = (path: string) => OPEN_PATH_PREFIXES.some((prefix) => path.startsWith(prefix));

function openToAnyOrigin(): Middleware {
  const expose = EXPOSE_HEADERS.join(',');
  return async (ctx, next) => {
    if (ctx.method === 'OPTIONS' && ctx.get('Access-Control-Request-Method')) {
      ctx.set('Access-Control-Allow-Origin', '*');
      ctx.set('Access-Control-Allow-Methods', 'GET');
      ctx.set('Access-Control-Allow-Headers', 'Content-Type, If-None-Match, X-Request-Id');
      ctx.set('Access-Control-Max-Age', '600');
      ctx.status = 204;
      return;
    }
    ctx.set('Access-Control-Allow-Origin', '*');
    ctx.set('Access-Control-Expose-Headers', expose);
    await next();
  };
}

/**
 * The policy as a step of front-door.ts: `inner` answers the request where the policy lets it through.
 * A request without an Origin header (every server-side client) is outside CORS: it gets only the
 * `Vary: Origin` @koa/cors would add, without a pass through that library's async layer.
 */
export function corsPolicy(origins: string[]): (ctx: Context, inner: (ctx: Context) => Promise<void>) => Promise<void> {
  const allowed = new Set(origins);
  const open = openToAnyOrigin();
  const inner = cors({
    origin: (ctx) => (allowed.has(ctx.get('Origin')) ? ctx.get('Origin') : ''),
    allowMethods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
    allowHeaders: ['Authorization', 'Content-Type', 'Idempotency-Key', 'If-Match', 'X-Request-Id'],
    exposeHeaders: EXPOSE_HEADERS,
    maxAge: 600,
  });
  return (ctx, next) => {
    if (isOpenPath(ctx.path)) return open(ctx, () => next(ctx));
    const origin = ctx.get('Origin');
    if (!origin) {
      // What ctx.vary('Origin') sets on a fresh answer, without its parse of a Vary header not there.
      if (ctx.response.get('Vary')) ctx.vary('Origin');
      else ctx.set('Vary', 'Origin');
      return next(ctx);
    }
    if (!allowed.has(origin) && ctx.method === 'OPTIONS' && ctx.get('Access-Control-Request-Method')) {
      throw forbidden('origin_not_allowed', `Origin ${origin} may not call this API from a browser.`);
    }
    return inner(ctx, () => next(ctx));
  };
}
