/**
 * Limits on the connections of the HTTP server, so slow or many connections from one client cannot
 * exhaust the instance: a deadline for a request's headers and for the whole request (Node answers
 * 408 and closes), a cap on open connections per client address (trusted proxies exempt: every
 * client behind them shares their address) and one for the instance. A connection over a cap is
 * destroyed on arrival, before anything is read from it.
 *
 * The per-address cap is meant for browsers; a carrier's few media servers carry many calls each. A
 * connection stops counting against its address once it proves to be a carrier's: a media stream that
 * presented a valid stream token for as long as it stays open (`exemptFromAddressCap`), a carrier
 * callback whose signature verified while it is answered (`exemptWhileAnswering`). Until then (and
 * a callback's connection once answered) it counts like any other.
 */
import type http from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
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

/** A connection's place in its address's count. */
interface Counted {
  /** It stops counting (no-op when it does not count). */
  release(): void;
  /** It counts again, if its address has room; false when it has none. */
  retake(): boolean;
  counts(): boolean;
}

const counted = new WeakMap<object, Counted>();

/** The connection carries an authenticated carrier media stream: it does not count against its address from now on. */
export function exemptFromAddressCap(socket: Duplex): void {
  counted.get(socket)?.release();
}

/**
 * The connection's request is a carrier callback whose signature verified: it does not count while
 * it is answered. Then it counts again; with no room left at its address it is closed after the
 * answer, so a kept-alive connection never takes a place it could not have taken on arrival.
 */
export function exemptWhileAnswering(socket: Duplex, res: http.ServerResponse): void {
  const c = counted.get(socket);
  if (!c) return;
  c.release();
  res.once('close', () => {
    if (!socket.destroyed && !c.retake()) socket.end();
  });
}

export function limitConnections(server: http.Server, l: ConnectionLimits, log: Logger): void {
  server.maxConnections = l.maxConnections;
  const open = new Map<string, number>();
  let refusedSince = 0;
  const take = (key: string): boolean => {
    const count = (open.get(key) ?? 0) + 1;
    if (count > l.maxConnectionsPerIp) return false;
    open.set(key, count);
    return true;
  };
  const give = (key: string) => {
    const left = (open.get(key) ?? 1) - 1;
    if (left > 0) open.set(key, left);
    else open.delete(key);
  };
  /**
   * Kept-alive connections of each address waiting for their next request, oldest first. HTTP clients
   * (a carrier's callback client among them) keep idle connections open for reuse; one arriving over
   * the cap closes its address's oldest idle one instead of being refused, as a server closing an idle
   * kept-alive connection is something every HTTP client expects.
   */
  const idle = new Map<string, Set<net.Socket>>();
  const setIdle = (key: string, socket: net.Socket, on: boolean) => {
    let set = idle.get(key);
    if (on) {
      if (!set) idle.set(key, (set = new Set()));
      set.add(socket);
    } else if (set?.delete(socket) && set.size === 0) idle.delete(key);
  };
  const evictIdle = (key: string): boolean => {
    const oldest = idle.get(key)?.values().next().value;
    if (!oldest) return false;
    setIdle(key, oldest, false);
    counted.get(oldest)?.release();
    oldest.destroy();
    return true;
  };
  /** A counted connection's requests: made once per connection, so a request adds no closure of its own. */
  interface Requests {
    key: string;
    inFlight: number;
    /** Its response closed. */
    answered(): void;
  }
  const requestsOf = new WeakMap<net.Socket, Requests>();
  const requestsFor = (socket: net.Socket, key: string): Requests => {
    // After the other 'close' listeners (a carrier callback's connection counts again in one of them).
    const settle = () => {
      if (r.inFlight === 0 && !socket.destroyed && counted.get(socket)?.counts()) setIdle(key, socket, true);
    };
    const r: Requests = {
      key,
      inFlight: 0,
      answered: () => {
        r.inFlight--;
        setImmediate(settle);
      },
    };
    return r;
  };
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const socket = req.socket;
    const r = requestsOf.get(socket);
    if (r === undefined || req.headers.upgrade) return;
    r.inFlight++;
    setIdle(r.key, socket, false);
    res.on('close', r.answered);
  });
  server.on('connection', (socket: net.Socket) => {
    const address = socket.remoteAddress;
    if (address && l.isTrustedProxy(address)) return;
    const key = addressKey(address);
    if (!take(key) && !(evictIdle(key) && take(key))) {
      socket.destroy();
      // One warning per burst, not one per refused connection.
      if (refusedSince++ === 0) log.warn({ address: key, limit: l.maxConnectionsPerIp }, 'connection refused: too many open connections from one address');
      return;
    }
    refusedSince = 0;
    requestsOf.set(socket, requestsFor(socket, key));
    let counting = true;
    const release = () => {
      if (counting) give(key);
      counting = false;
      setIdle(key, socket, false);
    };
    counted.set(socket, { release, retake: () => counting || (counting = take(key)), counts: () => counting });
    socket.once('close', release);
  });
}
