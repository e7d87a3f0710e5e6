/**
 * One call as the user agent's user sees it: neutral events (ringing, answered, ended with the SIP
 * status and our outcome, keys, audio, hold, transfer progress) and the things one can do with a call.
 * The protocol work is the user agent's (user-agent.ts); a call holds its state and its RTP session.
 */
import { EventEmitter } from 'node:events';
import type { DialogState } from './dialog.js';
import type { SipOutcome } from './outcomes.js';
import type { RtpSession } from './rtp-session.js';
import type { Codec } from './sdp.js';
import type { Peer } from './transport.js';

export type EndReason = 'local_hangup' | 'remote_hangup' | 'canceled' | 'rejected' | 'timeout' | 'ack_timeout' | 'session_expired' | 'failed';

export interface CallEnded {
  outcome: SipOutcome;
  reason: EndReason;
  /** The final SIP status of the INVITE when the call ended before it was answered. */
  status?: number;
  by: 'local' | 'remote' | 'timer';
}

export interface TransferProgress {
  /** The status line the transfer target gave, as NOTIFY's sipfrag carries it; 202 for the REFER's own acceptance. */
  status: number;
  final: boolean;
}

/** A transfer the peer asked of us (its REFER's Refer-To), with the user part (a number, usually). */
export interface ReferRequest {
  uri: string;
  user: string;
}

export interface SipCallEvents {
  ringing: [];
  answered: [];
  ended: [CallEnded];
  dtmf: [key: string];
  /** The peer's audio, mu-law 8 kHz, a 20 ms frame at a time (see RtpEvents). */
  ulaw: [frame: Buffer];
  /** The same as PCM16 LE at 8 kHz, decoded only once someone listens. */
  audio: [pcm: Buffer];
  hold: [];
  resume: [];
  transfer: [TransferProgress];
  /** The peer asked us to transfer it (REFER, answered 202); only with the user agent's `acceptRefer`. */
  referred: [ReferRequest];
}

/** What a call asks of its user agent. */
export interface CallControl {
  answer(call: SipCall): Promise<void>;
  reject(call: SipCall, status: number): void;
  hangup(call: SipCall): void;
  refer(call: SipCall, target: string): Promise<number>;
  notifyReferral(call: SipCall, status: number): void;
}

export type CallState = 'offering' | 'calling' | 'ringing' | 'answering' | 'active' | 'ended';

export class SipCall extends EventEmitter<SipCallEvents> {
  state: CallState;
  dialog?: DialogState;
  codec?: Codec;
  onHold = false;
  endedWith?: CallEnded;

  constructor(
    readonly direction: 'inbound' | 'outbound',
    readonly callId: string,
    /** Caller and called: the user parts of From and To (numbers, usually), and the whole URIs. */
    readonly from: { user: string; uri: string; display?: string },
    readonly to: { user: string; uri: string },
    /** Where the call's signalling comes from or goes to. */
    readonly peer: Peer,
    readonly rtp: RtpSession,
    private readonly control: CallControl,
    /** What authenticateInbound returned with `allow` (the trunk, say). */
    readonly context?: unknown,
  ) {
    super();
    this.state = direction === 'inbound' ? 'offering' : 'calling';
    rtp.on('ulaw', (frame) => this.emit('ulaw', frame));
    rtp.on('dtmf', (key) => this.emit('dtmf', key));
    // PCM16 is decoded only for a listener that wants it (the call bridge takes mu-law).
    const untyped = this as EventEmitter;
    const forwardPcm = (event: string | symbol) => {
      if (event !== 'audio') return;
      untyped.off('newListener', forwardPcm);
      rtp.on('audio', (pcm) => this.emit('audio', pcm));
    };
    untyped.on('newListener', forwardPcm);
  }

  answer(): Promise<void> {
    return this.control.answer(this);
  }

  /** Refuse an inbound call before it is answered (486 busy, 480 unavailable, 603 decline...). */
  reject(status = 486): void {
    this.control.reject(this, status);
  }

  /** End the call: BYE once answered, CANCEL while an outbound call rings, a 480 for an inbound one not yet answered. */
  hangup(): void {
    this.control.hangup(this);
  }

  /** Transfer the peer elsewhere (REFER); resolves with the REFER's final status (202 when accepted). */
  refer(target: string): Promise<number> {
    return this.control.refer(this, target);
  }

  /** Tell the peer how the transfer it asked for went (NOTIFY, RFC 3515): the target's status; 2xx and above are final. */
  notifyTransfer(status: number): void {
    this.control.notifyReferral(this, status);
  }

  sendDtmf(keys: string): void {
    this.rtp.sendDtmf(keys);
  }

  /** PCM16 LE at 8 kHz, any length (sent in 20 ms packets, paced). */
  sendAudio(pcm: Buffer): void {
    this.rtp.sendAudio(pcm);
  }

  /** Mu-law at 8 kHz, any length (sent in 20 ms packets, paced; to a PCMU peer as it is). */
  sendUlaw(ulaw: Buffer): void {
    this.rtp.sendUlaw(ulaw);
  }

  clearAudio(): void {
    this.rtp.clearAudio();
  }

  /** Mark the call over and tell the listener once. */
  finish(ended: CallEnded): void {
    if (this.state === 'ended') return;
    this.state = 'ended';
    this.endedWith = ended;
    this.rtp.close();
    this.emit('ended', ended);
  }
}
