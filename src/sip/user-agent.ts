/**
 * The service's SIP user agent: one per process, taking calls from trunks and phones and placing
 * calls through them. It routes what the transport hands it to transactions, dialogs and calls, and
 * holds the trust rules: every out-of-dialog request from a source refused too often is dropped
 * unanswered; an INVITE is let in only as `authenticateInbound` says (refused with a bare 403, no hint
 * of which numbers exist; challenged with digest 401/407, nonces single use); REFER from a peer is
 * refused (no call is relayed anywhere but to the agent) unless `acceptRefer` (a simulated far end).
 */
import dns from 'node:dns/promises';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { SipCall, type CallControl, type CallEnded } from './call.js';
import { dialogAsClient, dialogAsServer, dialogKey, inDialogRequest } from './dialog.js';
import { answerChallenge, DigestServer } from './digest.js';
import {
  formatNameAddr,
  formatUri,
  formatVia,
  header,
  makeResponse,
  parseAuthorization,
  parseCSeq,
  parseNameAddr,
  parseUri,
  reasonPhrase,
  tagOf,
  type Headers,
  type SipRequest,
  type SipResponse,
} from './message.js';
import { outcomeOfStatus } from './outcomes.js';
import type { RtpPacer } from './rtp-clock.js';
import { RtpSession } from './rtp-session.js';
import { answer as answerOffer, offer, readAnswer, SdpError, type Codec, type LocalMedia } from './sdp.js';
import { newBranch, newTag, ServerTransaction, TransactionTable, type SipTimers } from './transactions.js';
import { responseTarget, SipTransport, type Peer, type TransportName } from './transport.js';

export const ALLOW = 'INVITE, ACK, CANCEL, BYE, OPTIONS, NOTIFY, UPDATE, INFO';
const SUPPORTED = 'timer';

export interface InboundRequest {
  source: Peer;
  /** User parts of From and To (the caller's and the called number, usually) and the whole URIs. */
  from: string;
  to: string;
  fromUri: string;
  toUri: string;
  callId: string;
  /**
   * The digest credentials the INVITE presented (Authorization, or Proxy-Authorization), when they
   * answer a fresh nonce of ours: `matches(password)` says whether they are right for that password
   * (and takes the nonce: it is single use). A stale or forged nonce presents nothing.
   */
  digest?: PresentedDigest;
}

export interface PresentedDigest {
  username: string;
  realm: string;
  matches(password: string): boolean;
}

type PasswordLookup = (username: string) => string | undefined | Promise<string | undefined>;

export type InboundDecision =
  | { action: 'allow'; context?: unknown }
  | { action: 'refuse' }
  /**
   * Ask for digest credentials in `realm` (401, or 407 with `proxy`). With `password`, the stack checks
   * an answer itself: it looks the username up (undefined: unknown, 403) and lets the call in when the
   * answer is right. Without, the decision is asked again with the answer as `digest`.
   */
  | { action: 'challenge'; realm: string; proxy?: boolean; password?: PasswordLookup; context?: unknown };

export interface SipLog {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

export interface SipUserAgentOptions {
  /** Interface to bind. */
  host: string;
  /** UDP and TCP port (0: a free one). */
  port: number;
  /** The address peers reach us at, written into Via, Contact and SDP. */
  advertisedAddress: string;
  transports: TransportName[];
  tls?: { port: number; key: Buffer; cert: Buffer };
  /** Check TLS peers' certificates when we connect (true in production). */
  verifyTlsPeers: boolean;
  rtp: { min: number; max: number };
  timers: SipTimers;
  codecs?: Codec[];
  nonceTtlMs: number;
  /** Refusals (403, bad digest, malformed, unknown method) a source may earn per minute before it is ignored. */
  refusalsPerMinute: number;
  jitterDepth: number;
  /** The peer's audio handed on at the shared RTP clock's tick (SIP_RTP_RECEIVE_ON_TICK); default true. */
  receiveOnTick?: boolean;
  /**
   * What paces the calls' RTP; default the process's shared clock. The sandbox's SIP far end gives the
   * frame clock its callees talk on, so their speech is queued and sent in step.
   */
  rtpPacer?: RtpPacer;
  /** Session-Expires we ask for on outbound calls, seconds (RFC 4028); 0: none. */
  sessionExpiresS: number;
  /** The shortest session interval we accept (Min-SE; RFC 4028 says at least 90). */
  minSessionExpiresS: number;
  idleConnectionMs: number;
  maxConnections: number;
  authenticateInbound: (req: InboundRequest) => InboundDecision | Promise<InboundDecision>;
  /**
   * Take a peer's REFER (202, a `referred` event on the call, whose NOTIFYs `notifyTransfer` sends)
   * instead of refusing it with 403. Only for a far end that plays a phone network (the sandbox's):
   * the service's user agent relays no call anywhere but to the agent.
   */
  acceptRefer?: boolean;
  log: SipLog;
}

export interface OutboundCallOptions {
  /** The trunk or phone to send the INVITE to. */
  host: string;
  port?: number;
  transport?: TransportName;
  /** The called number or user, and the caller's. */
  to: string;
  from: string;
  fromDisplay?: string;
  credentials?: { username: string; password: string };
  headers?: Headers;
}

export interface UserAgentEvents {
  /** An inbound call let in by authenticateInbound, ringing: answer() or reject() it. */
  incoming: [call: SipCall];
  /** A request refused or dropped, for logs and metrics. */
  refused: [source: Peer, why: string];
}

interface CallInternals {
  invite: SipRequest;
  serverTx?: ServerTransaction;
  local: LocalMedia;
  /** Outbound: the INVITE's client transaction branch, CSeq and whether it has been provisionally answered. */
  provisional?: boolean;
  cancelWanted?: boolean;
  authTried?: boolean;
  ack?: SipRequest;
  okRetransmit?: NodeJS.Timeout;
  sessionTimer?: NodeJS.Timeout;
  /** Inbound: the SDP answer the 200 will carry. */
  answerSdp?: string;
  canceled?: boolean;
  credentials?: OutboundCallOptions['credentials'];
}

export class SipUserAgent extends EventEmitter<UserAgentEvents> implements CallControl {
  private readonly transport: SipTransport;
  private readonly transactions: TransactionTable;
  private readonly digest: DigestServer;
  private readonly refusals: RateLimiterMemory;
  private readonly dialogs = new Map<string, SipCall>();
  /** Inbound calls not yet answered, by the INVITE's server transaction key (for CANCEL). */
  private readonly pending = new Map<string, SipCall>();
  private readonly internals = new WeakMap<SipCall, CallInternals>();
  private readonly calls = new Set<SipCall>();
  private readonly codecs: Codec[];

