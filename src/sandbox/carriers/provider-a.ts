/** provider_a's REST API (Twilio-compatible, base `/provider_a`): calls and incoming phone numbers. */
import { createHash, randomBytes } from 'node:crypto';
import type http from 'node:http';
import { SimCall } from './call.js';
import {
  DEFAULT_TIME_LIMIT_S,
  E164,
  calleeOf,
  inboundPlan,
  numberExists,
  outboundPlan,
  outcomeOf,
  INBOUND_GIVE_UP_MS,
  type CarrierContext,
  type RingInput,
} from './carrier.js';
import { formValue, formValues, parseForm, readBody, sendJson } from './http.js';
import { API_VERSION, ProviderACall, rfc2822, type HttpMethod, type ProviderAInstructions } from './provider-a-call.js';
import { newRecord, withoutSecrets } from './records.js';

const ACCOUNT_SID = /^AC[0-9a-fA-F]{32}$/;
const AUTH_TOKEN = /^[0-9a-fA-F]{32}$/;
const MAX_CALLS = 1000;

interface NumberConfig {
  sid: string;
  phoneNumber: string;
  accountSid: string;
  voiceUrl: string;
  voiceMethod: HttpMethod;
  createdAt: number;
  updatedAt: number;
}

export interface ProviderA {
  handle(req: http.IncomingMessage, res: http.ServerResponse, path: string, query: URLSearchParams): Promise<void>;
  ring(input: RingInput): Promise<{ callSid: string }>;
  shutdown(): void;
}

function twilioError(res: http.ServerResponse, status: number, code: number, message: string): void {
  sendJson(res, status, { code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status });
}

function notFound(res: http.ServerResponse, path: string): void {
  twilioError(res, 404, 20404, `The requested resource ${path} was not found`);
}

function method(value: string | undefined): HttpMethod | null {
  if (value === undefined || value === '') return 'POST';
  const m = value.toUpperCase();
  return m === 'GET' || m === 'POST' ? m : null;
}

