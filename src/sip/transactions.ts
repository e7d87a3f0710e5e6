/**
 * RFC 3261 section 17 transactions, client and server, INVITE and non-INVITE, with their timers
 * (A-K) taken from SipTimers (T1, T2, T4 come from config). An INVITE server transaction ends when
 * it sends a 2xx (RFC 6026's Accepted state is the dialog's job here: the user agent resends its 2xx
 * until the ACK). Timers use the event loop's clock; nothing here reads the wall time.
 */
import { randomBytes } from 'node:crypto';
import { formatVia, header, makeResponse, parseCSeq, parseVia, type SipRequest, type SipResponse } from './message.js';
import { SipTransport, type Peer } from './transport.js';

export interface SipTimers {
  t1: number;
  t2: number;
  t4: number;
}

export const MAGIC = 'z9hG4bK';

export function newBranch(): string {
  return MAGIC + randomBytes(12).toString('base64url');
}

export function newTag(): string {
  return randomBytes(8).toString('hex');
}

/** A server transaction's key (section 17.2.3): branch, sent-by and method, ACK and CANCEL folded as the RFC says. */
export function serverKey(req: SipRequest, methodOverride?: string): string {
  const via = parseVia(header(req.headers, 'via')!);
  const method = methodOverride ?? (req.method === 'ACK' ? 'INVITE' : req.method);
  const branch = via.params.branch ?? '';
  if (branch.startsWith(MAGIC)) return `${branch}|${via.host}:${via.port ?? ''}|${method}`;
  // RFC 2543 peers: Call-ID, CSeq number, From tag and top Via.
  const cseq = parseCSeq(header(req.headers, 'cseq')!);
  return `${header(req.headers, 'call-id')}|${cseq.seq}|${header(req.headers, 'from')}|${formatVia(via)}|${method}`;
}

function clientKey(branch: string, method: string): string {
  return `${branch}|${method === 'ACK' ? 'INVITE' : method}`;
}

type Send = (m: SipRequest | SipResponse) => void;

export class ServerTransaction {
  private last?: SipResponse;
  private timers: NodeJS.Timeout[] = [];
  private state: 'proceeding' | 'completed' | 'confirmed' | 'terminated' = 'proceeding';
  /** Set once the request was answered with a final response. */
  final?: SipResponse;
  onTerminated: () => void = () => undefined;
  /** Timer H: the ACK for a final non-2xx response never came. */
  onAckTimeout: () => void = () => undefined;

  constructor(
    readonly request: SipRequest,
    readonly peer: Peer,
    private readonly send: Send,
    private readonly timers_: SipTimers,
  ) {}

  get isInvite(): boolean {
    return this.request.method === 'INVITE';
  }

  respond(res: SipResponse): void {
    if (this.state !== 'proceeding') return;
    this.last = res;
    this.send(res);
    if (res.status < 200) return;
    this.final = res;
    const reliable = SipTransport.reliable(this.peer);
    const { t1, t2 } = this.timers_;
    if (!this.isInvite) {
      this.state = 'completed';
      this.after(reliable ? 0 : 64 * t1, () => this.terminate()); // timer J
    } else if (res.status < 300) {
      this.terminate();
    } else {
      this.state = 'completed';
      if (!reliable) {
        const resend = (interval: number) =>
          this.after(interval, () => {
            this.send(res);
            resend(Math.min(2 * interval, t2));
          }); // timer G
        resend(t1);
      }
      this.after(64 * t1, () => {
        this.onAckTimeout();
        this.terminate();
      }); // timer H
    }
  }

  /** A retransmission of the request, or the ACK of a non-2xx final response. */
  receive(req: SipRequest): void {
    if (req.method === 'ACK') {
      if (this.state !== 'completed') return;
      this.state = 'confirmed';
      this.clear();
      this.after(SipTransport.reliable(this.peer) ? 0 : this.timers_.t4, () => this.terminate()); // timer I
      return;
    }
    if (this.last && this.state !== 'confirmed') this.send(this.last);
  }

  terminate(): void {
    if (this.state === 'terminated') return;
    this.state = 'terminated';
    this.clear();
    this.onTerminated();
  }

  private after(ms: number, fn: () => void): void {
    this.timers.push(setTimeout(fn, ms));
  }

  private clear(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers = [];
  }
}

export class ClientTransaction {
  private timers: NodeJS.Timeout[] = [];
  private state: 'calling' | 'proceeding' | 'completed' | 'terminated' = 'calling';
  private finalSeen = false;
  onTerminated: () => void = () => undefined;

  constructor(
    readonly request: SipRequest,
    readonly peer: Peer,
    private readonly send: Send,
    private readonly timers_: SipTimers,
    /** Every response the transaction user should see, including the 408 of a timeout (synthetic: true). */
    private readonly onResponse: (res: SipResponse, synthetic: boolean) => void,
  ) {}

  get branch(): string {
    return parseVia(header(this.request.headers, 'via')!).params.branch ?? '';
  }