  constructor(private readonly options: SipUserAgentOptions) {
    super();
    this.codecs = options.codecs ?? ['PCMU', 'PCMA'];
    this.transport = new SipTransport({
      host: options.host,
      port: options.port,
      transports: options.transports,
      tls: options.tls,
      verifyTlsPeers: options.verifyTlsPeers,
      idleTimeoutMs: options.idleConnectionMs,
      maxConnections: options.maxConnections,
    });
    this.transactions = new TransactionTable(options.timers, (m, peer) => {
      this.transport.send(m, peer).catch((e: Error) => options.log.debug({ err: e.message }, 'sip send failed'));
    });
    this.digest = new DigestServer(options.nonceTtlMs);
    this.refusals = new RateLimiterMemory({ points: options.refusalsPerMinute, duration: 60 });
    this.transport.on('message', (m, from) => {
      try {
        if (m.kind === 'request') void this.onRequest(m, from).catch((e: Error) => this.onRequestError(m, from, e));
        else this.onResponse(m);
      } catch (e) {
        options.log.warn({ err: (e as Error).message }, 'sip message not handled');
      }
    });
    this.transport.on('malformed', (e, from) => {
      void this.refuse(from, `malformed: ${e.message}`)
        .then((counted) => {
          if (counted && e.partial) return this.transport.send(makeResponse(e.partial, 400), responseTarget(e.partial, from));
        })
        .catch((err: Error) => options.log.debug({ err: err.message }, 'sip 400 not sent'));
    });
  }

  get port(): number {
    return this.transport.port;
  }

  get tlsPort(): number {
    return this.transport.tlsPort;
  }

  get activeCalls(): number {
    return this.calls.size;
  }

  async start(): Promise<void> {
    await this.transport.start();
  }

  async stop(): Promise<void> {
    for (const call of [...this.calls]) this.hangup(call);
    this.transactions.stop();
    await this.transport.stop();
  }

  // ---- Trust ----

  private async blocked(from: Peer): Promise<boolean> {
    const r = await this.refusals.get(from.address);
    return r !== null && r.remainingPoints <= 0;
  }

  /** Count a refusal against the source; false when it is over its allowance (then nothing is answered). */
  private async refuse(from: Peer, why: string): Promise<boolean> {
    this.emit('refused', from, why);
    try {
      await this.refusals.consume(from.address);
      return true;
    } catch {
      return false;
    }
  }

  private onRequestError(req: SipRequest, from: Peer, e: Error): void {
    this.options.log.warn({ err: e.message, method: req.method, source: from.address }, 'sip request failed');
    try {
      const tx = this.transactions.findServer(req);
      if (tx && !tx.final) tx.respond(makeResponse(req, e instanceof SdpError ? e.status : 500, newTag()));
    } catch {
      // Nothing more can be said to a request this broken.
    }
  }

  // ---- Requests ----

