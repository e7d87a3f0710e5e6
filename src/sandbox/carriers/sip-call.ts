/**
 * One call of the sandbox's SIP far end (sip.ts): a simulated call (call.ts) on a call of our SIP
 * stack. The callee talks and listens through the call's RTP: its voice frames are queued on the RTP
 * session, and what the service sends is the agent talking whenever it is not digital silence (the
 * service's RTP runs on between turns, silent). Keys go both ways as RFC 4733 events. SIP's moments
 * become the simulated call's and back: the service's CANCEL or BYE ends it, hung up by the service;
 * its REFER is taken (202, the call transferred, then a NOTIFY of the target's 200); the callee's
 * refusal is the final answer (486 busy, 480 no answer, 603 declined), its hang-up our BYE.
 */
import { MULAW_SILENCE, mulawToPcm16, pcm16ToMulaw, rms } from '../../audio/pcm16.js';
import type { CallEnded, SipCall } from '../../sip/index.js';
import type { CallEnd, SimCall } from './call.js';
import type { CalleeMedia } from './line.js';
import { Playout } from './playout.js';
import { ulawMs } from './audio.js';

/** Below this RMS a packet from the service is digital silence (about -56 dBFS): the agent is not talking. */
const QUIET_RMS = 50;

/** The callee's line on the call's RTP. RTP has no marks: the playout only times what the callee hears. */
class RtpMedia implements CalleeMedia {
  readonly playout = new Playout(() => undefined);
  framesSent = 0;

  constructor(
    private readonly sip: SipCall,
    private readonly call: SimCall,
  ) {
    sip.on('audio', (pcm) => {
      if (!this.live || rms(pcm) < QUIET_RMS) return;
      const ulaw = pcm16ToMulaw(pcm);
      call.record.agentAudioMs += ulawMs(ulaw.length);
      this.playout.push(ulaw);
    });
    sip.on('dtmf', (key) => call.hear(key));
  }

  get live(): boolean {
    return this.sip.state === 'answering' || this.sip.state === 'active';
  }

  sendMedia(ulaw: Buffer): void {
    if (!this.live) return;
    this.framesSent++;
    this.call.record.mediaFramesSent++;
    const silent = ulaw.every((b) => b === MULAW_SILENCE);
    // The RTP session sends silence by itself while nothing is queued; queued behind speech, silence keeps its place.
    if (silent && this.sip.rtp.queuedMs === 0) return;
    // The far end's RTP ticks on the line's frames (sip.ts): one frame queued, one packet sent, so the
    // speech never runs dry in the middle of a word, however late the ticks come.
    this.sip.sendAudio(mulawToPcm16(ulaw));
  }

  sendDtmf(digit: string): void {
    this.sip.sendDtmf(digit);
  }
}

/** Our final answer to an INVITE the callee did not take. */
function refusalStatus(end: CallEnd, declines: boolean): number {
  if (end.reason === 'busy') return declines ? 603 : 486;
  if (end.reason === 'failed') return 404;
  return 480;
}

/** How the SIP call's end reads for the simulated call (a no-op when the callee ended it first). */
function endOf(e: CallEnded): CallEnd {
  const by = e.by === 'remote' ? 'service' : 'carrier';
  const detail = e.status === undefined ? undefined : String(e.status);
  switch (e.outcome) {
    case 'completed':
      return { reason: 'completed', by };
    case 'declined':
      return { reason: 'rejected', by, detail };
    default:
      return { reason: e.outcome, by, detail };
  }
}

/**
 * Runs `call` on `sip`. The service's INVITE (`sip.direction` inbound): the callee answers with our
 * 200 and refuses with a final status. Our INVITE to the service (ring()): the service's 200 answers
 * the call; the caller giving up is our CANCEL. `declines`: a refusal is 603, not 486.
 */
export function runOnSip(call: SimCall, sip: SipCall, opts: { declines?: boolean } = {}): void {
  call.carry(new RtpMedia(sip, call));
  call.hooks = {
    answered: () => {
      if (sip.direction === 'inbound') void sip.answer();
    },
    ended: (end) => {
      if (opts.declines && end.reason === 'busy') call.record.outcome = 'rejected';
      if (sip.state === 'offering') sip.reject(refusalStatus(end, opts.declines ?? false));
      else sip.hangup();
    },
  };
  if (sip.direction === 'outbound') sip.once('answered', () => call.answer());
  sip.on('referred', ({ uri, user }) => {
    call.transfer(user || uri);
    sip.notifyTransfer(200);
  });
  sip.once('ended', (e) => {
    call.record.endStatus = e.status === undefined ? 'BYE' : String(e.status);
    call.end(endOf(e));
    call.changed();
  });
}
