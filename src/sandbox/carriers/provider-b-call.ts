/**
 * provider_b's side of one call: Ed25519-signed JSON webhooks (in order, each awaited), streaming from
 * `stream_url`, answering-machine detection, and the Call Control actions.
 */
import { randomUUID, type KeyObject } from 'node:crypto';
import { telnyxSignatureHeaders } from './signing.js';
import type { CallEnd, CarrierHooks, SimCall, StreamEnd } from './call.js';
import type { CarrierContext } from './carrier.js';
import { providerBFraming } from './frames.js';
import { deliver, SerialQueue } from './http.js';
import type { MediaStream } from './media.js';

export interface StreamParams {
  url: string;
  track: string | null;
  bidirectionalMode: string | null;
  bidirectionalCodec: string | null;
}

export interface ProviderBCallInit {
  connectionId: string;
  webhookUrl: string | null;
  clientState: string | null;
  amd: string | null;
  stream: StreamParams | null;
}

const HUMAN_DETECTED_MS = 800;
const MACHINE_DETECTED_MS = 1000;
/** After the service closed the stream, the carrier hangs the call up this long later. */
const HANGUP_AFTER_STREAM_CLOSED_MS = 1000;
/** AMD modes that also report the end of a machine's greeting (the beep). */
const GREETING_MODES = new Set(['detect_beep', 'premium', 'greeting_end']);

export class ProviderBCall implements CarrierHooks {
  readonly callLegId = randomUUID();
  readonly callSessionId = randomUUID();
  connectionId: string;
  webhookUrl: string | null;
  clientState: string | null;
  readonly commandIds = new Set<string>();
  private readonly amd: string | null;
  private streamParams: StreamParams | null;
  private readonly queue = new SerialQueue();
  private startedAtIso: string | null = null;

  constructor(
    readonly call: SimCall,
    private readonly ctx: CarrierContext,
    private readonly signingKey: KeyObject,
    init: ProviderBCallInit,
    /** The webhook URL of a connection (call control application), looked up at send time. */
    private readonly connectionWebhook: (connectionId: string) => string | null,
  ) {
    this.connectionId = init.connectionId;
    this.webhookUrl = init.webhookUrl;
    this.clientState = init.clientState;
    this.amd = init.amd && init.amd !== 'disabled' ? init.amd : null;
    this.streamParams = init.stream;
    call.hooks = this;
  }

  private get incoming(): boolean {
    return this.call.record.direction === 'inbound';
  }

  initiated(): Promise<void> {
    return this.webhook('call.initiated', { state: this.incoming ? 'parked' : 'bridging' });
  }

  answered(): void {
    this.startedAtIso = new Date().toISOString();
    this.webhook('call.answered', { state: 'answered', start_time: this.startedAtIso });
    if (this.streamParams) this.startStreaming(this.streamParams);
    if (this.amd && !this.incoming) void this.detect();
  }

  beep(): void {
    if (this.amd && GREETING_MODES.has(this.amd) && !this.call.over) {
      this.webhook('call.machine.greeting.ended', { result: 'beep_detected' });
    }
  }

  dtmf(digit: string): void {
    this.webhook('call.dtmf.received', { digit });
  }

  streamStarted(stream: MediaStream): void {
    this.webhook('streaming.started', { stream_url: this.call.record.streamUrl, stream_id: stream.id });
  }

  streamEnded(how: StreamEnd, stream: MediaStream): void {
    if (how === 'failed') {
      this.webhook('streaming.failed', { stream_url: this.call.record.streamUrl, stream_id: stream.id, failure_reason: 'connection_failed' });
      return;
    }
    this.webhook('streaming.stopped', { stream_url: this.call.record.streamUrl, stream_id: stream.id });
    if (how === 'service') {
      void this.call.sleep(HANGUP_AFTER_STREAM_CLOSED_MS).then((due) => due && this.call.end({ reason: 'completed', by: 'stream_closed' }));
    }
  }