  private async onRequest(req: SipRequest, from: Peer): Promise<void> {
    const replyTo = responseTarget(req, from);
    const existing = this.transactions.findServer(req);
    if (existing) {
      existing.receive(req);
      return;
    }
    if (req.method === 'CANCEL') return this.onCancel(req, replyTo, from);
    const toTag = tagOf(header(req.headers, 'to')!);
    if (toTag) return this.onInDialog(req, from, replyTo, toTag);
    if (req.method === 'ACK') return;
    if (await this.blocked(from)) return;
    const tx = this.transactions.createServer(req, from, replyTo);
    switch (req.method) {
      case 'INVITE':
        return this.onInvite(req, from, tx);
      case 'OPTIONS':
        tx.respond(
          makeResponse(req, 200, newTag(), [
            ['allow', ALLOW],
            ['accept', 'application/sdp'],
            ['supported', SUPPORTED],
          ]),
        );
        return;
      default:
        if (await this.refuse(from, `method ${req.method} outside a dialog`)) tx.respond(makeResponse(req, 405, newTag(), [['allow', ALLOW]]));
    }
  }

  private async onInvite(req: SipRequest, from: Peer, tx: ServerTransaction): Promise<void> {
    tx.respond(makeResponse(req, 100));
    const fromA = parseNameAddr(header(req.headers, 'from')!);
    const toA = parseNameAddr(header(req.headers, 'to')!);
    const fromUri = parseUri(fromA.uri);
    const toUri = parseUri(toA.uri);
    const request: InboundRequest = {
      source: from,
      from: fromUri.user ?? '',
      to: toUri.user ?? parseUri(req.uri).user ?? '',
      fromUri: fromA.uri,
      toUri: toA.uri,
      callId: header(req.headers, 'call-id')!,
    };
    const presented = this.presentedDigest(req);
    if (presented.digest) request.digest = presented.digest;
    const decision = await this.options.authenticateInbound(request);
    if (decision.action === 'refuse') {
      if (await this.refuse(from, 'inbound refused')) tx.respond(makeResponse(req, 403, newTag()));
      else tx.terminate();
      return;
    }
    if (decision.action === 'challenge' && !decision.password) {
      const status = decision.proxy ? 407 : 401;
      const name = decision.proxy ? 'proxy-authenticate' : 'www-authenticate';
      return tx.respond(makeResponse(req, status, newTag(), [[name, this.digest.challenge(decision.realm, presented.stale)]]));
    }
    if (decision.action === 'challenge' && decision.password) {
      const verdict = await this.checkDigest(req, { ...decision, password: decision.password });
      if (verdict !== 'ok') {
        if (verdict === 'wrong' && !(await this.refuse(from, 'wrong digest'))) return tx.terminate();
        if (verdict === 'wrong') return tx.respond(makeResponse(req, 403, newTag()));
        const status = decision.proxy ? 407 : 401;
        const name = decision.proxy ? 'proxy-authenticate' : 'www-authenticate';
        return tx.respond(makeResponse(req, status, newTag(), [[name, this.digest.challenge(decision.realm, verdict === 'stale')]]));
      }
    }
    const context = decision.context;
    const session = parseSessionExpires(req);
    const minSe = this.options.minSessionExpiresS;
    if (session && session.seconds < minSe) return tx.respond(makeResponse(req, 422, newTag(), [['min-se', String(minSe)]]));

    const rtp = await RtpSession.open(
      { host: this.options.host, min: this.options.rtp.min, max: this.options.rtp.max },
      { jitterDepth: this.options.jitterDepth, maxQueuedFrames: 3000, handOnTick: this.options.receiveOnTick, clock: this.options.rtpPacer },
    );
    const local: LocalMedia = {
      address: this.options.advertisedAddress,
      port: rtp.port,
      codecs: this.codecs,
      sessionId: String(Date.now()),
      version: 1,
      direction: 'sendrecv',
    };
    const localTag = newTag();
    let negotiatedSdp: string;
    let codec: Codec;
    try {
      if (!/^application\/sdp/i.test(header(req.headers, 'content-type') ?? '') || req.body.length === 0) {
        throw new SdpError('no session description (late offers are not taken)', 488);
      }
      const a = answerOffer(req.body.toString('utf8'), local);
      rtp.setPeer(a.negotiated);
      negotiatedSdp = a.sdp;
      codec = a.negotiated.codec;
    } catch (e) {
      rtp.close();
      if (e instanceof SdpError) {
        tx.respond(makeResponse(req, e.status, localTag, e.status === 488 ? [['warning', '304 - "no acceptable media"']] : []));
        return;
      }
      throw e;
    }
    const call = new SipCall(
      'inbound',
      request.callId,
      { user: request.from, uri: request.fromUri, display: fromA.display },
      { user: request.to, uri: request.toUri },
      from,
      rtp,
      this,
      context,
    );
    call.codec = codec;
    call.dialog = dialogAsServer(req, localTag, from);
    this.internals.set(call, { invite: req, serverTx: tx, local, answerSdp: negotiatedSdp });
    const key = dialogKey(call.dialog.callId, localTag, call.dialog.remoteTag);
    this.dialogs.set(key, call);
    this.calls.add(call);
    call.once('ended', () => {
      this.dialogs.delete(key);
      this.calls.delete(call);
      this.clearTimers(call);
    });
    this.pending.set(txKeyOf(req), call);
    tx.onTerminated = () => this.pending.delete(txKeyOf(req));
    tx.respond(makeResponse(req, 180, localTag, [['contact', this.contact(from.transport)]]));
    this.emit('incoming', call);
  }

