/**
 * The sandbox's SIP far end: the phone network behind a SIP trunk, played with our own SIP stack
 * (src/sip/, not the `sip` carrier adapter it tests) by the HTTP carriers' callee scripts and numbers
 * (server.ts). A trunk whose outbound termination points at it (`host:port`, udp or tcp) takes the
 * service's calls; the number called picks the callee, who answers with our 200 or refuses with a
 * final status (sip-call.ts). `ring()` calls the service: an INVITE to its SIP port from this far
 * end's address, which a trunk must list as a source and whose number it must deliver.
 *
 * SIP media is real time, so the far end runs on a clock of its own at speed 1 whatever the
 * sandbox's speed: its ringing and its callees' waits are real milliseconds. Its RTP is paced by that
 * clock's frames too (not the process's RTP clock), so each frame a callee speaks is sent as it is
 * queued.
 */
import { createSipUserAgent } from '../../sip/index.js';
import { SimCall, type CallContext } from './call.js';
import {
  calleeOf,
  DEFAULT_TIME_LIMIT_S,
  E164,
  INBOUND_GIVE_UP_MS,
  inboundPlan,
  outboundPlan,
  outcomeOf,
  type CarrierContext,
  type RingInput,
} from './carrier.js';
import { Clock } from './clock.js';
import { newRecord } from './records.js';
import { runOnSip } from './sip-call.js';

/** SIP alone: a person at a number ending in 0008 declines the call after ringing (603 Decline). */
const DECLINES = '0008';
/** How long a callee who never answers rings before the far end gives up (480): RFC 3261's Timer C. The service's CANCEL comes first. */
const NO_ANSWER_MS = 180_000;

export interface SipFarEndOptions {
  /** The address to listen on and send from (the SIP trunk's outbound host; its `allowed_sources` for ring()). */
  host: string;
  /** The far end's SIP port, UDP and TCP (default 0: a free one). */
  port?: number;
  /** Where the service's user agent takes INVITEs (port 0: unknown, ring() fails). */
  service: { host: string; port: number; transport: 'udp' | 'tcp' };
  /** The far end's RTP ports. */
  rtp: { min: number; max: number };
}

export interface SipFarEnd {
  readonly host: string;
  readonly port: number;
  ring(input: RingInput): Promise<{ callSid: string }>;
  shutdown(): Promise<void>;
}

export async function startSipFarEnd(ctx: CarrierContext, o: SipFarEndOptions): Promise<SipFarEnd> {
  const clock = new Clock(1);
  const callCtx: CallContext = { ...ctx, clock };
  const ua = await createSipUserAgent({
    host: o.host,
    port: o.port ?? 0,
    advertisedAddress: o.host,
    transports: ['udp', 'tcp'],
    verifyTlsPeers: false,
    rtp: o.rtp,
    timers: { t1: 500, t2: 4000, t4: 5000 },
    nonceTtlMs: 30_000,
    refusalsPerMinute: 1000,
    jitterDepth: 3,
    sessionExpiresS: 0,
    minSessionExpiresS: 90,
    idleConnectionMs: 120_000,
    maxConnections: 1000,
    acceptRefer: true,
    // Its callees' speech is queued frame by frame on the line clock: its RTP goes out on the same frames.
    rtpPacer: clock.rtpPacer(),
    // The network behind the trunk takes every call the service places; the number picks the callee.
    authenticateInbound: () => ({ action: 'allow' }),
    log: ctx.log,
  });

  ua.on('incoming', (sip) => {
    const { user: to } = sip.to;
    const { user: from } = sip.from;
    const request = { method: 'INVITE', uri: sip.to.uri, from, to };
    const callee = calleeOf(to);
    if (callee === 'refused') {
      const record = newRecord({ provider: 'sip', callSid: sip.callId, direction: 'outbound', from, to, outcome: 'failed', request });
      Object.assign(record, { state: 'completed', endStatus: '404', endedAt: Date.now(), hangupBy: 'carrier' });
      ctx.records.add(record);
      return sip.reject(404);
    }
    const declines = to.endsWith(DECLINES);
    const plan = outboundPlan(ctx, to, NO_ANSWER_MS, DEFAULT_TIME_LIMIT_S * 1000);
    const record = newRecord({
      provider: 'sip',
      callSid: sip.callId,
      direction: 'outbound',
      from,
      to,
      outcome: declines ? 'rejected' : outcomeOf(plan.callee),
      request,
    });
    const call = new SimCall(record, callCtx, declines ? { ...plan, callee: 'busy' } : plan);
    ctx.track(call);
    runOnSip(call, sip, { declines });
    call.log.debug({ to, callee: declines ? 'declines' : plan.callee }, 'sandbox sip call placed');
    void call.dial();
  });

  async function ring(input: RingInput): Promise<{ callSid: string }> {
    if (!o.service.port) throw new Error("sip: the service's SIP port is not known (SIP_PORT=0)");
    if (!E164.test(input.from)) throw new Error(`sip: caller ${input.from} is not E.164`);
    const sip = await ua.invite({ ...o.service, to: input.to, from: input.from });
    const record = newRecord({
      provider: 'sip',
      callSid: sip.callId,
      direction: 'inbound',
      from: input.from,
      to: input.to,
      outcome: 'human',
      request: { from: input.from, to: input.to },
    });
    const call = new SimCall(record, callCtx, inboundPlan(input.script, DEFAULT_TIME_LIMIT_S * 1000, input.from));
    ctx.track(call);
    runOnSip(call, sip);
    void call.ringInbound(INBOUND_GIVE_UP_MS);
    // As the HTTP carriers: done once the service answered, or refused the call as busy (then it recorded none).
    await new Promise<void>((resolve, reject) => {
      sip.once('answered', () => resolve());
      sip.once('ended', (e) => (e.outcome === 'busy' ? resolve() : reject(new Error(`sip: the service answered the INVITE ${e.status ?? e.reason}`))));
    });
    return { callSid: sip.callId };
  }

  ctx.log.info({ host: o.host, port: ua.port }, 'sandbox SIP far end listening');
  return {
    host: o.host,
    port: ua.port,
    ring,
    async shutdown() {
      await ua.stop();
      clock.stop();
    },
  };
}
