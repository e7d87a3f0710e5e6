/**
 * Limits on the connections of the HTTP server, so slow or many connections from one client cannot
 * exhaust the instance: a deadline for a request's headers and for the whole request (Node answers
 * 408 and closes), a cap on open connections per client address (trusted proxies exempt: every
 * client behind them shares their address) and one for the instance. A connection over a cap is
 * destroyed on arrival, before anything is read from it.
 */
import type http from 'node:http';
import type net from 'node:net';
import type { Logger } from 'pino';
import ipaddr from 'ipaddr.js';

export interface ConnectionLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  maxConnectionsPerIp: number;
  maxConnections: number;
  /** Addresses exempt from the per-address cap. */
  isTrustedProxy: (address: string) => boolean;
}

/** Options for http.createServer: Node checks the two deadlines every connectionsCheckingInterval. */
export function serverOptions(l: ConnectionLimits): http.ServerOptions {
  return {
    headersTimeout: l.headersTimeoutMs,
    requestTimeout: Math.max(l.requestTimeoutMs, l.headersTimeoutMs),
    connectionsCheckingInterval: Math.max(50, Math.min(30_000, Math.floor(l.headersTimeoutMs / 4))),
  };
}

function addressKey(address: string | undefined): string {
  if (!address || !ipaddr.isValid(address)) return address ?? '';
  const parsed = ipaddr.process(address);
  // One IPv6 client usually holds a whole /64.
  return parsed.kind() === 'ipv6'
    ? `${(parsed as ipaddr.IPv6).parts
        .slice(0, 4)
        .map((p) => p.toString(16))
        .join(':')}::/64`
    : parsed.toString();
}

export function limitConnections(server: http.Server, l: ConnectionLimits, log: Logger): void {
  server.maxConnections = l.maxConnections;
  const open = new Map<string, number>();
  let refusedSince = 0;
  server.on('connection', (socket: net.Socket) => {
    const address = socket.remoteAddress;
    if (address && l.isTrustedProxy(address)) return;
    const key = addressKey(address);
    const count = (open.get(key) ?? 0) + 1;
    if (count > l.maxConnectionsPerIp) {
      socket.destroy();
      // One warning per burst, not one per refused connection.
      if (refusedSince++ === 0) log.warn({ address: key, limit: l.maxConnectionsPerIp }, 'connection refused: too many open connections from one address');
      return;
    }
    refusedSince = 0;
    open.set(key, count);
    socket.once('close', () => {
      const left = (open.get(key) ?? 1) - 1;
      if (left > 0) open.set(key, left);
      else open.delete(key);
    });
  });
}
