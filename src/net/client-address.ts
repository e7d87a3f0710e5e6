/**
 * The address a request comes from, for per-address limits (sign-up/login attempts, WebSocket
 * connection attempts). Headers are believed only from proxies listed in TRUSTED_PROXIES.
 */
import type { IncomingMessage } from 'node:http';
import ipaddr from 'ipaddr.js';

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

function normalise(ip: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  if (!ipaddr.isValid(ip)) return null;
  const parsed = ipaddr.parse(ip);
  return parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress() ? (parsed as ipaddr.IPv6).toIPv4Address() : parsed;
}

/**
 * The client address of a request: the socket's peer, or, when that peer is a trusted proxy,
 * the right-most X-Forwarded-For entry that is not itself a trusted proxy. No proxy is trusted by default.
 */
/** Whether an address is one of TRUSTED_PROXIES (an address or a CIDR range). */
export function trustedProxyMatcher(trustedProxies: string[]): (ip: string) => boolean {
  const ranges: Range[] = trustedProxies.map((p) =>
    p.includes('/') ? ipaddr.parseCIDR(p) : ([normalise(p)!, normalise(p)!.kind() === 'ipv4' ? 32 : 128] as Range),
  );
  return (ip) => {
    const a = normalise(ip);
    return a !== null && ranges.some(([net, bits]) => a.kind() === net.kind() && a.match(net as never, bits));
  };
}

export function clientAddressResolver(trustedProxies: string[]): (req: IncomingMessage) => string {
  const trusted = trustedProxyMatcher(trustedProxies);
  return (req) => {
    const peer = req.socket.remoteAddress ?? '';
    const peerNorm = normalise(peer)?.toString() ?? peer;
    if (!trustedProxies.length || !trusted(peer)) return peerNorm;
    const header = req.headers['x-forwarded-for'];
    const hops = (Array.isArray(header) ? header.join(',') : (header ?? ''))
      .split(',')
      .map((h) => h.trim())
      .filter(Boolean);
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = normalise(hops[i]);
      if (!hop) return peerNorm;
      if (!trusted(hops[i])) return hop.toString();
    }
    return peerNorm;
  };
}