  /** The credentials an INVITE presents, when they answer a fresh nonce of ours; `stale` when its nonce expired or was taken. */
  private presentedDigest(req: SipRequest): { digest?: PresentedDigest; stale: boolean } {
    const value = header(req.headers, 'authorization') ?? header(req.headers, 'proxy-authorization');
    if (!value) return { stale: false };
    let params: Record<string, string>;
    try {
      const parsed = parseAuthorization(value);
      params = parsed.params;
      if (parsed.scheme.toLowerCase() !== 'digest' || !(params.username && params.realm && params.nonce && params.response && params.uri)) {
        return { stale: false };
      }
    } catch {
      return { stale: false };
    }
    const state = this.digest.nonceState(params.nonce);
    if (state !== 'fresh') return { stale: state === 'stale' };
    const digest: PresentedDigest = {
      username: params.username,
      realm: params.realm,
      matches: (password) => {
        if (this.digest.nonceState(params.nonce) !== 'fresh') return false;
        const ok = this.digest.responseMatches(params, req.method, params.realm, password);
        if (ok) this.digest.markUsed(params.nonce);
        return ok;
      },
    };
    return { digest, stale: false };
  }

  private async checkDigest(req: SipRequest, d: { realm: string; proxy?: boolean; password: PasswordLookup }): Promise<'ok' | 'stale' | 'wrong' | 'none'> {
    const value = header(req.headers, d.proxy ? 'proxy-authorization' : 'authorization');
    if (!value) return 'none';
    let params: Record<string, string>;
    try {
      const parsed = parseAuthorization(value);
      if (parsed.scheme.toLowerCase() !== 'digest') return 'wrong';
      params = parsed.params;
    } catch {
      return 'wrong';
    }
    const password = params.username ? await d.password(params.username) : undefined;
    if (password === undefined) return 'wrong';
    return this.digest.verify(params, req.method, d.realm, password);
  }

  private onCancel(req: SipRequest, replyTo: Peer, from: Peer): void {
    const tx = this.transactions.createServer(req, from, replyTo);
    const call = this.pending.get(txKeyOf(req));
    if (!call || call.state === 'ended') {
      tx.respond(makeResponse(req, 481, newTag()));
      return;
    }
    tx.respond(makeResponse(req, 200));
    const inner = this.internals.get(call)!;
    if (inner.serverTx && !inner.serverTx.final) inner.serverTx.respond(makeResponse(inner.invite, 487, call.dialog!.localTag));
    call.finish({ outcome: 'canceled', reason: 'canceled', status: 487, by: 'remote' });
  }

  private onInDialog(req: SipRequest, from: Peer, replyTo: Peer, toTag: string): void {
    const callId = header(req.headers, 'call-id')!;
    const fromTag = tagOf(header(req.headers, 'from')!) ?? '';
    const call = this.dialogs.get(dialogKey(callId, toTag, fromTag));
    if (req.method === 'ACK') {
      if (call) this.onAck(call);
      return;
    }
    const tx = this.transactions.createServer(req, from, replyTo);
    if (!call || call.state === 'ended') {
      tx.respond(makeResponse(req, 481));
      return;
    }
    const d = call.dialog!;
    const seq = parseCSeq(header(req.headers, 'cseq')!).seq;
    if (seq <= d.remoteSeq && req.method !== 'ACK') {
      tx.respond(makeResponse(req, 500, undefined, [['retry-after', '1']]));
      return;
    }
    d.remoteSeq = seq;
    switch (req.method) {
      case 'BYE':
        tx.respond(makeResponse(req, 200));
        call.finish({ outcome: 'completed', reason: 'remote_hangup', by: 'remote' });
        return;
      case 'INVITE':
        return this.onReinvite(call, req, tx);
      case 'UPDATE':
        this.armSessionTimer(call, req, 'server');
        tx.respond(makeResponse(req, 200, undefined, this.sessionHeaders(req)));
        return;
      case 'OPTIONS':
        tx.respond(
          makeResponse(req, 200, undefined, [
            ['allow', ALLOW],
            ['accept', 'application/sdp'],
          ]),
        );
        return;
      case 'INFO':
        return this.onInfo(call, req, tx);
      case 'NOTIFY':
        return this.onNotify(call, req, tx);
      case 'REFER':
        return this.onRefer(call, req, tx);
      default:
        tx.respond(makeResponse(req, 405, undefined, [['allow', ALLOW]]));
    }
  }

  private onAck(call: SipCall): void {
    const inner = this.internals.get(call);
    if (!inner) return;
    if (inner.okRetransmit) {
      clearTimeout(inner.okRetransmit);
      inner.okRetransmit = undefined;
    }
    if (call.state === 'answering') {
      call.state = 'active';
      call.rtp.setSending(true);
      call.emit('answered');
    }
  }

