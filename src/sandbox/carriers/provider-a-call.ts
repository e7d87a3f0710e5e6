/**
 * provider_a's side of one call: signed status/AMD callbacks (in order, each awaited), the voice
 * webhook and the TwiML it returns (`<Connect><Stream>`, `<Dial>`, `<Hangup>`, `<Reject>`, `<Pause>`),
 * answering-machine detection, and live updates from the REST API.
 */
import { twilioSignature, type FormParams } from './signing.js';
import type { CallEnd, CarrierHooks, SimCall } from './call.js';
import type { CarrierContext } from './carrier.js';
import { providerAFraming } from './frames.js';
import { deliver, encodeForm, SerialQueue, type Delivery } from './http.js';
import type { CallbackRecord } from './records.js';
import { parseTwiml, type TwimlVerb } from './twiml.js';

export const API_VERSION = '2010-04-01';

export type HttpMethod = 'GET' | 'POST';

export interface ProviderAInstructions {
  accountSid: string;
  url: string | null;
  method: HttpMethod;
  twiml: string | null;
  statusCallback: string | null;
  statusCallbackMethod: HttpMethod;
  /** StatusCallbackEvent values; `completed` is always sent when there is a StatusCallback. */
  statusEvents: Set<string>;
  machineDetection: 'Enable' | 'DetectMessageEnd' | null;
  machineDetectionTimeoutMs: number;
  asyncAmd: boolean;
  asyncAmdCallback: string | null;
  asyncAmdMethod: HttpMethod;
}

/** The latest auth token the carrier saw for each account (it signs callbacks with it). */
export type TokenLookup = (accountSid: string) => string | undefined;

const HUMAN_DETECTED_MS = 800;
const MACHINE_START_DETECTED_MS = 1000;

const FINAL_STATUS: Record<CallEnd['reason'], string> = {
  completed: 'completed',
  time_limit: 'completed',
  busy: 'busy',
  no_answer: 'no-answer',
  failed: 'failed',
  canceled: 'canceled',
  rejected: 'no-answer',
};

/** RFC 2822 in UTC, as provider_a writes it: `Sat, 21 Nov 2026 23:51:18 +0000`. */
export function rfc2822(ms: number): string {
  return new Date(ms).toUTCString().replace('GMT', '+0000');
}

export class ProviderACall implements CarrierHooks {
  private sequence = 0;
  private readonly queue = new SerialQueue();
  private twimlRun = 0;
  private beepHeard!: () => void;
  private readonly beepPromise = new Promise<void>((resolve) => (this.beepHeard = resolve));

  constructor(
    readonly call: SimCall,
    private readonly ctx: CarrierContext,
    private readonly tokens: TokenLookup,
    readonly instructions: ProviderAInstructions,
  ) {
    call.hooks = this;
  }

  /** The call's status as the REST API and callbacks name it. */
  status(): string {
    const r = this.call.record;
    if (r.state === 'completed') return r.endStatus ?? 'completed';
    return r.state === 'in_progress' ? 'in-progress' : r.state;
  }

  initiated(): void {
    this.statusCallback('initiated');
  }

  ringing(): void {
    this.statusCallback('ringing');
  }

  answered(): void {
    this.statusCallback('answered');
    if (this.call.record.direction === 'inbound') return;
    const amd = this.instructions.machineDetection;
    if (amd && !this.instructions.asyncAmd) {
      void this.detect().then((answeredBy) => answeredBy && this.runVoiceUrl(answeredBy));
      return;
    }
    void this.runVoiceUrl(null);
    if (amd) void this.detect().then((answeredBy) => answeredBy && this.amdCallback(answeredBy));
  }

  beep(): void {
    this.beepHeard();
  }

  ended(end: CallEnd): void {
    const r = this.call.record;
    r.endStatus = end.reason === 'rejected' && end.detail === 'busy' ? 'busy' : FINAL_STATUS[end.reason];
    this.statusCallback('completed');
  }

  /** The inbound call reaches the number's voice URL; resolves once its answer was acted on. */
  async ringInbound(): Promise<void> {
    const verbs = await this.fetchTwiml(this.instructions.url, this.instructions.method, {});
    if (!verbs || this.call.over) return;
    const first = verbs[0];
    if (first?.verb === 'Reject') return this.call.end({ reason: 'rejected', by: 'service', detail: first.reason });
    this.call.answer();
    void this.execute(verbs);
  }

