/**
 * Rate limits of realtime sessions: the per-IP WebSocket connection-attempt limit (rate-limiter-flexible
 * on PostgreSQL, so instances sharing the database share the count), and the client address it keys on.
 * The per-workspace creation limit lives in RealtimeStore.issueToken (it counts the issued tokens).
 */
import type { IncomingMessage } from 'node:http';
import type { Knex } from 'knex';
import ipaddr from 'ipaddr.js';
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

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

function normalise(ip: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  if (!ipaddr.isValid(ip)) return null;
  const parsed = ipaddr.parse(ip);
  return parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress() ? (parsed as ipaddr.IPv6).toIPv4Address() : parsed;
}

/**
 * The client address of an upgrade request: the socket's peer, or, when that peer is a trusted proxy,
 * the right-most X-Forwarded-For entry that is not itself a trusted proxy. No proxy is trusted by default.
 */
export function clientAddressResolver(trustedProxies: string[]): (req: IncomingMessage) => string {
  const ranges: Range[] = trustedProxies.map((p) => (p.includes('/') ? ipaddr.parseCIDR(p) : ([normalise(p)!, normalise(p)!.kind() === 'ipv4' ? 32 : 128] as Range)));
  const trusted = (ip: string) => {
    const a = normalise(ip);
    return a !== null && ranges.some(([net, bits]) => a.kind() === net.kind() && a.match(net as never, bits));
  };
  return (req) => {
    const peer = req.socket.remoteAddress ?? '';
    const peerNorm = normalise(peer)?.toString() ?? peer;
    if (!ranges.length || !trusted(peer)) return peerNorm;
    const header = req.headers['x-forwarded-for'];
    const hops = (Array.isArray(header) ? header.join(',') : header ?? '').split(',').map((h) => h.trim()).filter(Boolean);
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = normalise(hops[i]);
      if (!hop) return peerNorm;
      if (!trusted(hops[i])) return hop.toString();
    }
    return peerNorm;
  };
}
