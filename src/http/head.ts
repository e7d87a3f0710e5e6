/**
 * HEAD wherever GET works (RFC 9110 9.3.2): the request is routed, authorized, validated and answered
 * as the GET it mirrors, so the status and headers are the GET's; Koa then sends no body for HEAD. A
 * body that is a stream (a recording, an event stream) is destroyed unread, so whatever it holds (a
 * file, a stream place) is let go at once. The contract says so once for every GET operation
 * (openapi.yaml) rather than declaring a HEAD twin of each. front-door.ts calls these around the rest.
 */
import type { Context } from 'koa';
import { Stream } from 'node:stream';

declare module 'koa' {
  interface DefaultState {
    /** The request is a HEAD answered as its GET. */
    head?: boolean;
  }
}

/** Turns a HEAD into its GET; true when it did. */
export function headAsGet(ctx: Context): boolean {
  if (ctx.method !== 'HEAD') return false;
  ctx.method = 'GET';
  ctx.state.head = true;
  return true;
}

/** After the answer of a HEAD turned GET: the method back, and a stream body let go unread. */
export function backToHead(ctx: Context): void {
  ctx.method = 'HEAD';
  if (ctx.body instanceof Stream) (ctx.body as Stream & { destroy(): void }).destroy();
}