  start(): void {
    this.send(this.request);
    const { t1, t2 } = this.timers_;
    const invite = this.request.method === 'INVITE';
    if (!SipTransport.reliable(this.peer)) {
      const resend = (interval: number) =>
        this.after(interval, () => {
          if (this.state === 'completed') return;
          if (invite && this.state !== 'calling') return;
          this.send(this.request);
          resend(invite ? 2 * interval : Math.min(2 * interval, t2));
        }); // timer A / E
      resend(t1);
    }
    this.after(64 * t1, () => {
      if (this.state === 'calling' || this.state === 'proceeding') {
        if (invite && this.state === 'proceeding') return; // an INVITE that rings waits for its answer (the UA's ring timeout ends it)
        this.onResponse(makeResponse(this.request, 408), true);
        this.terminate();
      }
    }); // timer B / F
  }

  receive(res: SipResponse): void {
    if (this.state === 'terminated') return;
    const invite = this.request.method === 'INVITE';
    if (res.status < 200) {
      if (this.state === 'calling') this.state = 'proceeding';
      if (!this.finalSeen) this.onResponse(res, false);
      return;
    }
    if (invite && res.status < 300) {
      // Every 2xx goes to the UA (retransmitted 2xx are ACKed again by the dialog), for 64*T1.
      this.onResponse(res, false);
      if (!this.finalSeen) {
        this.finalSeen = true;
        this.state = 'completed';
        this.clear();
        this.after(64 * this.timers_.t1, () => this.terminate());
      }
      return;
    }
    if (invite) this.send(ackFor(this.request, res));
    if (this.finalSeen) return;
    this.finalSeen = true;
    this.state = 'completed';
    this.clear();
    this.onResponse(res, false);
    const reliable = SipTransport.reliable(this.peer);
    this.after(reliable ? 0 : invite ? 32_000 : this.timers_.t4, () => this.terminate()); // timer D / K
  }

  terminate(): void {
    if (this.state === 'terminated') return;
    this.state = 'terminated';
    this.clear();
    this.onTerminated();
  }

  private after(ms: number, fn: () => void): void {
    this.timers.push(setTimeout(fn, ms));
  }

  private clear(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers = [];
  }
}

/** The ACK of a non-2xx final response (section 17.1.1.3): same branch, the response's To. */
export function ackFor(invite: SipRequest, res: SipResponse): SipRequest {
  const headers: SipRequest['headers'] = [];
  for (const [n, v] of invite.headers) {
    if (n === 'via') {
      if (!headers.some(([h]) => h === 'via')) headers.push([n, v]);
    } else if (n === 'from' || n === 'call-id' || n === 'route' || n === 'max-forwards') headers.push([n, v]);
  }
  headers.push(['to', header(res.headers, 'to')!]);
  headers.push(['cseq', `${parseCSeq(header(invite.headers, 'cseq')!).seq} ACK`]);
  return { kind: 'request', method: 'ACK', uri: invite.uri, headers, body: Buffer.alloc(0) };
}

/** Both tables of live transactions and the matching of what arrives to them. */
export class TransactionTable {
  private readonly servers = new Map<string, ServerTransaction>();
  private readonly clients = new Map<string, ClientTransaction>();

  constructor(
    private readonly timers: SipTimers,
    private readonly sendTo: (m: SipRequest | SipResponse, peer: Peer) => void,
  ) {}

  get size(): number {
    return this.servers.size + this.clients.size;
  }

  findServer(req: SipRequest, method?: string): ServerTransaction | undefined {
    return this.servers.get(serverKey(req, method));
  }

  createServer(req: SipRequest, from: Peer, responseTo: Peer): ServerTransaction {
    const key = serverKey(req);
    const tx = new ServerTransaction(req, from, (m) => this.sendTo(m, responseTo), this.timers);
    tx.onTerminated = () => {
      if (this.servers.get(key) === tx) this.servers.delete(key);
    };
    this.servers.set(key, tx);
    return tx;
  }

  /** Send a request in a new client transaction; `req`'s top Via gets a fresh branch unless it is a CANCEL. */
  createClient(req: SipRequest, to: Peer, onResponse: (res: SipResponse, synthetic: boolean) => void): ClientTransaction {
    const tx = new ClientTransaction(req, to, (m) => this.sendTo(m, to), this.timers, onResponse);
    const key = clientKey(tx.branch, req.method);
    tx.onTerminated = () => {
      if (this.clients.get(key) === tx) this.clients.delete(key);
    };
    this.clients.set(key, tx);
    tx.start();
    return tx;
  }

  /** Hand a response to its client transaction; false when none matches (a stray or a late 2xx). */
  matchResponse(res: SipResponse): boolean {
    const via = parseVia(header(res.headers, 'via')!);
    const method = parseCSeq(header(res.headers, 'cseq')!).method;
    const tx = this.clients.get(clientKey(via.params.branch ?? '', method));
    if (!tx) return false;
    tx.receive(res);
    return true;
  }

  stop(): void {
    for (const t of [...this.servers.values(), ...this.clients.values()]) t.terminate();
  }
}
