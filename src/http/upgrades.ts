/**
 * The one place that routes HTTP `upgrade` requests (WebSocket handshakes) by path. Each route is a
 * path pattern and a handler that owns the socket from then on. A request to any other path is
 * answered `404 Not Found` with the error envelope and `Connection: close`, and the socket destroyed,
 * so no socket is left open (server.close() would wait for it).
 *
 * The telephony media streams add their routes here (`/telephony/provider_a/media`,
 * `/telephony/provider_b/media`) next to the realtime `/ws/{user_id}` one.
 */
import { routeNotFound } from './errors.js';
import type http from 'node:http';
import type { Duplex } from 'node:stream';

export type UpgradeHandler = (req: http.IncomingMessage, socket: Duplex, head: Buffer, params: string[], url: URL) => void;

export interface UpgradeRoute {
  /** Matched against the path (no query); capture groups become `params`. */
  path: RegExp;
  handle: UpgradeHandler;
}

/** Writes a complete HTTP/1.1 answer to an upgrade request and destroys the socket. */
export function answerUpgrade(socket: Duplex, status: string, opts: { headers?: Record<string, string>; body?: string } = {}): void {
  const body = opts.body ?? '';
  const headers = {
    Connection: 'close',
    'Content-Length': String(Buffer.byteLength(body)),
    ...(body ? { 'Content-Type': 'application/json' } : {}),
    ...opts.headers,
  };
  const lines = [`HTTP/1.1 ${status}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  // Destroyed once the answer is flushed (as ws does), so the status line is not lost.
  socket.once('finish', () => socket.destroy());
  socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`);
}

export function notFoundUpgrade(socket: Duplex, path: string): void {
  const err = routeNotFound('GET', path);
  const body = JSON.stringify({ error: { type: err.type, code: err.code, message: err.message, param: null, request_id: null } });
  answerUpgrade(socket, '404 Not Found', { body });
}

/** Listens for `upgrade` on the server and dispatches by path. */
export function routeUpgrades(server: http.Server, routes: UpgradeRoute[]): void {
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      notFoundUpgrade(socket, String(req.url ?? ''));
      return;
    }
    for (const route of routes) {
      const m = route.path.exec(url.pathname);
      if (m) {
        route.handle(req, socket, head, m.slice(1), url);
        return;
      }
    }
    notFoundUpgrade(socket, url.pathname);
  });
}
