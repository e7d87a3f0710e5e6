/**
 * provider_a's REST API (Twilio-style): form-encoded bodies, HTTP Basic `AccountSid:AuthToken`, JSON
 * answers, errors `{code, message, more_info, status}`. Calls are placed with `Url` (the voice
 * webhook that answers with the media stream TwiML), progress and answering-machine callbacks, the
 * ring timeout and the time limit; the call id rides in each callback URL's query so a callback can be
 * matched even before the dial request's answer is stored.
 */
import { CarrierError, type CallbackUrls, type Carrier, type CarrierCredentials, type DialRequest } from '../carrier.js';
import type { ProviderACredentials } from './credentials.js';
import { carrierRequest, type ErrorReader } from '../request.js';
import { dialTwiml } from './twiml.js';

export const API_VERSION = '2010-04-01';

/** provider_a errors: `{code, message, more_info, status}`. */
const readError: ErrorReader = (body) => ({
  message: typeof body.message === 'string' ? body.message : null,
  code: body.code === undefined ? null : String(body.code),
});

function creds(c: CarrierCredentials): ProviderACredentials {
  if (c.provider !== 'provider_a') throw new Error(`provider_a adapter given ${c.provider} credentials`);
  return c as ProviderACredentials;
}

function form(params: Record<string, string | string[]>): URLSearchParams {
  const body = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) for (const one of Array.isArray(v) ? v : [v]) body.append(k, one);
  return body;
}

export class ProviderACarrier implements Carrier {
  readonly provider = 'provider_a' as const;

  constructor(
    private readonly apiUrl: string,
    private readonly urls: CallbackUrls,
    private readonly timeoutMs: number,
  ) {}

  private accountUrl(c: ProviderACredentials, rest: string): string {
    return `${this.apiUrl.replace(/\/+$/, '')}/${API_VERSION}/Accounts/${encodeURIComponent(c.accountSid)}/${rest}`;
  }

  private async request(
    c: ProviderACredentials,
    method: 'GET' | 'POST',
    rest: string,
    params?: Record<string, string | string[]>,
  ): Promise<Record<string, unknown>> {
    return carrierRequest(
      this.accountUrl(c, rest),
      {
        method,
        headers: {
          authorization: `Basic ${Buffer.from(`${c.accountSid}:${c.authToken}`).toString('base64')}`,
          accept: 'application/json',
          ...(params ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        },
        body: params ? form(params).toString() : undefined,
      },
      { timeoutMs: this.timeoutMs, provider: 'provider_a', readError },
    );
  }

  /** Our callback URL for `path` with the call id in its query (covered by the signature). */
  private callback(path: string, callId: string): string {
    return `${this.urls.base()}/telephony/provider_a/${path}?call_id=${encodeURIComponent(callId)}`;
  }

  async dial(credentials: CarrierCredentials, r: DialRequest): Promise<{ callSid: string }> {
    const c = creds(credentials);
    const params: Record<string, string | string[]> = {
      To: r.to,
      From: r.from,
      Url: this.callback('voice', r.callId),
      Method: 'POST',
      StatusCallback: this.callback('status', r.callId),
      StatusCallbackMethod: 'POST',
      // Not `initiated`: the dial response already moves the call to `initiated` with its CallSid (src/calls/jobs.ts),
      // so that callback would be one more request per call carrying nothing new; `ringing` moves a call on from `queued` too.
      StatusCallbackEvent: ['ringing', 'answered', 'completed'],
      Timeout: String(r.ringTimeoutS),
      TimeLimit: String(r.timeLimitS),
    };
    if (r.machineDetection) {
      Object.assign(params, {
        MachineDetection: 'DetectMessageEnd',
        MachineDetectionTimeout: String(r.machineDetection.timeoutS),
        AsyncAmd: 'true',
        AsyncAmdStatusCallback: this.callback('amd', r.callId),
        AsyncAmdStatusCallbackMethod: 'POST',
      });
    }
    const body = await this.request(c, 'POST', 'Calls.json', params);
    if (typeof body.sid !== 'string') throw new CarrierError('unavailable', 'provider_a answered without a call sid');
    return { callSid: body.sid };
  }

  async hangup(credentials: CarrierCredentials, callSid: string, opts: { answered: boolean }): Promise<void> {
    const c = creds(credentials);
    try {
      const path = `Calls/${encodeURIComponent(callSid)}.json`;
      const call = await this.request(c, 'POST', path, { Status: opts.answered ? 'completed' : 'canceled' });
      // Canceling ends only a call still queued or ringing: one answered meanwhile goes on unless hung up as answered.
      if (!opts.answered && call.status === 'in-progress') await this.request(c, 'POST', path, { Status: 'completed' });
    } catch (err) {
      // A call the carrier no longer knows is over already.
      if (err instanceof CarrierError && err.kind === 'not_found') return;
      throw err;
    }
  }

  async transfer(credentials: CarrierCredentials, callSid: string, to: string): Promise<void> {
    await this.request(creds(credentials), 'POST', `Calls/${encodeURIComponent(callSid)}.json`, { Twiml: dialTwiml(to) });
  }

  async setInbound(credentials: CarrierCredentials, phoneNumber: string, enabled: boolean): Promise<void> {
    const c = creds(credentials);
    const list = await this.request(c, 'GET', `IncomingPhoneNumbers.json?PhoneNumber=${encodeURIComponent(phoneNumber)}`);
    const numbers = Array.isArray(list.incoming_phone_numbers) ? (list.incoming_phone_numbers as Array<{ sid?: unknown; phone_number?: unknown }>) : [];
    const found = numbers.find((n) => n.phone_number === phoneNumber && typeof n.sid === 'string');
    if (!found) throw new CarrierError('not_found', `The carrier account has no number ${phoneNumber}.`);
    await this.request(c, 'POST', `IncomingPhoneNumbers/${encodeURIComponent(found.sid as string)}.json`, {
      VoiceUrl: enabled ? `${this.urls.base()}/telephony/provider_a/voice` : '',
      VoiceMethod: 'POST',
    });
  }
}