function httpUrl(value: string): boolean {
  try {
    const u = new URL(value);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}

/** The sandbox's number sid: the same for a number whichever account asks. */
function numberSid(phoneNumber: string): string {
  return `PN${createHash('sha256').update(phoneNumber).digest('hex').slice(0, 32)}`;
}

export function createProviderA(ctx: CarrierContext): ProviderA {
  const tokens = new Map<string, string>();
  const calls = new Map<string, ProviderACall>();
  const numbers = new Map<string, NumberConfig>();
  const numbersBySid = new Map<string, string>();

  function remember(call: ProviderACall): void {
    calls.set(call.call.record.callSid, call);
    if (calls.size > MAX_CALLS) calls.delete(calls.keys().next().value!);
    ctx.track(call.call);
  }

  /** Basic auth against the AccountSid of the path; answers 401 and returns false when it fails. */
  function authenticate(req: http.IncomingMessage, res: http.ServerResponse, accountSid: string): boolean {
    const header = req.headers.authorization ?? '';
    const m = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(header);
    const decoded = m ? Buffer.from(m[1], 'base64').toString('utf8') : '';
    const colon = decoded.indexOf(':');
    const user = decoded.slice(0, colon);
    const token = decoded.slice(colon + 1);
    if (colon < 0 || !ACCOUNT_SID.test(user) || !AUTH_TOKEN.test(token) || user !== accountSid) {
      sendJson(res, 401, { code: 20003, message: 'Authenticate', more_info: 'https://www.twilio.com/docs/errors/20003', status: 401 });
      return false;
    }
    tokens.set(accountSid, token);
    return true;
  }

  function callJson(pa: ProviderACall): Record<string, unknown> {
    const r = pa.call.record;
    const accountSid = pa.instructions.accountSid;
    const uri = `/${API_VERSION}/Accounts/${accountSid}/Calls/${r.callSid}`;
    const duration = r.answeredAt && r.endedAt ? Math.round(((r.endedAt - r.answeredAt) * ctx.clock.speed) / 1000) : null;
    return {
      sid: r.callSid,
      account_sid: accountSid,
      parent_call_sid: null,
      to: r.to,
      to_formatted: r.to,
      from: r.from,
      from_formatted: r.from,
      phone_number_sid: r.direction === 'inbound' ? numberSid(r.to) : null,
      status: pa.status(),
      start_time: r.answeredAt ? rfc2822(r.answeredAt) : null,
      end_time: r.endedAt ? rfc2822(r.endedAt) : null,
      duration: r.state === 'completed' ? String(duration ?? 0) : null,
      price: null,
      price_unit: 'USD',
      direction: r.direction === 'inbound' ? 'inbound' : 'outbound-api',
      answered_by: r.answeredBy,
      annotation: null,
      api_version: API_VERSION,
      forwarded_from: null,
      group_sid: null,
      caller_name: null,
      queue_time: '0',
      trunk_sid: null,
      date_created: rfc2822(r.createdAt),
      date_updated: rfc2822(Date.now()),
      uri: `${uri}.json`,
      subresource_uris: {
        notifications: `${uri}/Notifications.json`,
        recordings: `${uri}/Recordings.json`,
        streams: `${uri}/Streams.json`,
      },
    };
  }

  function numberJson(n: NumberConfig): Record<string, unknown> {
    return {
      sid: n.sid,
      account_sid: n.accountSid,
      friendly_name: n.phoneNumber,
      phone_number: n.phoneNumber,
      voice_url: n.voiceUrl,
      voice_method: n.voiceMethod,
      voice_fallback_url: null,
      status_callback: '',
      capabilities: { voice: true, sms: true, mms: true, fax: false },
      status: 'in-use',
      api_version: API_VERSION,
      date_created: rfc2822(n.createdAt),
      date_updated: rfc2822(n.updatedAt),
      uri: `/${API_VERSION}/Accounts/${n.accountSid}/IncomingPhoneNumbers/${n.sid}.json`,
    };
  }

  /** The number as this account sees it (every existing number is everybody's in the sandbox). */
  function numberFor(accountSid: string, phoneNumber: string): NumberConfig {
    const sid = numberSid(phoneNumber);
    numbersBySid.set(sid, phoneNumber);
    const stored = numbers.get(phoneNumber);
    const now = Date.now();
    return stored ?? { sid, phoneNumber, accountSid, voiceUrl: '', voiceMethod: 'POST', createdAt: now, updatedAt: now };
  }

  async function createCall(req: http.IncomingMessage, res: http.ServerResponse, accountSid: string): Promise<void> {
    const p = parseForm(await readBody(req));
    const to = formValue(p, 'To') ?? '';
    const from = formValue(p, 'From') ?? '';
    if (!E164.test(to)) return twilioError(res, 400, 21211, `Invalid 'To' Phone Number: ${to}`);
    if (!E164.test(from)) return twilioError(res, 400, 21212, `Invalid 'From' Phone Number: ${from}`);
    const url = formValue(p, 'Url');
    const twiml = formValue(p, 'Twiml');
    if (!url && !twiml) return twilioError(res, 400, 21205, "A 'Url' or 'Twiml' parameter is required.");
    if (url && !httpUrl(url)) return twilioError(res, 400, 21205, `Url is not a valid URL: ${url}`);
    const urlMethod = method(formValue(p, 'Method'));
    const statusCallback = formValue(p, 'StatusCallback') || null;
    const statusMethod = method(formValue(p, 'StatusCallbackMethod'));
    const amdCallback = formValue(p, 'AsyncAmdStatusCallback') || null;
    const amdMethod = method(formValue(p, 'AsyncAmdStatusCallbackMethod'));
    if (!urlMethod || !statusMethod || !amdMethod) return twilioError(res, 400, 21218, 'Method must be GET or POST');
    for (const cb of [statusCallback, amdCallback]) {
      if (cb && !httpUrl(cb)) return twilioError(res, 400, 21205, `Callback is not a valid URL: ${cb}`);
    }
    const amd = formValue(p, 'MachineDetection') || null;
    if (amd !== null && amd !== 'Enable' && amd !== 'DetectMessageEnd') {
      return twilioError(res, 400, 21220, `Invalid MachineDetection: ${amd}`);
    }
    const timeoutS = Number(formValue(p, 'Timeout') ?? 60);
    const timeLimitS = Number(formValue(p, 'TimeLimit') ?? DEFAULT_TIME_LIMIT_S);
    const amdTimeoutS = Number(formValue(p, 'MachineDetectionTimeout') ?? 30);
    if (![timeoutS, timeLimitS, amdTimeoutS].every((n) => Number.isFinite(n) && n > 0)) {
      return twilioError(res, 400, 21220, 'Timeout, TimeLimit and MachineDetectionTimeout must be positive numbers');
    }

    const callSid = `CA${randomBytes(16).toString('hex')}`;
    const request = withoutSecrets({ ...p, AccountSid: accountSid });
    if (calleeOf(to) === 'refused') {
      const record = newRecord({ provider: 'provider_a', callSid, direction: 'outbound', from, to, outcome: 'failed', request });
      Object.assign(record, { state: 'completed', endStatus: 'failed', endedAt: Date.now(), hangupBy: 'carrier' });
      ctx.records.add(record);
      return twilioError(res, 400, 21211, `Invalid 'To' Phone Number: ${to}`);
    }
    const plan = outboundPlan(ctx, to, timeoutS * 1000, timeLimitS * 1000);
    const record = newRecord({ provider: 'provider_a', callSid, direction: 'outbound', from, to, outcome: outcomeOf(plan.callee), request });
    const call = new SimCall(record, ctx, plan);
    const instructions: ProviderAInstructions = {
      accountSid,
      url: url ?? null,
      method: urlMethod,
      twiml: twiml ?? null,
      statusCallback,
      statusCallbackMethod: statusMethod,
      statusEvents: new Set(
        formValues(p, 'StatusCallbackEvent')
          .flatMap((v) => v.split(/[\s,]+/))
          .filter(Boolean),
      ),
      machineDetection: amd,
      machineDetectionTimeoutMs: amdTimeoutS * 1000,
      asyncAmd: formValue(p, 'AsyncAmd') === 'true',
      asyncAmdCallback: amdCallback,
      asyncAmdMethod: amdMethod,
    };
    const pa = new ProviderACall(call, ctx, (sid) => tokens.get(sid), instructions);
    remember(pa);
    call.log.debug({ to, callee: plan.callee }, 'sandbox provider_a call placed');
    sendJson(res, 201, callJson(pa));
    void call.dial();
  }

  async function updateCall(req: http.IncomingMessage, res: http.ServerResponse, pa: ProviderACall): Promise<void> {
    const p = parseForm(await readBody(req));
    const status = formValue(p, 'Status');
    const twiml = formValue(p, 'Twiml');
    const url = formValue(p, 'Url');
    const urlMethod = method(formValue(p, 'Method'));
    if (status !== undefined && status !== 'canceled' && status !== 'completed') {
      return twilioError(res, 400, 21220, `Invalid Status: ${status}; use canceled or completed`);
    }
    if (url !== undefined && !httpUrl(url)) return twilioError(res, 400, 21205, `Url is not a valid URL: ${url}`);
    if (!urlMethod) return twilioError(res, 400, 21218, 'Method must be GET or POST');
    if (status === undefined && twiml === undefined && url === undefined) {
      return twilioError(res, 400, 21220, 'Nothing to update: give Status, Twiml or Url');
    }
    pa.update({ status, twiml, url, method: urlMethod });
    sendJson(res, 200, callJson(pa));
  }

  async function updateNumber(req: http.IncomingMessage, res: http.ServerResponse, accountSid: string, sid: string, path: string): Promise<void> {
    const phoneNumber = numbersBySid.get(sid);
    if (!phoneNumber) return notFound(res, path);
    const p = parseForm(await readBody(req));
    const n = numberFor(accountSid, phoneNumber);
    const voiceUrl = formValue(p, 'VoiceUrl');
    const voiceMethod = method(formValue(p, 'VoiceMethod'));
    if (!voiceMethod) return twilioError(res, 400, 21218, 'VoiceMethod must be GET or POST');
    if (voiceUrl) {
      if (!httpUrl(voiceUrl)) return twilioError(res, 400, 21502, `VoiceUrl is not a valid URL: ${voiceUrl}`);
    }
    const updated: NumberConfig = {
      ...n,
      accountSid,
      voiceUrl: voiceUrl ?? n.voiceUrl,
      voiceMethod: formValue(p, 'VoiceMethod') !== undefined ? voiceMethod : n.voiceMethod,
      updatedAt: Date.now(),
    };
    numbers.set(phoneNumber, updated);
    ctx.log.debug({ phoneNumber, inbound: Boolean(updated.voiceUrl) }, 'sandbox provider_a number configured');
    sendJson(res, 200, numberJson(updated));
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, path: string, query: URLSearchParams): Promise<void> {
    const m = /^\/2010-04-01\/Accounts\/([^/]+)(\/.*)$/.exec(path);
    if (!m) return notFound(res, path);
    const accountSid = decodeURIComponent(m[1]);
    if (!authenticate(req, res, accountSid)) return;
    const rest = m[2];
    const verb = req.method ?? 'GET';

    if (rest === '/Calls.json' && verb === 'POST') return createCall(req, res, accountSid);
    const callPath = /^\/Calls\/([^/]+)\.json$/.exec(rest);
    if (callPath) {
      const pa = calls.get(callPath[1]);
      if (!pa || pa.instructions.accountSid !== accountSid) return notFound(res, path);
      if (verb === 'GET') return sendJson(res, 200, callJson(pa));
      if (verb === 'POST') return updateCall(req, res, pa);
    }
    if (rest === '/IncomingPhoneNumbers.json' && verb === 'GET') {
      const wanted = query.get('PhoneNumber');
      const list = wanted === null ? [...numbers.values()] : numberExists(wanted) ? [numberFor(accountSid, wanted)] : [];
      const uri = `/${API_VERSION}/Accounts/${accountSid}/IncomingPhoneNumbers.json`;
      return sendJson(res, 200, {
        incoming_phone_numbers: list.map(numberJson),
        start: 0,
        end: Math.max(0, list.length - 1),
        page: 0,
        page_size: 50,
        first_page_uri: `${uri}?PageSize=50&Page=0`,
        next_page_uri: null,
        previous_page_uri: null,
        uri,
      });
    }
    const numberPath = /^\/IncomingPhoneNumbers\/([^/]+)\.json$/.exec(rest);
    if (numberPath) {
      if (verb === 'POST') return updateNumber(req, res, accountSid, numberPath[1], path);
      const phoneNumber = numbersBySid.get(numberPath[1]);
      if (verb === 'GET' && phoneNumber) return sendJson(res, 200, numberJson(numberFor(accountSid, phoneNumber)));
    }
    return notFound(res, path);
  }

  async function ring(input: RingInput): Promise<{ callSid: string }> {
    const number = numbers.get(input.to);
    if (!number?.voiceUrl) throw new Error(`provider_a: no VoiceUrl configured for ${input.to} (POST IncomingPhoneNumbers/{sid}.json)`);
    if (!E164.test(input.from)) throw new Error(`provider_a: caller ${input.from} is not E.164`);
    const callSid = `CA${randomBytes(16).toString('hex')}`;
    const record = newRecord({
      provider: 'provider_a',
      callSid,
      direction: 'inbound',
      from: input.from,
      to: input.to,
      outcome: 'human',
      request: { from: input.from, to: input.to },
    });
    const call = new SimCall(record, ctx, inboundPlan(input.script, DEFAULT_TIME_LIMIT_S * 1000, input.from));
    const pa = new ProviderACall(call, ctx, (sid) => tokens.get(sid), {
      accountSid: number.accountSid,
      url: number.voiceUrl,
      method: number.voiceMethod,
      twiml: null,
      statusCallback: null,
      statusCallbackMethod: 'POST',
      statusEvents: new Set(),
      machineDetection: null,
      machineDetectionTimeoutMs: 30_000,
      asyncAmd: false,
      asyncAmdCallback: null,
      asyncAmdMethod: 'POST',
    });
    remember(pa);
    void call.ringInbound(INBOUND_GIVE_UP_MS);
    await pa.ringInbound();
    return { callSid };
  }

  return {
    handle,
    ring,
    shutdown: () => calls.clear(),
  };
}
