/** What the sandbox carriers remember of each simulated call, and the waits tests make on it. */
import type { Provider } from '../../carriers/index.js';

/** A carrier with a simulator (simulators.ts); ringing one without is an error. */
export type SandboxProvider = Provider;
export type CallOutcome = 'human' | 'voicemail' | 'busy' | 'no_answer' | 'failed' | 'rejected' | 'canceled';
export type CallState = 'queued' | 'ringing' | 'in_progress' | 'completed';
export type HangupBy = 'callee' | 'service' | 'carrier' | 'stream_closed';

export interface CallbackRecord {
  /** `status`/`amd`/`voice` (provider_a), `webhook` (provider_b). */
  kind: 'status' | 'amd' | 'voice' | 'webhook';
  url: string;
  /** provider_a: the CallStatus or AnsweredBy posted; provider_b: the event_type. */
  event: string;
  /** null: no HTTP answer (network error or timeout). */
  httpStatus: number | null;
  at: number;
}

/**
 * One simulated call. The object is live: the carrier updates it as the call goes on (times are
 * wall-clock epoch milliseconds; audio amounts are in simulated milliseconds).
 */
export interface SandboxCallRecord {
  provider: SandboxProvider;
  /** provider_a CallSid (`CA` + 32 hex); provider_b call_control_id (`v3:...`); sip the Call-ID. */
  callSid: string;
  direction: 'outbound' | 'inbound';
  from: string;
  to: string;
  /** What happened at the callee's end; set from the number when dialed, corrected as the call goes. */
  outcome: CallOutcome;
  state: CallState;
  /** provider_a: the final CallStatus; provider_b: the hangup_cause; sip: the INVITE's final status, or BYE. null while the call is live. */
  endStatus: string | null;
  createdAt: number;
  answeredAt: number | null;
  endedAt: number | null;
  hangupBy: HangupBy | null;
  transferredTo: string | null;
  /** The answering-machine result the carrier reported (AnsweredBy / detection result), if any. */
  answeredBy: string | null;
  streamUrl: string | null;
  streamOpened: boolean;
  /** The `start` object of the start frame sent to the service (customParameters, client_state...). */
  streamStartParams: Record<string, unknown> | null;
  /** Who ended the (last) media stream: the service closing its socket, or the carrier. */
  streamClosedBy: 'service' | 'carrier' | null;
  /** WebSocket close code of the (last) stream when the service closed it. */
  streamCloseCode: number | null;
  /** Inbound (callee) media frames sent to the service. */
  mediaFramesSent: number;
  /** Agent audio received from the service, ms. */
  agentAudioMs: number;
  /** Agent audio the callee heard (played out of the carrier's buffer), ms. */
  agentPlayedMs: number;
  /** Labelled clips the callee played (`{play}` steps, the answering machine's greeting), at the stream's media time of their first frame. */
  clips: Array<{ label: string; streamMs: number }>;
  /** The stream's media time at each `clear` (the agent's audio cut off from there). */
  clearsAtMs: number[];
  /** Agent audio that played after the voicemail beep (what the machine recorded), ms. */
  agentAudioAfterBeepMs: number;
  marksReceived: string[];
  marksEchoed: string[];
  clears: number;
  /** Texts the callee said, in order. */
  spoken: string[];
  /** Keys the callee pressed (sent to the service). */
  dtmfSent: string;
  /** Keys the service pressed that the callee heard (provider_b `send_dtmf`, or tones in the agent audio). */
  dtmfReceived: string;
  callbacks: CallbackRecord[];
  /** The dial request as received (provider_a form params, provider_b JSON, sip the INVITE's URI and numbers), or the ring() input. */
  request: Record<string, unknown>;
  /** Frames or requests from the service that the real carrier would refuse or ignore. */
  protocolErrors: string[];
}

const SECRET_NAME = /auth|token|secret|password|api_?key/i;

/** A request body without fields named like credentials. */
export function withoutSecrets(body: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(body).filter(([k]) => !SECRET_NAME.test(k)));
}

export function newRecord(init: Pick<SandboxCallRecord, 'provider' | 'callSid' | 'direction' | 'from' | 'to' | 'outcome' | 'request'>): SandboxCallRecord {
  return {
    ...init,
    state: 'queued',
    endStatus: null,
    createdAt: Date.now(),
    answeredAt: null,
    endedAt: null,
    hangupBy: null,
    transferredTo: null,
    answeredBy: null,
    streamUrl: null,
    streamOpened: false,
    streamStartParams: null,
    streamClosedBy: null,
    streamCloseCode: null,
    mediaFramesSent: 0,
    agentAudioMs: 0,
    agentAudioAfterBeepMs: 0,
    agentPlayedMs: 0,
    clips: [],
    clearsAtMs: [],
    marksReceived: [],
    marksEchoed: [],
    clears: 0,
    spoken: [],
    dtmfSent: '',
    dtmfReceived: '',
    callbacks: [],
    protocolErrors: [],
  };
}

interface Waiter {
  pred: (c: SandboxCallRecord) => boolean;
  resolve: (c: SandboxCallRecord) => void;
}

/** The last `max` calls, oldest first, and the predicates tests wait on. */
export class CallRecords {
  private list: SandboxCallRecord[] = [];
  private bySid = new Map<string, SandboxCallRecord>();
  private waiters = new Set<Waiter>();

  constructor(private readonly max = 1000) {}

  add(record: SandboxCallRecord): void {
    this.list.push(record);
    this.bySid.set(record.callSid, record);
    while (this.list.length > this.max) this.bySid.delete(this.list.shift()!.callSid);
    this.changed(record);
  }

  all(): SandboxCallRecord[] {
    return [...this.list];
  }

  get(callSid: string): SandboxCallRecord | undefined {
    return this.bySid.get(callSid);
  }

  /** Re-evaluates the waits against a record that changed. */
  changed(record: SandboxCallRecord): void {
    for (const w of this.waiters) {
      if (matches(w.pred, record)) {
        this.waiters.delete(w);
        w.resolve(record);
      }
    }
  }

  wait(pred: (c: SandboxCallRecord) => boolean, timeoutMs: number): Promise<SandboxCallRecord> {
    const found = this.list.find((c) => matches(pred, c));
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        pred,
        resolve: (c) => {
          clearTimeout(timer);
          resolve(c);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new Error(`no sandbox call matched within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.add(waiter);
    });
  }
}

function matches(pred: (c: SandboxCallRecord) => boolean, c: SandboxCallRecord): boolean {
  try {
    return pred(c);
  } catch {
    return false;
  }
}
