/**
 * provider `sip`'s line: the service's SIP user agent (src/sip/) and its calls, by SIP Call-ID.
 *
 * An INVITE is let in by the SIP trunks' trust rules (`authorize`, src/sip-trunks/inbound-trust.ts):
 * the stack hands over the digest the INVITE presented (`matches(password)`), so the trunk the number
 * belongs to checks its own password; a request that needs credentials is challenged (401), every
 * other refusal is the same bare 403. A call let in rings, becomes an `incoming` message for the
 * calls side (which answers it with our media or refuses it as busy), and is given up with 480 if it
 * is not answered within the calls' ring timeout. Every later moment of a call (ringing, answer, end)
 * is a message too, delivered in order per call. Outbound calls ring at most the dial request's ring
 * timeout (then CANCEL, `no_answer`) and last at most its time limit.
 */
import { createSipUserAgent, type InboundDecision, type InboundRequest, type SipCall, type SipUserAgent } from '../../sip/index.js';
import type { CarrierEvent, CarrierMessage, CallbackReply, SignatureCheck } from '../callbacks.js';
import type { CarrierAccounts } from '../credentials.js';
import type { MediaSocket } from '../media-socket.js';
import type { SipLineOptions, SipTermination, TrunkDecision } from './options.js';
import type { CarrierOutcome } from '../carrier.js';
import { RtpStream } from './media.js';
import { carrierOutcome } from './status.js';

/** The realm of our challenges. */
const REALM = 'voice-agent-service';

type Receive = (operation: string, message: CarrierMessage) => Promise<CallbackReply>;

interface Entry {
  call: SipCall;
  /** Our call id, once the calls side has one for it. */
  callId: string | null;
  /** The number the trunk delivered and the agent it reaches (inbound). */
  inbound: { number: string; agentId: string } | null;
  /** Messages about the call go to the calls side one at a time, in order. */
  queue: Promise<unknown>;
  timers: NodeJS.Timeout[];
  /** The ring timeout ran out (our CANCEL): the call was not answered, whatever the stack says. */
  unanswered: boolean;
  answered: boolean;
}

const E164_DIGITS = /^\+?[1-9][0-9]{1,14}$/;

export class SipLine {
  private ua: SipUserAgent | null = null;
  private receive: Receive | null = null;
  private acceptStream: ((socket: MediaSocket) => void) | null = null;
  private readonly calls = new Map<string, Entry>();
  private draining = false;

  constructor(private readonly options: SipLineOptions | undefined) {
    options?.hangups.on((callSid) => this.get(callSid)?.hangup());
  }

  get running(): boolean {
    return this.ua !== null;
  }

  /** The user agent, when SIP is on (the benchmark and tests read its port). */
  get userAgent(): SipUserAgent | null {
    return this.ua;
  }

  listen(receive: Receive): void {
    this.receive = receive;
  }

  onStream(accept: (socket: MediaSocket) => void): void {
    this.acceptStream = accept;
  }

  async start(): Promise<void> {
    const uaOptions = this.options?.userAgent((req) => this.authenticate(req));
    if (!uaOptions || this.ua) return;
    this.ua = await createSipUserAgent(uaOptions);
    this.ua.on('incoming', (call) => this.incoming(call));
    this.options!.log.info({ port: this.ua.port }, 'SIP user agent listening');
  }

  drain(): void {
    this.draining = true;
  }

  async stop(): Promise<void> {
    for (const e of this.calls.values()) e.call.hangup();
    await this.ua?.stop();
    this.ua = null;
  }

  get(callSid: string): SipCall | null {
    return this.calls.get(callSid)?.call ?? null;
  }

  private async authenticate(req: InboundRequest): Promise<InboundDecision> {
    const d = await this.options!.authorize({
      sourceAddress: req.source.address,
      toNumber: req.to,
      ...(req.digest ? { digest: { username: req.digest.username, matches: (p: string) => req.digest!.matches(p) } } : {}),
    });
    if (d.allowed) return { action: 'allow', context: d };
    if (d.reason === 'credentials_required') return { action: 'challenge', realm: REALM };
    return { action: 'refuse' };
  }

