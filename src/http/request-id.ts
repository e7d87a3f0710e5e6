/** Uses the client's X-Request-Id when it is 1-128 URL-safe characters, otherwise mints one; echoes it. */
import type { Middleware } from 'koa';
import { newId } from '../lib/ids.js';

const VALID = /^[A-Za-z0-9._~-]{1,128}$/;

export function requestId(): Middleware {
  return async (ctx, next) => {
    const given = ctx.get('X-Request-Id');
    const id = VALID.test(given) ? given : newId('request');
    ctx.state.requestId = id;
    ctx.set('X-Request-Id', id);
    await next();
  };
}