  private onReinvite(call: SipCall, req: SipRequest, tx: ServerTransaction): void {
    const inner = this.internals.get(call)!;
    this.armSessionTimer(call, req, 'server');
    if (req.body.length === 0) {
      // An offer-less re-INVITE (a refresh): offer what we have; the answer in the ACK changes nothing we need.
      tx.respond(this.ok(req, call, offer(inner.local)));
      return;
    }
    let a;
    try {
      a = answerOffer(req.body.toString('utf8'), { ...inner.local, codecs: call.codec ? [call.codec] : this.codecs, version: inner.local.version + 1 });
    } catch (e) {
      if (e instanceof SdpError) return tx.respond(makeResponse(req, e.status));
      throw e;
    }
    inner.local.version += 1;
    call.rtp.setPeer(a.negotiated);
    const held = a.negotiated.peerDirection === 'sendonly' || a.negotiated.peerDirection === 'inactive';
    call.rtp.setSending(!held);
    tx.respond(this.ok(req, call, a.sdp));
    if (held !== call.onHold) {
      call.onHold = held;
      call.emit(held ? 'hold' : 'resume');
    }
  }

  private onInfo(call: SipCall, req: SipRequest, tx: ServerTransaction): void {
    // SIP INFO keys (application/dtmf-relay), which some PBXs send instead of RFC 4733.
    const signal = /^Signal\s*=\s*([0-9*#A-D])\s*$/im.exec(req.body.toString('latin1'));
    tx.respond(makeResponse(req, 200));
    if (/dtmf-relay/i.test(header(req.headers, 'content-type') ?? '') && signal) call.emit('dtmf', signal[1].toUpperCase());
  }

  private onRefer(call: SipCall, req: SipRequest, tx: ServerTransaction): void {
    if (!this.options.acceptRefer) return tx.respond(makeResponse(req, 403));
    let uri: string;
    let user: string;
    try {
      uri = parseNameAddr(header(req.headers, 'refer-to') ?? '').uri;
      user = parseUri(uri).user ?? '';
    } catch {
      return tx.respond(makeResponse(req, 400));
    }
    tx.respond(makeResponse(req, 202, undefined, [['contact', this.contact(call.peer.transport)]]));
    call.emit('referred', { uri, user });
  }

  /** A NOTIFY of the transfer the peer asked for (RFC 3515): the target's status line as a sipfrag; final from 200 on. */
  notifyReferral(call: SipCall, status: number): void {
    if (call.state !== 'active') return;
    const final = status >= 200;
    this.sendInDialog(
      call,
      'NOTIFY',
      [
        ['event', 'refer'],
        ['subscription-state', final ? 'terminated;reason=noresource' : 'active;expires=60'],
        ['contact', this.contact(call.peer.transport)],
        ['content-type', 'message/sipfrag;version=2.0'],
      ],
      Buffer.from(`SIP/2.0 ${status} ${reasonPhrase(status)}\r\n`),
    );
  }

  private onNotify(call: SipCall, req: SipRequest, tx: ServerTransaction): void {
    tx.respond(makeResponse(req, 200));
    if (!/^refer/i.test(header(req.headers, 'event') ?? '')) return;
    const status = /^SIP\/2\.0 (\d{3})/.exec(req.body.toString('latin1'));
    if (!status) return;
    const code = Number(status[1]);
    const terminated = /^terminated/i.test(header(req.headers, 'subscription-state') ?? '');
    call.emit('transfer', { status: code, final: terminated || code >= 200 });
  }

  // ---- Answering ----

  private ok(req: SipRequest, call: SipCall, sdp: string): SipResponse {
    return makeResponse(
      req,
      200,
      call.dialog!.localTag,
      [
        ['contact', this.contact(call.peer.transport)],
        ['allow', ALLOW],
        ['supported', SUPPORTED],
        ...this.sessionHeaders(req),
        ['content-type', 'application/sdp'],
      ],
      Buffer.from(sdp),
    );
  }

  /** RFC 4028 as a UAS: the interval the peer asked for, refreshed by the peer (refresher=uac) unless it named us. */
  private sessionHeaders(req: SipRequest): Headers {
    const s = parseSessionExpires(req);
    if (!s) return [];
    const refresher = s.refresher ?? 'uac';
    const out: Headers = [['session-expires', `${s.seconds};refresher=${refresher}`]];
    if (/\btimer\b/i.test(header(req.headers, 'supported') ?? '')) out.push(['require', 'timer']);
    return out;
  }

  async answer(call: SipCall): Promise<void> {
    const inner = this.internals.get(call)!;
    if (call.state !== 'offering' || !inner.serverTx) return;
    call.state = 'answering';
    const ok = this.ok(inner.invite, call, inner.answerSdp ?? '');
    inner.serverTx.respond(ok);
    this.pending.delete(txKeyOf(inner.invite));
    this.armSessionTimer(call, inner.invite, 'server');
    // RFC 6026: the UA resends its 2xx until the ACK, up to 64*T1, then gives the call up.
    const replyTo = responseTarget(inner.invite, call.peer);
    const { t1, t2 } = this.options.timers;
    let waited = 0;
    const resend = (interval: number) => {
      inner.okRetransmit = setTimeout(() => {
        waited += interval;
        if (waited >= 64 * t1) {
          inner.okRetransmit = undefined;
          this.sendBye(call);
          call.finish({ outcome: 'failed', reason: 'ack_timeout', by: 'timer' });
          return;
        }
        if (!SipTransport.reliable(call.peer)) this.transport.send(ok, replyTo).catch(() => undefined);
        resend(Math.min(2 * interval, t2));
      }, interval);
    };
    resend(t1);
  }

  reject(call: SipCall, status: number): void {
    const inner = this.internals.get(call)!;
    if (call.state !== 'offering' || !inner.serverTx) return;
    inner.serverTx.respond(makeResponse(inner.invite, status, call.dialog!.localTag));
    call.finish({ outcome: outcomeOfStatus(status), reason: 'rejected', status, by: 'local' });
  }

  hangup(call: SipCall): void {
    const inner = this.internals.get(call);
    if (!inner || call.state === 'ended') return;
    if (call.direction === 'inbound' && call.state === 'offering') return this.reject(call, 480);
    if (call.state === 'active' || call.state === 'answering') {
      this.sendBye(call);
      call.finish({ outcome: 'completed', reason: 'local_hangup', by: 'local' });
      return;
    }
    // An outbound call not yet answered: CANCEL once it has rung (section 9.1), else when it does.
    inner.cancelWanted = true;
    if (inner.provisional) this.sendCancel(call);
  }

  private sendBye(call: SipCall): void {
    this.sendInDialog(call, 'BYE');
  }

  private sendInDialog(call: SipCall, method: string, extra: Headers = [], body: Buffer = Buffer.alloc(0), onResponse?: (res: SipResponse) => void): void {
    const d = call.dialog;
    if (!d) return;
    const req = inDialogRequest(d, method, this.via(d.peer.transport), extra, body);
    let authTried = false;
    const handle = (res: SipResponse) => {
      const creds = this.internals.get(call)?.credentials;
      if ((res.status === 401 || res.status === 407) && creds && !authTried) {
        authTried = true;
        const retry = inDialogRequest(d, method, this.via(d.peer.transport), [...extra, ...this.authorization(res, creds, method, req.uri)], body);
        this.transactions.createClient(retry, d.peer, (r) => onResponse?.(r));
        return;
      }
      onResponse?.(res);
    };
    this.transactions.createClient(req, d.peer, handle);
  }

  // ---- Calling out ----

  async invite(o: OutboundCallOptions): Promise<SipCall> {
    const transport = o.transport ?? 'udp';
    const address = net.isIP(o.host) ? o.host : (await dns.lookup(o.host)).address;
    const peer: Peer = { transport, address, port: o.port ?? (transport === 'tls' ? 5061 : 5060) };
    const rtp = await RtpSession.open(
      { host: this.options.host, min: this.options.rtp.min, max: this.options.rtp.max },
      { jitterDepth: this.options.jitterDepth, maxQueuedFrames: 3000, handOnTick: this.options.receiveOnTick, clock: this.options.rtpPacer },
    );
    const local: LocalMedia = {
      address: this.options.advertisedAddress,
      port: rtp.port,
      codecs: this.codecs,
      sessionId: String(Date.now()),
      version: 1,
      direction: 'sendrecv',
    };
    const callId = `${randomBytes(12).toString('hex')}@${this.options.advertisedAddress}`;
    const scheme = transport === 'tls' ? 'sips' : 'sip';
    const params: Record<string, string> = transport === 'udp' ? {} : { transport };
    const requestUri = formatUri({ scheme, user: o.to, host: o.host, port: o.port, params });
    const fromUri = formatUri({ scheme, user: o.from, host: this.options.advertisedAddress, params: {} });
    const toUri = formatUri({ scheme, user: o.to, host: o.host, params: {} });
    const invite: SipRequest = {
      kind: 'request',
      method: 'INVITE',
      uri: requestUri,
      headers: [
        [
          'via',
          formatVia({
            transport: transport.toUpperCase(),
            host: this.options.advertisedAddress,
            port: this.viaPort(transport),
            params: { branch: newBranch(), rport: null },
          }),
        ],
        ['max-forwards', '70'],
        ['from', formatNameAddr({ display: o.fromDisplay, uri: fromUri, params: { tag: newTag() } })],
        ['to', formatNameAddr({ uri: toUri, params: {} })],
        ['call-id', callId],
        ['cseq', '1 INVITE'],
        ['contact', this.contact(transport, o.from)],
        ['allow', ALLOW],
        ['supported', SUPPORTED],
        ...(this.options.sessionExpiresS ? ([['session-expires', String(this.options.sessionExpiresS)]] as Headers) : []),
        ...(o.headers ?? []),
        ['content-type', 'application/sdp'],
      ],
      body: Buffer.from(offer(local)),
    };
    const call = new SipCall('outbound', callId, { user: o.from, uri: fromUri, display: o.fromDisplay }, { user: o.to, uri: toUri }, peer, rtp, this);
    const inner: CallInternals = { invite, local, credentials: o.credentials };
    this.internals.set(call, inner);
    this.calls.add(call);
    call.once('ended', () => {
      if (call.dialog) this.dialogs.delete(dialogKey(call.dialog.callId, call.dialog.localTag, call.dialog.remoteTag));
      this.calls.delete(call);
      this.clearTimers(call);
    });
    this.sendInvite(call, invite);
    return call;
  }

  private sendInvite(call: SipCall, invite: SipRequest): void {
    const inner = this.internals.get(call)!;
    inner.invite = invite;
    inner.provisional = false;
    this.transactions.createClient(invite, call.peer, (res, synthetic) => {
      if (call.state === 'ended' && !(res.status >= 200 && res.status < 300)) return;
      if (res.status < 200) {
        if (res.status === 100) {
          inner.provisional = true;
        } else if (call.state === 'calling') {
          inner.provisional = true;
          call.state = 'ringing';
          call.emit('ringing');
        }
        if (inner.cancelWanted) this.sendCancel(call);
        return;
      }
      if (res.status < 300) return this.onInviteOk(call, res);
      if ((res.status === 401 || res.status === 407) && inner.credentials && !inner.authTried) {
        inner.authTried = true;
        const retry: SipRequest = {
          ...invite,
          headers: invite.headers
            .filter(([n]) => n !== 'authorization' && n !== 'proxy-authorization')
            .map(([n, v]): [string, string] => {
              if (n === 'cseq') return [n, `${parseCSeq(v).seq + 1} INVITE`];
              if (n === 'via') return [n, formatVia({ ...parseViaSafe(v), params: { branch: newBranch(), rport: null } })];
              return [n, v];
            }),
        };
        retry.headers.push(...this.authorization(res, inner.credentials, 'INVITE', invite.uri));
        this.sendInvite(call, retry);
        return;
      }
      const status = synthetic ? 408 : res.status;
      if (inner.cancelWanted && status === 487) return call.finish({ outcome: 'canceled', reason: 'local_hangup', status, by: 'local' });
      call.finish({ outcome: outcomeOfStatus(status), reason: synthetic ? 'timeout' : 'rejected', status, by: synthetic ? 'timer' : 'remote' });
    });
  }

  private onInviteOk(call: SipCall, res: SipResponse): void {
    const inner = this.internals.get(call)!;
    if (inner.ack) {
      // A retransmitted 2xx: its ACK was lost.
      this.transport.send(inner.ack, call.peer).catch(() => undefined);
      return;
    }
    const seq = parseCSeq(header(inner.invite.headers, 'cseq')!).seq;
    const d = dialogAsClient(inner.invite, res, call.peer, seq);
    call.dialog = d;
    inner.ack = inDialogRequest(d, 'ACK', this.via(call.peer.transport), [], Buffer.alloc(0), seq);
    this.transport.send(inner.ack, call.peer).catch(() => undefined);
    this.dialogs.set(dialogKey(d.callId, d.localTag, d.remoteTag), call);
    if (inner.cancelWanted || call.state === 'ended') {
      this.sendBye(call);
      call.finish({ outcome: 'canceled', reason: 'local_hangup', by: 'local' });
      return;
    }
    try {
      const n = readAnswer(res.body.toString('utf8'), this.codecs);
      call.codec = n.codec;
      call.rtp.setPeer(n);
    } catch {
      this.sendBye(call);
      call.finish({ outcome: 'failed', reason: 'failed', status: 488, by: 'local' });
      return;
    }
    call.state = 'active';
    call.rtp.setSending(true);
    this.armSessionTimer(call, res, 'client');
    call.emit('answered');
  }

  private sendCancel(call: SipCall): void {
    const inner = this.internals.get(call)!;
    if (inner.canceled) return;
    inner.canceled = true;
    const inv = inner.invite;
    const headers: Headers = [];
    for (const [n, v] of inv.headers) {
      if (n === 'via') {
        if (!headers.some(([h]) => h === 'via')) headers.push([n, v]);
      } else if (n === 'from' || n === 'to' || n === 'call-id' || n === 'route' || n === 'max-forwards') headers.push([n, v]);
    }
    headers.push(['cseq', `${parseCSeq(header(inv.headers, 'cseq')!).seq} CANCEL`]);
    const cancel: SipRequest = { kind: 'request', method: 'CANCEL', uri: inv.uri, headers, body: Buffer.alloc(0) };
    this.transactions.createClient(cancel, call.peer, () => undefined);
  }

  // ---- Transfer ----

  refer(call: SipCall, target: string): Promise<number> {
    return new Promise((resolve) => {
      if (call.state !== 'active' || !call.dialog) return resolve(481);
      const referTo = /^(sips?|tel):/.test(target) ? target : formatUri({ scheme: 'sip', user: target, host: call.dialog.peer.address, params: {} });
      this.sendInDialog(
        call,
        'REFER',
        [
          ['refer-to', `<${referTo}>`],
          ['referred-by', `<${call.dialog.localUri}>`],
          ['contact', this.contact(call.peer.transport)],
        ],
        undefined,
        (res) => {
          if (res.status < 200) return;
          if (res.status < 300) call.emit('transfer', { status: res.status, final: false });
          resolve(res.status);
        },
      );
    });
  }

  // ---- Session timers (RFC 4028) ----

  private armSessionTimer(call: SipCall, m: SipRequest | SipResponse, role: 'server' | 'client'): void {
    const inner = this.internals.get(call)!;
    if (inner.sessionTimer) clearTimeout(inner.sessionTimer);
    const s = parseSessionExpiresOf(header(m.headers, 'session-expires'));
    if (!s) return;
    // `refresher` names a side of the transaction that carried it: of a request we received, `uac` is
    // the peer; of a response to our request, `uac` is us. Absent, the sender of the request refreshes.
    const refresher = s.refresher ?? 'uac';
    const weRefresh = (role === 'client') === (refresher === 'uac');
    const ms = s.seconds * 1000;
    if (weRefresh) {
      inner.sessionTimer = setTimeout(() => {
        this.sendInDialog(
          call,
          'UPDATE',
          [
            ['session-expires', `${s.seconds};refresher=uac`],
            ['supported', SUPPORTED],
          ],
          undefined,
          (res) => {
            if (res.status >= 200 && res.status < 300) this.armSessionTimer(call, res, 'client');
            else if (res.status >= 300 && call.state === 'active') {
              this.sendBye(call);
              call.finish({ outcome: 'completed', reason: 'session_expired', by: 'timer' });
            }
          },
        );
      }, ms / 2);
    } else {
      inner.sessionTimer = setTimeout(
        () => {
          if (call.state !== 'active' && call.state !== 'answering') return;
          this.sendBye(call);
          call.finish({ outcome: 'completed', reason: 'session_expired', by: 'timer' });
        },
        ms - Math.min(32_000, ms / 3),
      );
    }
  }

  private clearTimers(call: SipCall): void {
    const inner = this.internals.get(call);
    if (!inner) return;
    if (inner.sessionTimer) clearTimeout(inner.sessionTimer);
    if (inner.okRetransmit) clearTimeout(inner.okRetransmit);
  }

  // ---- Helpers ----

  private onResponse(res: SipResponse): void {
    this.transactions.matchResponse(res);
  }

  private authorization(res: SipResponse, creds: { username: string; password: string }, method: string, uri: string): Headers {
    const proxy = res.status === 407;
    const challenge = header(res.headers, proxy ? 'proxy-authenticate' : 'www-authenticate');
    if (!challenge) return [];
    const params = parseAuthorization(challenge).params;
    return [[proxy ? 'proxy-authorization' : 'authorization', answerChallenge(params, creds, method, uri)]];
  }

  private viaPort(transport: TransportName): number {
    return transport === 'tls' ? this.transport.tlsPort : this.transport.port;
  }

  private via(transport: TransportName): { host: string; port: number; transport: string } {
    return { host: this.options.advertisedAddress, port: this.viaPort(transport), transport };
  }

  private contact(transport: TransportName, user = 'agent'): string {
    const scheme = transport === 'tls' ? 'sips' : 'sip';
    return `<${formatUri({ scheme, user, host: this.options.advertisedAddress, port: this.viaPort(transport), params: transport === 'udp' ? {} : { transport } })}>`;
  }
}

function parseViaSafe(v: string) {
  const m = /^SIP\/2\.0\/(\S+)\s+(\[[^\]]+\]|[^;:\s]+)(?::(\d+))?/.exec(v)!;
  return { transport: m[1], host: m[2].replace(/^\[|\]$/g, ''), port: m[3] ? Number(m[3]) : undefined, params: {} };
}

function txKeyOf(req: SipRequest): string {
  const via = header(req.headers, 'via')!;
  const branch = /;\s*branch=([^;\s]+)/i.exec(via)?.[1] ?? '';
  return `${header(req.headers, 'call-id')}|${branch}`;
}

function parseSessionExpires(req: SipRequest): { seconds: number; refresher?: 'uac' | 'uas' } | undefined {
  return parseSessionExpiresOf(header(req.headers, 'session-expires'));
}

function parseSessionExpiresOf(value: string | undefined): { seconds: number; refresher?: 'uac' | 'uas' } | undefined {
  if (!value) return undefined;
  const m = /^(\d{1,7})\s*(?:;\s*refresher\s*=\s*(uac|uas))?/i.exec(value.trim());
  if (!m) return undefined;
  return { seconds: Number(m[1]), refresher: m[2]?.toLowerCase() as 'uac' | 'uas' | undefined };
}

export type { CallEnded };