  ended(end: CallEnd): void {
    const r = this.call.record;
    const cause = this.hangupCause(end);
    r.endStatus = cause;
    this.webhook('call.hangup', {
      state: 'hangup',
      hangup_cause: cause,
      hangup_source: this.hangupSource(end),
      sip_hangup_cause: cause === 'user_busy' ? '486' : cause === 'call_rejected' ? '603' : cause === 'timeout' ? '480' : '200',
      start_time: this.startedAtIso ?? new Date(r.createdAt).toISOString(),
      end_time: new Date().toISOString(),
    });
  }

  /** The stream to open when the call is answered. */
  setStream(params: StreamParams): void {
    this.streamParams = params;
  }

  /** The `streaming_start` action, or the stream requested when dialing/answering. */
  startStreaming(params: StreamParams): void {
    this.streamParams = params;
    const r = this.call.record;
    const mode = params.bidirectionalMode;
    const codec = params.bidirectionalCodec;
    const refusesAudio =
      mode !== 'rtp'
        ? 'agent audio on a stream that is not bidirectional (stream_bidirectional_mode: rtp); the carrier does not play it'
        : codec && codec !== 'PCMU'
          ? `agent audio is PCMU but the stream was opened with stream_bidirectional_codec ${codec}`
          : null;
    void this.call.openStream({
      url: params.url,
      framing: providerBFraming({ callControlId: r.callSid, callSessionId: this.callSessionId, from: r.from, to: r.to, clientState: this.clientState }),
      refusesAudio,
    });
  }

  private hangupCause(end: CallEnd): string {
    switch (end.reason) {
      case 'busy':
        return 'user_busy';
      case 'no_answer':
        return 'timeout';
      case 'canceled':
        return 'originator_cancel';
      case 'rejected':
        return end.detail === 'USER_BUSY' ? 'user_busy' : end.detail === 'hangup' ? 'normal_clearing' : 'call_rejected';
      case 'time_limit':
        return 'time_limit';
      case 'failed':
        return 'unspecified';
      default:
        return 'normal_clearing';
    }
  }

  /** caller/callee from the call's point of view: the service is the caller of outgoing calls. */
  private hangupSource(end: CallEnd): string {
    if (end.by === 'carrier') return 'unknown';
    const serviceSide = end.by === 'service';
    return serviceSide === this.incoming ? 'callee' : 'caller';
  }

  private async detect(): Promise<void> {
    const machine = this.call.plan.callee === 'voicemail';
    if (!(await this.call.sleepFrames(machine ? MACHINE_DETECTED_MS : HUMAN_DETECTED_MS))) return;
    const result = machine ? 'machine' : 'human';
    this.call.record.answeredBy = result;
    this.call.changed();
    this.webhook('call.machine.detection.ended', { result });
  }

  /** Queues one webhook; its payload is taken now, its delivery waits for the ones before it. */
  webhook(eventType: string, extra: Record<string, unknown>): Promise<void> {
    if (!this.ctx.callbacksEnabled()) return Promise.resolve();
    const url = this.webhookUrl ?? this.connectionWebhook(this.connectionId);
    if (!url) return Promise.resolve();
    const r = this.call.record;
    const body = JSON.stringify({
      data: {
        record_type: 'event',
        event_type: eventType,
        id: randomUUID(),
        occurred_at: new Date().toISOString(),
        payload: {
          call_control_id: r.callSid,
          call_leg_id: this.callLegId,
          call_session_id: this.callSessionId,
          connection_id: this.connectionId,
          client_state: this.clientState,
          from: r.from,
          to: r.to,
          direction: this.incoming ? 'incoming' : 'outgoing',
          ...extra,
        },
      },
      meta: { attempt: 1, delivered_to: url },
    });
    return this.queue.push(async () => {
      const headers = {
        'content-type': 'application/json',
        'user-agent': 'telnyx-webhooks',
        ...telnyxSignatureHeaders(this.signingKey, body, Math.floor(Date.now() / 1000)),
      };
      const answer = await deliver(url, { method: 'POST', headers, body }, this.ctx.shutdown);
      r.callbacks.push({ kind: 'webhook', url, event: eventType, httpStatus: answer.status, at: Date.now() });
      if (answer.status === null || answer.status >= 300) {
        this.call.log.info({ event: eventType, status: answer.status, error: answer.error }, 'sandbox provider_b webhook not accepted');
      }
      this.call.changed();
    });
  }
}
