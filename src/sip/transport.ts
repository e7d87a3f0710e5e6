/**
 * SIP over UDP, TCP and TLS (RFC 3261 section 18) on one port (TLS on its own), by hand on node:dgram,
 * node:net and node:tls: framing a stream by Content-Length, keeping one connection per peer, and
 * writing `received`/`rport` into the top Via of what arrives. Every input is bounded: a datagram or a
 * stream's pending bytes beyond MAX_MESSAGE_BYTES drop it (a stream is closed); idle connections close.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import tls from 'node:tls';
import { EventEmitter } from 'node:events';
import {
  formatVia,
  header,
  headerEnd,
  MAX_MESSAGE_BYTES,
  parseMessage,
  parseVia,
  serialize,
  SipParseError,
  type SipMessage,
  type SipRequest,
} from './message.js';

export type TransportName = 'udp' | 'tcp' | 'tls';

export interface Peer {
  transport: TransportName;
  address: string;
  port: number;
}

export interface TransportOptions {
  host: string;
  port: number;
  transports: TransportName[];
  tls?: { port: number; key: Buffer; cert: Buffer };
  /** Check the certificates of TLS peers we connect to (off only outside production, for self-signed test peers). */
  verifyTlsPeers: boolean;
  /** A stream connection unused this long is closed. */
  idleTimeoutMs: number;
  /** Open stream connections at most (more are refused on arrival). */
  maxConnections: number;
}

export interface TransportEvents {
  message: [message: SipMessage, from: Peer];
  /** A message that could not be read; `partial` is set when a 400 can be addressed. */
  malformed: [error: SipParseError, from: Peer];
}

function peerKey(p: Peer): string {
  return `${p.transport}|${p.address}|${p.port}`;
}

export class SipTransport extends EventEmitter<TransportEvents> {
  private udp?: dgram.Socket;
  private tcp?: net.Server;
  private tlsServer?: tls.Server;
  private readonly connections = new Map<string, net.Socket>();
  private boundPort = 0;
  private boundTlsPort = 0;

  constructor(private readonly options: TransportOptions) {
    super();
  }

  get port(): number {
    return this.boundPort;
  }

  get tlsPort(): number {
    return this.boundTlsPort;
  }

  /** Bind UDP and TCP on one port (port 0: a free one both can take). */
  async start(): Promise<void> {
    const { transports } = this.options;
    for (let attempt = 0; attempt < 20; attempt++) {
      try {
        if (transports.includes('udp')) {
          this.udp = await this.bindUdp(this.options.port || this.boundPort);
          this.boundPort = this.udp.address().port;
        }
        if (transports.includes('tcp')) {
          this.tcp = net.createServer((s) => this.adopt(s, 'tcp'));
          await listen(this.tcp, this.boundPort || this.options.port, this.options.host);
          this.boundPort = (this.tcp.address() as net.AddressInfo).port;
        }
        break;
      } catch (e) {
        this.udp?.close();
        this.udp = undefined;
        this.boundPort = 0;
        if (this.options.port || attempt === 19) throw e;
      }
    }
    if (transports.includes('tls') && this.options.tls) {
      const t = this.options.tls;
      this.tlsServer = tls.createServer({ key: t.key, cert: t.cert }, (s) => this.adopt(s, 'tls'));
      await listen(this.tlsServer, t.port, this.options.host);
      this.boundTlsPort = (this.tlsServer.address() as net.AddressInfo).port;
    }
  }

  private bindUdp(port: number): Promise<dgram.Socket> {
    return new Promise((resolve, reject) => {
      const s = dgram.createSocket(net.isIPv6(this.options.host) ? 'udp6' : 'udp4');
      s.once('error', reject);
      s.bind(port, this.options.host, () => {
        s.off('error', reject);
        s.on('error', () => undefined);
        s.on('message', (buf, rinfo) => this.receive(buf, { transport: 'udp', address: rinfo.address, port: rinfo.port }, false));
        resolve(s);
      });
    });
  }

