/**
 * provider `sip`'s commands: a call goes out through the agent's trunk (its termination's host,
 * transport and digest credentials, a caller id the trunk allows); hang-up, transfer (REFER) and keys
 * (RFC 4733) act on the call's dialog on this instance's user agent (a hang-up for a call another
 * instance holds is relayed to it: the bridge, which transfers and sends keys, runs beside the dialog).
 */
import { CarrierError, type Carrier, type CarrierCredentials, type DialRequest } from '../carrier.js';
import type { SipCredentials } from './credentials.js';
import type { SipLine } from './line.js';
import type { SipLineOptions } from './options.js';

function creds(c: CarrierCredentials): SipCredentials {
  if (c.provider !== 'sip') throw new Error(`sip adapter given ${c.provider} credentials`);
  return c as SipCredentials;
}

/** Keys RFC 4733 carries; the pauses (`w`, `W`) of the other carriers' commands are left out. */
const KEYS = /[^0-9*#A-D]/g;

export class SipCarrier implements Carrier {
  readonly provider = 'sip' as const;

  constructor(
    private readonly line: SipLine,
    private readonly termination: SipLineOptions['termination'] | null,
    private readonly hangups: SipLineOptions['hangups'] | null,
  ) {}

  async dial(credentials: CarrierCredentials, r: DialRequest): Promise<{ callSid: string }> {
    const c = creds(credentials);
    if (!this.line.running || !this.termination) throw new CarrierError('unavailable', 'SIP is off on this instance (SIP_PORT is not set).');
    const t = await this.termination(c.workspaceId, c.trunkId);
    if (!t) throw new CarrierError('refused', 'The SIP trunk has no outbound termination.');
    if (t.callerIdNumbers.length && !t.callerIdNumbers.includes(r.from)) throw new CarrierError('refused', `${r.from} is not a caller id of the SIP trunk.`);
    try {
      const call = await this.line.dial(t, { callId: r.callId, from: r.from, to: r.to, ringTimeoutS: r.ringTimeoutS, timeLimitS: r.timeLimitS });
      return { callSid: call.callId };
    } catch (err) {
      throw new CarrierError('unavailable', `The INVITE could not be sent: ${(err as Error).message}`);
    }
  }

  async hangup(_credentials: CarrierCredentials, callSid: string): Promise<void> {
    const call = this.line.get(callSid);
    if (call) return call.hangup();
    // Held by another instance (or over, its dialog ended with it): whichever holds it hangs it up.
    await this.hangups?.send(callSid);
  }

  async transfer(_credentials: CarrierCredentials, callSid: string, to: string): Promise<void> {
    const call = this.line.get(callSid);
    if (!call) throw new CarrierError('not_found', 'The SIP call is not live on this instance.');
    const status = await call.refer(to);
    if (status >= 300) throw new CarrierError('refused', `The peer refused the transfer (REFER answered ${status}).`, { status });
  }

  async sendDtmf(_credentials: CarrierCredentials, callSid: string, keys: string): Promise<void> {
    const call = this.line.get(callSid);
    if (!call) throw new CarrierError('not_found', 'The SIP call is not live on this instance.');
    call.sendDtmf(keys.replace(KEYS, ''));
  }

  /** Nothing to point at a trunk: its inbound rules deliver the number, and the agent's `sip_config` takes its calls. */
  async setInbound(): Promise<void> {}
}