  /** `POST .../Calls/{CallSid}.json`: new TwiML or Url, or a Status change. */
  update(change: { status?: string; twiml?: string; url?: string; method?: HttpMethod }): void {
    const call = this.call;
    if (call.over) return;
    if (change.twiml !== undefined || change.url !== undefined) {
      if (!call.answered) {
        // Not answered yet: the new instructions run when it is.
        this.instructions.twiml = change.twiml ?? null;
        this.instructions.url = change.url ?? this.instructions.url;
        if (change.method) this.instructions.method = change.method;
        return;
      }
      this.twimlRun++;
      call.stopStream();
      if (change.twiml !== undefined) {
        let verbs: TwimlVerb[];
        try {
          verbs = parseTwiml(change.twiml);
        } catch (err) {
          this.problem((err as Error).message);
          return call.end({ reason: 'failed', by: 'carrier' });
        }
        void this.execute(verbs);
      } else {
        void this.fetchTwiml(change.url!, change.method ?? 'POST', {}).then((verbs) => verbs && this.execute(verbs));
      }
      return;
    }
    if (change.status === 'canceled' && !call.answered) call.end({ reason: 'canceled', by: 'service' });
    if (change.status === 'completed') call.end(call.answered ? { reason: 'completed', by: 'service' } : { reason: 'canceled', by: 'service' });
  }

  private baseParams(): Record<string, string> {
    const r = this.call.record;
    return {
      AccountSid: this.instructions.accountSid,
      ApiVersion: API_VERSION,
      CallSid: r.callSid,
      CallStatus: this.status(),
      Called: r.to,
      Caller: r.from,
      Direction: r.direction === 'inbound' ? 'inbound' : 'outbound-api',
      From: r.from,
      To: r.to,
    };
  }

  private statusCallback(event: 'initiated' | 'ringing' | 'answered' | 'completed'): void {
    const { statusCallback, statusCallbackMethod, statusEvents } = this.instructions;
    if (!statusCallback || !this.ctx.callbacksEnabled()) return;
    if (event !== 'completed' && !statusEvents.has(event)) return;
    const r = this.call.record;
    const params: Record<string, string> = {
      ...this.baseParams(),
      CallbackSource: 'call-progress-events',
      Timestamp: rfc2822(Date.now()),
      SequenceNumber: String(this.sequence++),
    };
    if (event === 'initiated') params.CallStatus = 'initiated';
    if (event === 'completed') {
      const seconds = r.answeredAt && r.endedAt ? Math.round(((r.endedAt - r.answeredAt) * this.ctx.clock.speed) / 1000) : 0;
      params.CallDuration = String(seconds);
      params.Duration = String(Math.ceil(seconds / 60));
      if (r.answeredBy) params.AnsweredBy = r.answeredBy;
    }
    void this.queue.push(async () => {
      await this.post('status', statusCallback, statusCallbackMethod, params, params.CallStatus);
    });
  }

  private amdCallback(answeredBy: { value: string; ms: number }): void {
    const { asyncAmdCallback, asyncAmdMethod } = this.instructions;
    if (!asyncAmdCallback || !this.ctx.callbacksEnabled() || this.call.over) return;
    const params = {
      AccountSid: this.instructions.accountSid,
      CallSid: this.call.record.callSid,
      AnsweredBy: answeredBy.value,
      MachineDetectionDuration: String(answeredBy.ms),
    };
    void this.queue.push(async () => {
      await this.post('amd', asyncAmdCallback, asyncAmdMethod, params, answeredBy.value);
    });
  }

  /** Answering-machine detection from the answer on; null when the call ended first. */
  private async detect(): Promise<{ value: string; ms: number } | null> {
    const call = this.call;
    const started = Date.now();
    let value: string;
    if (call.plan.callee !== 'voicemail') {
      if (!(await call.sleepFrames(HUMAN_DETECTED_MS))) return null;
      value = 'human';
    } else if (this.instructions.machineDetection === 'Enable') {
      if (!(await call.sleepFrames(MACHINE_START_DETECTED_MS))) return null;
      value = 'machine_start';
    } else {
      const timedOut = call.sleepFrames(this.instructions.machineDetectionTimeoutMs).then((due) => (due ? 'unknown' : null));
      const result = await Promise.race([this.beepPromise.then(() => 'machine_end_beep'), timedOut]);
      if (!result || call.over) return null;
      value = result;
    }
    call.record.answeredBy = value;
    call.changed();
    return { value, ms: Math.round((Date.now() - started) * this.ctx.clock.speed) };
  }

  private async runVoiceUrl(answeredBy: { value: string } | null): Promise<void> {
    const { twiml, url, method } = this.instructions;
    let verbs: TwimlVerb[] | null;
    if (twiml !== null) {
      try {
        verbs = parseTwiml(twiml);
      } catch (err) {
        this.problem((err as Error).message);
        verbs = null;
        this.call.end({ reason: 'failed', by: 'carrier' });
      }
    } else {
      verbs = await this.fetchTwiml(url, method, answeredBy ? { AnsweredBy: answeredBy.value } : {});
    }
    if (verbs) await this.execute(verbs);
  }

