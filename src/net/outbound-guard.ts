/**
 * The outbound-request guard (server-side request forgery): every URL the service calls on a user's
 * behalf (webhooks, HTTP tools, MCP servers) must be absolute http(s) and must resolve only to public
 * unicast addresses (never loopback, private, link-local, metadata, or any other special-purpose
 * range) unless the address or host is in OUTBOUND_ALLOW_LIST. Outside production loopback is allowed
 * so the sandbox works on one machine. The check runs at registration (`checkUrl`) and again at connect time on the address
 * actually resolved (`guardedLookup`), so DNS cannot be used to get around it. Node skips `lookup`
 * for a literal IP host, so callers run `checkUrl` again right before each request.
 */
import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

export interface OutboundPolicy {
  production: boolean;
  /** Hostnames, IP addresses or CIDR ranges that may be called although internal. */
  allowList: string[];
}

export class BlockedUrlError extends Error {
  constructor(
    message: string,
    readonly reason: 'invalid_url' | 'blocked_address' | 'unresolvable',
  ) {
    super(message);
  }
}

/** Global unicast IPv6 (2000::/3); IPv4-compatible (::/96), site-local, discard and the rest lie outside it. */
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

function inAllowList(policy: OutboundPolicy, host: string, address?: string): boolean {
  for (const entry of policy.allowList) {
    if (entry.toLowerCase() === host.toLowerCase()) return true;
    if (!address) continue;
    try {
      if (entry.includes('/')) {
        const [range, bits] = ipaddr.parseCIDR(entry);
        const addr = ipaddr.process(address);
        if (addr.kind() === range.kind() && addr.match([range, bits] as never)) return true;
      } else if (ipaddr.isValid(entry) && ipaddr.process(entry).toString() === ipaddr.process(address).toString()) {
        return true;
      }
    } catch {
      // an unparsable entry matches nothing
    }
  }
  return false;
}

/**
 * Why an address may not be called, or null when it may. Only public unicast addresses may: those the
 * IP library classes as plain `unicast` (every special-purpose range it knows is something else),
 * and for IPv6 only inside global unicast 2000::/3. Listing what is allowed rather than what is not
 * keeps ranges nobody thought of (IPv4-compatible IPv6 such as ::7f00:1, fec0::/10, 5f00::/16) out.
 * IPv4-mapped IPv6 is judged as the IPv4 address it carries. Outside production loopback is allowed.
 */
export function blockedReason(policy: OutboundPolicy, host: string, address: string): string | null {
  if (inAllowList(policy, host, address)) return null;
  const addr = ipaddr.process(address);
  const range = addr.range();
  if (range === 'loopback') return policy.production ? range : null;
  if (range !== 'unicast') return range;
  if (addr.kind() === 'ipv6' && !addr.match(GLOBAL_UNICAST_V6 as never)) return 'non-global IPv6';
  return null;
}

/** Checks the form of a URL and, when it names an IP or resolves now, its address. */
export async function checkUrl(policy: OutboundPolicy, raw: string): Promise<URL> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new BlockedUrlError('The URL must be an absolute http:// or https:// URL.', 'invalid_url');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new BlockedUrlError('The URL must use http or https.', 'invalid_url');
  if (url.username || url.password) throw new BlockedUrlError('The URL must not carry credentials; use headers instead.', 'invalid_url');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const addresses = net.isIP(host)
    ? [host]
    : await dns.promises.lookup(host, { all: true }).then(
        (r) => r.map((a) => a.address),
        () => null,
      );
  if (addresses === null) throw new BlockedUrlError(`The host '${host}' does not resolve.`, 'unresolvable');
  for (const address of addresses) {
    const reason = blockedReason(policy, host, address);
    if (reason) throw new BlockedUrlError(`The URL resolves to a ${reason} address, which this service does not call.`, 'blocked_address');
  }
  return url;
}

/**
 * A `lookup` for http.request/https.request/net.connect that refuses blocked addresses at connect time.
 * Pass it as the `lookup` option of the request.
 */
export function guardedLookup(policy: OutboundPolicy): net.LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, results) => {
      if (err) return callback(err, '', 0);
      const list = results as dns.LookupAddress[];
      for (const r of list) {
        const reason = blockedReason(policy, hostname, r.address);
        if (reason) {
          const blocked = Object.assign(
            new BlockedUrlError(`${hostname} resolves to a ${reason} address, which this service does not call.`, 'blocked_address'),
            { code: 'EBLOCKED' },
          );
          return callback(blocked, '', 0);
        }
      }
      if ((options as dns.LookupOptions).all) return (callback as unknown as (e: null, r: dns.LookupAddress[]) => void)(null, list);
      callback(null, list[0].address, list[0].family);
    });
  };
}
