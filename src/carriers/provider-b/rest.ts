/**
 * provider_b's Call Control v2 REST API (Telnyx-style): JSON, `Authorization: Bearer <api_key>`,
 * answers `{data}`, errors `{errors: [{code, title, detail}]}`. Calls are dialed with the media stream
 * (bidirectional RTP, PCMU) and answering-machine detection in the one request; `client_state`
 * carries the call id and the stream token (base64 JSON) into every event and the stream's `start`;
 * `command_id` makes a repeated command a no-op at the carrier.
 */
import { CarrierError, type CallbackUrls, type Carrier, type CarrierCredentials, type DialRequest } from '../carrier.js';
import type { ProviderBCredentials } from './credentials.js';
import { carrierRequest, type ErrorReader } from '../request.js';

/** provider_b errors: `{errors: [{code, title, detail}]}`; the first one speaks for the answer. */
const readError: ErrorReader = (body) => {
  const first = Array.isArray(body.errors) ? (body.errors[0] as { code?: unknown; title?: unknown; detail?: unknown } | undefined) : undefined;
  return {
    message: [first?.title, first?.detail].filter((x) => typeof x === 'string').join(': ') || null,
    code: first?.code === undefined ? null : String(first.code),
  };
};

/** What the service puts in `client_state`. */
export interface ClientState {
  call_id: string;
  stream_token?: string;
}

export function encodeClientState(state: ClientState): string {
  return Buffer.from(JSON.stringify(state)).toString('base64');
}

/** The client_state of an event or stream, or null when absent or not ours. */
export function decodeClientState(value: unknown): ClientState | null {
  if (typeof value !== 'string' || value.length > 4096) return null;
  try {
    const parsed = JSON.parse(Buffer.from(value, 'base64').toString('utf8')) as Record<string, unknown>;
    if (typeof parsed.call_id !== 'string' || !/^call_[0-9A-Z]{26}$/.test(parsed.call_id)) return null;
    return { call_id: parsed.call_id, ...(typeof parsed.stream_token === 'string' ? { stream_token: parsed.stream_token } : {}) };
  } catch {
    return null;
  }
}

function creds(c: CarrierCredentials): ProviderBCredentials {
  if (c.provider !== 'provider_b') throw new Error(`provider_b adapter given ${c.provider} credentials`);
  return c as ProviderBCredentials;
}

/** The media stream part of a dial or answer command. */
export function streamParams(streamUrl: string): Record<string, string> {
  return { stream_url: streamUrl, stream_track: 'inbound_track', stream_bidirectional_mode: 'rtp', stream_bidirectional_codec: 'PCMU' };
}

export class ProviderBCarrier implements Carrier {
  readonly provider = 'provider_b' as const;

  constructor(
    private readonly apiUrl: string,
    private readonly urls: CallbackUrls,
    private readonly timeoutMs: number,
  ) {}

  get eventsUrl(): string {
    return `${this.urls.base()}/telephony/provider_b/events`;
  }

  async request(c: ProviderBCredentials, method: 'GET' | 'POST' | 'PATCH', path: string, body?: Record<string, unknown>): Promise<Record<string, unknown>> {
    return carrierRequest(
      `${this.apiUrl.replace(/\/+$/, '')}${path}`,
      {
        method,
        headers: { authorization: `Bearer ${c.apiKey}`, accept: 'application/json', ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      },
      { timeoutMs: this.timeoutMs, provider: 'provider_b', readError },
    );
  }

  /** POST an action on a live call; a call already over (422 code 90018) is not an error. */
  async action(c: ProviderBCredentials, callControlId: string, action: string, body: Record<string, unknown> = {}): Promise<void> {
    try {
      await this.request(c, 'POST', `/calls/${encodeURIComponent(callControlId)}/actions/${action}`, body);
    } catch (err) {
      if (err instanceof CarrierError && err.detail.code === '90018') return;
      throw err;
    }
  }

  async dial(credentials: CarrierCredentials, r: DialRequest): Promise<{ callSid: string }> {
    const c = creds(credentials);
    const body = await this.request(c, 'POST', '/calls', {
      connection_id: c.connectionId,
      to: r.to,
      from: r.from,
      webhook_url: this.eventsUrl,
      webhook_url_method: 'POST',
      client_state: encodeClientState({ call_id: r.callId, stream_token: r.streamToken }),
      command_id: `dial-${r.callId}`,
      timeout_secs: r.ringTimeoutS,
      time_limit_secs: r.timeLimitS,
      answering_machine_detection: r.machineDetection ? 'detect_beep' : 'disabled',
      ...(r.machineDetection ? { answering_machine_detection_config: { total_analysis_time_millis: r.machineDetection.timeoutS * 1000 } } : {}),
      ...streamParams(this.urls.media('provider_b')),
    });
    const data = body.data as { call_control_id?: unknown } | undefined;
    if (typeof data?.call_control_id !== 'string') throw new CarrierError('unavailable', 'provider_b answered without a call_control_id');
    return { callSid: data.call_control_id };
  }

  /** Answers an inbound call with our media stream. */
  async answer(credentials: CarrierCredentials, callControlId: string, state: ClientState): Promise<void> {
    await this.action(creds(credentials), callControlId, 'answer', {
      client_state: encodeClientState(state),
      command_id: `answer-${state.call_id}`,
      ...streamParams(this.urls.media('provider_b')),
    });
  }

  /** Refuses an inbound call (busy). */
  async reject(credentials: CarrierCredentials, callControlId: string): Promise<void> {
    await this.action(creds(credentials), callControlId, 'reject', { cause: 'USER_BUSY' });
  }

  async hangup(credentials: CarrierCredentials, callSid: string): Promise<void> {
    try {
      await this.action(creds(credentials), callSid, 'hangup', {});
    } catch (err) {
      if (err instanceof CarrierError && err.kind === 'not_found') return;
      throw err;
    }
  }

  async transfer(credentials: CarrierCredentials, callSid: string, to: string): Promise<void> {
    await this.action(creds(credentials), callSid, 'transfer', { to });
  }

  /** `send_dtmf`: the carrier plays the keys into the call, 250 ms a key (its default). */
  async sendDtmf(credentials: CarrierCredentials, callSid: string, keys: string): Promise<void> {
    await this.action(creds(credentials), callSid, 'send_dtmf', { digits: keys, duration_millis: 250 });
  }

  async setInbound(credentials: CarrierCredentials, phoneNumber: string, enabled: boolean): Promise<void> {
    const c = creds(credentials);
    const list = await this.request(c, 'GET', `/phone_numbers?filter[phone_number]=${encodeURIComponent(phoneNumber)}`);
    const numbers = Array.isArray(list.data) ? (list.data as Array<{ id?: unknown; phone_number?: unknown }>) : [];
    const found = numbers.find((n) => n.phone_number === phoneNumber && (typeof n.id === 'string' || typeof n.id === 'number'));
    if (!found) throw new CarrierError('not_found', `The carrier account has no number ${phoneNumber}.`);
    if (enabled) {
      await this.request(c, 'PATCH', `/call_control_applications/${encodeURIComponent(c.connectionId)}`, { webhook_event_url: this.eventsUrl });
    }
    await this.request(c, 'PATCH', `/phone_numbers/${encodeURIComponent(String(found.id))}`, { connection_id: enabled ? c.connectionId : null });
  }
}