  /** Requests TwiML from the voice URL; a failed request or an unparsable answer fails the call. */
  private async fetchTwiml(url: string | null, method: HttpMethod, extra: Record<string, string>): Promise<TwimlVerb[] | null> {
    if (!url) {
      this.problem('no voice Url to request TwiML from');
      this.call.end({ reason: 'failed', by: 'carrier' });
      return null;
    }
    const params = { ...this.baseParams(), ...extra };
    const answer = await this.post('voice', url, method, params, params.CallStatus);
    if (this.call.over) return null;
    if (answer.status === null || answer.status < 200 || answer.status >= 300) {
      this.problem(`voice Url answered ${answer.status ?? answer.error}`);
      this.call.end({ reason: 'failed', by: 'carrier' });
      return null;
    }
    try {
      return parseTwiml(answer.body);
    } catch (err) {
      this.problem((err as Error).message);
      this.call.end({ reason: 'failed', by: 'carrier' });
      return null;
    }
  }

  /** Runs TwiML verbs in order; a newer document (REST update) stops an older one. */
  private async execute(verbs: TwimlVerb[]): Promise<void> {
    const run = ++this.twimlRun;
    const call = this.call;
    let streamClosed = false;
    for (const v of verbs) {
      if (call.over || run !== this.twimlRun) return;
      streamClosed = false;
      switch (v.verb) {
        case 'Stream': {
          const url = this.streamUrl(v.url);
          if (!url) continue;
          const how = await call.openStream({
            url,
            framing: providerAFraming({ accountSid: this.instructions.accountSid, callSid: call.record.callSid, customParameters: v.parameters }),
          });
          if (how === 'carrier') return;
          streamClosed = how === 'service';
          continue;
        }
        case 'Dial':
          if (!v.number) {
            this.problem('<Dial> without a number');
            continue;
          }
          return call.transfer(v.number);
        case 'Hangup':
          return call.end({ reason: 'completed', by: 'service' });
        case 'Reject':
          return call.end(call.answered ? { reason: 'completed', by: 'service' } : { reason: 'rejected', by: 'service', detail: v.reason });
        case 'Pause':
          if (!(await call.sleep(v.seconds * 1000))) return;
          continue;
        case 'Other':
          this.problem(`<${v.name}> is not simulated; skipped`);
          continue;
      }
    }
    if (!call.over && run === this.twimlRun) call.end({ reason: 'completed', by: streamClosed ? 'stream_closed' : 'service' });
  }

  /** The Stream url, checked as provider_a would: ws(s) only, and the query string is not passed on. */
  private streamUrl(raw: string): string | null {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      this.problem(`<Stream url="${raw}"> is not a URL`);
      return null;
    }
    if (url.protocol !== 'wss:' && url.protocol !== 'ws:') {
      this.problem(`<Stream url="${raw}"> must be wss://`);
      return null;
    }
    if (url.search) {
      this.problem('<Stream> url carries a query string; provider_a does not pass it on (use <Parameter>)');
      url.search = '';
    }
    return url.toString();
  }

  private problem(text: string): void {
    const errors = this.call.record.protocolErrors;
    if (!errors.includes(text) && errors.length < 100) errors.push(text);
    this.call.log.info({ problem: text }, 'sandbox provider_a call problem');
    this.call.changed();
  }

  /** One signed request to the service (form POST, or GET with the parameters in the query). */
  private async post(kind: CallbackRecord['kind'], url: string, method: HttpMethod, params: FormParams, event: string): Promise<Delivery> {
    const token = this.tokens(this.instructions.accountSid) ?? '';
    let target = url;
    let body: string | undefined;
    let signature: string;
    if (method === 'GET') {
      const u = new URL(url);
      for (const [k, v] of Object.entries(params)) for (const one of Array.isArray(v) ? v : [v]) u.searchParams.append(k, one);
      target = u.toString();
      signature = twilioSignature(token, target, {});
    } else {
      body = encodeForm(params);
      signature = twilioSignature(token, url, params);
    }
    const headers: Record<string, string> = { 'x-twilio-signature': signature, 'user-agent': 'TwilioProxy/1.1', accept: '*/*' };
    if (body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded; charset=utf-8';
    const answer = await deliver(target, { method, headers, body }, this.ctx.shutdown);
    const r = this.call.record;
    r.callbacks.push({ kind, url: target, event, httpStatus: answer.status, at: Date.now() });
    if (answer.status === null || answer.status >= 300) {
      this.call.log.info({ kind, status: answer.status, error: answer.error }, 'sandbox provider_a callback not accepted');
    }
    this.call.changed();
    return answer;
  }
}