  /** Places an outbound call through a trunk's termination; its moments become messages about `callId`. */
  async dial(t: SipTermination, r: { callId: string; from: string; to: string; ringTimeoutS: number; timeLimitS: number }): Promise<SipCall> {
    if (!this.ua) throw new Error('SIP is off on this instance (SIP_PORT is not set)');
    const call = await this.ua.invite({ host: t.host, port: t.port, transport: t.transport, to: r.to, from: r.from, credentials: t.credentials ?? undefined });
    const e = this.track(call, r.callId, null);
    e.timers.push(
      setTimeout(() => {
        if (e.answered) return;
        e.unanswered = true;
        call.hangup();
      }, r.ringTimeoutS * 1000),
    );
    call.on('ringing', () => this.send(e, { kind: 'progress', status: 'ringing' }));
    call.once('answered', () => {
      e.answered = true;
      e.timers.push(setTimeout(() => call.hangup(), r.timeLimitS * 1000));
      this.send(e, { kind: 'media_wanted' });
    });
    return call;
  }

  private track(call: SipCall, callId: string | null, inbound: Entry['inbound']): Entry {
    const e: Entry = { call, callId, inbound, queue: Promise.resolve(), timers: [], unanswered: false, answered: false };
    this.calls.set(call.callId, e);
    call.once('ended', (end) => {
      for (const t of e.timers) clearTimeout(t);
      const outcome: CarrierOutcome = e.unanswered ? 'no_answer' : carrierOutcome(end.outcome);
      this.send(e, { kind: 'ended', outcome, whenAnswered: 'completed' });
      void e.queue.finally(() => this.calls.delete(call.callId));
    });
    // A transfer the far end took (a final 2xx NOTIFY): our leg is done.
    call.on('transfer', ({ status, final }) => {
      if (final && status >= 200 && status < 300) call.hangup();
    });
    return e;
  }

  private incoming(call: SipCall): void {
    const d = call.context as Extract<TrunkDecision, { allowed: true }>;
    if (this.draining || !this.receive) {
      call.reject(503);
      return;
    }
    const e = this.track(call, null, { number: d.number, agentId: d.agent.id });
    e.timers.push(setTimeout(() => call.hangup(), this.options!.ringTimeoutS * 1000));
    const from = E164_DIGITS.test(call.from.user) ? `+${call.from.user.replace(/^\+/, '')}` : call.from.user;
    this.send(e, { kind: 'incoming', from, to: d.number });
  }

  /** One moment of the call as a message for the calls side, after the ones before it. */
  private send(e: Entry, event: CarrierEvent): void {
    const receive = this.receive;
    if (!receive) return;
    const message = (): CarrierMessage => ({
      call: { callId: e.callId, callSid: e.call.callId },
      number: event.kind === 'incoming' && e.inbound ? { to: e.inbound.number, always: true } : null,
      eventId: null,
      seq: null,
      // The user agent is ours and the trunk already let the call in: the account must be the one the trunk's number reaches.
      verify: (accounts: CarrierAccounts | null): SignatureCheck => {
        const id = (accounts as { id?: string } | null)?.id;
        if (!id) return 'invalid_signature';
        return event.kind === 'incoming' && e.inbound && e.inbound.agentId !== id ? 'invalid_signature' : 'ok';
      },
      event: () => event,
    });
    e.queue = e.queue
      .then(() => receive(event.kind, message()))
      .catch((err: Error) => {
        this.options?.log.warn({ err: err.message, event: event.kind }, 'a SIP call event was refused');
        if (e.call.state === 'offering') e.call.reject(480);
        else if (event.kind === 'media_wanted') e.call.hangup();
      });
  }

  /** The calls side's answer: connect our media (answering an inbound call first), refuse as busy, or end the call. */
  async act(
    callSid: string,
    action: { kind: 'connect'; callId: string; streamToken: string } | { kind: 'reject' } | { kind: 'hangup' } | { kind: 'none' },
  ): Promise<void> {
    const e = this.calls.get(callSid);
    if (!e || action.kind === 'none') return;
    if (action.kind === 'reject') return e.call.reject(486);
    if (action.kind === 'hangup') return e.call.hangup();
    e.callId = action.callId;
    // Over while the calls side decided (given up at the ring timeout, hung up): nothing to connect; its `ended` follows.
    if (e.call.state === 'ended') return;
    if (e.call.state === 'offering') {
      e.answered = true;
      for (const t of e.timers.splice(0)) clearTimeout(t);
      await e.call.answer();
    }
    const stream = new RtpStream(e.call, { callSid, callId: action.callId, streamToken: action.streamToken });
    if (!this.acceptStream) throw new Error('no media server takes SIP streams');
    this.acceptStream(stream);
    stream.begin();
  }
}
