/**
 * The addresses of SIP trunks, read with ipaddr.js: the sources a trunk's INVITEs may come from
 * (addresses and CIDR ranges, stored as PostgreSQL `cidr`), the address an INVITE came from, and the
 * termination `host[:port]` of its outbound calls.
 */
import ipaddr from 'ipaddr.js';

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** Dotted-quad IPv4 or IPv6 without a zone; ipaddr.js's own `isValid` also takes `127.1` and `0x7f.1`, which no carrier means. */
function parseAddress(raw: string): Address | null {
  if (raw.includes(':')) return !raw.includes('%') && ipaddr.IPv6.isValid(raw) ? ipaddr.IPv6.parse(raw) : null;
  return ipaddr.IPv4.isValidFourPartDecimal(raw) ? ipaddr.IPv4.parse(raw) : null;
}

const fullLength = (a: Address) => (a.kind() === 'ipv4' ? 32 : 128);

export type SourceParse = { ok: true; cidr: string } | { ok: false; suggestion: string | null };

/**
 * An allowed source as PostgreSQL's `cidr` takes it (`203.0.113.0/24`, `198.51.100.7/32`), or why not:
 * a range with host bits set is refused with the network it probably meant, not silently widened.
 */
export function parseSource(raw: string): SourceParse {
  const slash = raw.indexOf('/');
  if (slash < 0) {
    const a = parseAddress(raw);
    return a ? { ok: true, cidr: `${a.toString()}/${fullLength(a)}` } : { ok: false, suggestion: null };
  }
  const a = parseAddress(raw.slice(0, slash));
  const bitsText = raw.slice(slash + 1);
  if (!a || !/^[0-9]{1,3}$/.test(bitsText) || Number(bitsText) > fullLength(a)) return { ok: false, suggestion: null };
  const bits = Number(bitsText);
  const network =
    a.kind() === 'ipv4' ? ipaddr.IPv4.networkAddressFromCIDR(`${a.toString()}/${bits}`) : ipaddr.IPv6.networkAddressFromCIDR(`${a.toString()}/${bits}`);
  if (network.toString() !== a.toString()) return { ok: false, suggestion: `${network.toString()}/${bits}` };
  return { ok: true, cidr: `${a.toString()}/${bits}` };
}

/** A stored `cidr` as the API shows it: a single address without its prefix. */
export function showSource(cidr: string): string {
  const [address, bits] = cidr.split('/');
  const a = parseAddress(address);
  return a && Number(bits) === fullLength(a) ? a.toString() : cidr;
}

/**
 * The address an INVITE came from, as the sources are matched against it: an IPv4 address a dual-stack
 * socket reports as IPv4-mapped IPv6 (`::ffff:203.0.113.9`) is that IPv4 address. Null when not an address.
 */
export function normaliseSourceAddress(raw: string): string | null {
  const a = parseAddress(raw);
  if (!a) return null;
  return a.kind() === 'ipv6' && (a as ipaddr.IPv6).isIPv4MappedAddress() ? (a as ipaddr.IPv6).toIPv4Address().toString() : a.toString();
}

export interface TerminationHost {
  host: string;
  /** Null: the transport's default (5060, 5061 with TLS). */
  port: number | null;
}

export type HostParse = { ok: true; value: TerminationHost } | { ok: false; message: string };

/** `host[:port]`: a DNS name, a dotted-quad IPv4 address or a bracketed IPv6 address, and a port 1-65535. */
export function parseHost(raw: string): HostParse {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::([0-9]{1,5}))?$/.exec(raw);
  if (!m) return { ok: false, message: `'${raw}' is not host[:port] (an IPv6 address goes in brackets: [2001:db8::1]:5060).` };
  const port = m[3] === undefined ? null : Number(m[3]);
  if (port !== null && (port < 1 || port > 65535)) return { ok: false, message: `The port ${m[3]} is not 1-65535.` };
  if (m[1] !== undefined) {
    const a = parseAddress(m[1]);
    if (!a || a.kind() !== 'ipv6') return { ok: false, message: `'${m[1]}' is not an IPv6 address.` };
    return { ok: true, value: { host: a.toString(), port } };
  }
  const name = m[2];
  if (/^[0-9.]+$/.test(name)) {
    return parseAddress(name) ? { ok: true, value: { host: name, port } } : { ok: false, message: `'${name}' is not an IPv4 address.` };
  }
  const labels = name.split('.');
  if (name.length > 253 || labels.some((l) => !/^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/.test(l)))
    return { ok: false, message: `'${name}' is not a host name.` };
  return { ok: true, value: { host: name.toLowerCase(), port } };
}

export const defaultPort = (transport: 'udp' | 'tcp' | 'tls') => (transport === 'tls' ? 5061 : 5060);

/** `host:port` with an IPv6 host in brackets. */
export function showHost(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