  private adopt(socket: net.Socket, transport: TransportName): net.Socket {
    if (this.connections.size >= this.options.maxConnections) {
      socket.destroy();
      return socket;
    }
    const peer: Peer = { transport, address: socket.remoteAddress ?? '', port: socket.remotePort ?? 0 };
    const key = peerKey(peer);
    this.connections.set(key, socket);
    socket.setTimeout(this.options.idleTimeoutMs, () => socket.destroy());
    socket.on('error', () => undefined);
    socket.on('close', () => {
      if (this.connections.get(key) === socket) this.connections.delete(key);
    });
    let pending: Buffer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      for (;;) {
        // Keep-alive CRLFs between messages (RFC 5626 section 3.5.1).
        let skip = 0;
        while (skip < pending.length && (pending[skip] === 0x0d || pending[skip] === 0x0a)) skip++;
        if (skip) pending = pending.subarray(skip);
        const end = headerEnd(pending);
        if (end < 0) {
          if (pending.length > MAX_MESSAGE_BYTES) socket.destroy();
          return;
        }
        const length = /\r\n(?:content-length|l)[ \t]*:[ \t]*(\d{1,6})[ \t]*\r\n/i.exec(pending.toString('latin1', 0, end + 2));
        if (!length) {
          // A stream without Content-Length cannot be framed any more: answer what can be, then close.
          this.receive(pending.subarray(0, end + 4), peer, true);
          socket.destroy();
          return;
        }
        const total = end + 4 + Number(length[1]);
        if (total > MAX_MESSAGE_BYTES) {
          socket.destroy();
          return;
        }
        if (pending.length < total) return;
        this.receive(pending.subarray(0, total), peer, true);
        pending = pending.subarray(total);
      }
    });
    return socket;
  }

  private receive(buf: Buffer, from: Peer, streamed: boolean): void {
    let message: SipMessage;
    try {
      message = parseMessage(buf, streamed);
    } catch (e) {
      this.emit('malformed', e instanceof SipParseError ? e : new SipParseError(String(e)), from);
      return;
    }
    if (message.kind === 'request') markReceived(message, from);
    this.emit('message', message, from);
  }

  /** Send to a peer: over its open connection for streams (opened if none), or as a datagram. */
  async send(message: SipMessage, to: Peer): Promise<void> {
    const bytes = serialize(message);
    if (to.transport === 'udp') {
      if (!this.udp) throw new Error('UDP is not enabled');
      await new Promise<void>((resolve) => this.udp!.send(bytes, to.port, to.address, () => resolve()));
      return;
    }
    let socket = this.connections.get(peerKey(to));
    if (!socket || socket.destroyed) socket = await this.connect(to);
    socket.write(bytes);
  }

  private connect(to: Peer): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const s =
        to.transport === 'tls'
          ? tls.connect({ host: to.address, port: to.port, rejectUnauthorized: this.options.verifyTlsPeers })
          : net.connect({ host: to.address, port: to.port });
      const ready = to.transport === 'tls' ? 'secureConnect' : 'connect';
      s.once('error', reject);
      s.once(ready, () => {
        s.off('error', reject);
        // The key is the address we dialled, so answers coming back on this connection find it.
        this.adopt(s, to.transport);
        resolve(s);
      });
    });
  }

  /** Whether messages to this peer go over a reliable transport (no retransmission timers). */
  static reliable(p: Peer): boolean {
    return p.transport !== 'udp';
  }

  async stop(): Promise<void> {
    for (const s of this.connections.values()) s.destroy();
    this.connections.clear();
    await Promise.all([
      new Promise<void>((r) => (this.udp ? this.udp.close(() => r()) : r())),
      new Promise<void>((r) => (this.tcp ? this.tcp.close(() => r()) : r())),
      new Promise<void>((r) => (this.tlsServer ? this.tlsServer.close(() => r()) : r())),
    ]);
  }
}

function listen(server: net.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** RFC 3261 section 18.2.1 and RFC 3581: note where a request really came from in its top Via. */
function markReceived(req: SipRequest, from: Peer): void {
  const i = req.headers.findIndex(([n]) => n === 'via');
  const via = parseVia(req.headers[i][1]);
  if (via.host !== from.address) via.params.received = from.address;
  if ('rport' in via.params) via.params.rport = String(from.port);
  req.headers[i] = ['via', formatVia(via)];
}

/** Where responses to a request go (section 18.2.2 with RFC 3581's rport). */
export function responseTarget(req: SipRequest, from: Peer): Peer {
  if (from.transport !== 'udp') return from;
  const via = parseVia(header(req.headers, 'via')!);
  const address = via.params.received ?? via.host;
  const port = via.params.rport ? Number(via.params.rport) : (via.port ?? 5060);
  return { transport: 'udp', address, port };
}
