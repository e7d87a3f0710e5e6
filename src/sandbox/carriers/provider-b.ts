/**
 * provider_b's REST API (Telnyx Call Control v2-compatible, base `/provider_b/v2`): calls and their
 * actions, phone numbers and call control applications (inbound routing).
 */
import { createHash, randomBytes, type KeyObject } from 'node:crypto';
import type http from 'node:http';
import { SimCall } from './call.js';
import {
  DEFAULT_TIME_LIMIT_S,
  E164,
  INBOUND_GIVE_UP_MS,
  calleeOf,
  inboundPlan,
  numberExists,
  outboundPlan,
  outcomeOf,
  type CarrierContext,
  type RingInput,
} from './carrier.js';
import { readBody, sendJson } from './http.js';
import { ProviderBCall, type StreamParams } from './provider-b-call.js';
import { newRecord, withoutSecrets } from './records.js';

const API_KEY = /^KEY[A-Za-z0-9_-]{16,}$/;
const CONNECTION_ID = /^[A-Za-z0-9_-]{1,128}$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const AMD_MODES = new Set(['premium', 'detect', 'detect_beep', 'detect_words', 'greeting_end', 'disabled']);
const ACTIONS = new Set(['answer', 'hangup', 'reject', 'transfer', 'streaming_start', 'streaming_stop', 'send_dtmf']);
/** `send_dtmf` digits: keys 0-9, A-D, *, #; pauses w (0.5 s) and W (1 s). */
const DTMF_DIGITS = /^[0-9A-D*#wW]+$/;
const MAX_CALLS = 1000;
const MAX_DIAL_COMMANDS = 10_000;

interface ErrorItem {
  code: string;
  title: string;
  detail: string;
  source?: { pointer: string };
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly item: ErrorItem,
  ) {
    super(item.detail);
  }
}

const invalid = (pointer: string, detail: string, code = '10015', title = 'Invalid value') => new ApiError(422, { code, title, detail, source: { pointer } });
const invalidNumber = (pointer: string, value: unknown) =>
  invalid(pointer, `${JSON.stringify(value)} is not a valid phone number.`, '10016', 'Invalid phone number');
const notFound = (detail: string) => new ApiError(404, { code: '10005', title: 'Resource not found', detail });
const callEnded = () =>
  new ApiError(422, { code: '90018', title: 'Call has already ended', detail: 'This call is no longer active and can not receive commands.' });
const wrongState = (detail: string) => new ApiError(422, { code: '90034', title: 'Invalid call state', detail });

type Body = Record<string, unknown>;

function str(body: Body, key: string): string | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalid(`/${key}`, `${key} must be a string.`);
  return v;
}

function url(body: Body, key: string, protocols: string[]): string | undefined {
  const v = str(body, key);
  if (v === undefined) return undefined;
  try {
    if (protocols.includes(new URL(v).protocol)) return v;
  } catch {
    // falls through to the error
  }
  throw invalid(`/${key}`, `${key} must be a ${protocols.join(' or ')} URL.`);
}

function integer(body: Body, key: string, min: number, max: number, fallback: number): number {
  const v = body[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw invalid(`/${key}`, `${key} must be an integer from ${min} to ${max}.`);
  return v;
}

function clientState(body: Body): string | undefined {
  const v = str(body, 'client_state');
  if (v !== undefined && (!v || !BASE64.test(v))) throw invalid('/client_state', 'client_state must be base64.');
  return v;
}

function streamParams(body: Body): StreamParams | null {
  const streamUrl = url(body, 'stream_url', ['ws:', 'wss:']);
  if (!streamUrl) return null;
  return {
    url: streamUrl,
    track: str(body, 'stream_track') ?? null,
    bidirectionalMode: str(body, 'stream_bidirectional_mode') ?? null,
    bidirectionalCodec: str(body, 'stream_bidirectional_codec') ?? null,
  };
}

function numericId(value: string): string {
  return BigInt(`0x${createHash('sha256').update(value).digest('hex').slice(0, 15)}`).toString();
}

export interface ProviderB {
  handle(req: http.IncomingMessage, res: http.ServerResponse, path: string, query: URLSearchParams): Promise<void>;
  ring(input: RingInput): Promise<{ callSid: string }>;
  shutdown(): void;
}

interface Application {
  webhookEventUrl: string | null;
  createdAt: string;
  updatedAt: string;
}

interface NumberState {
  connectionId: string | null;
  updatedAt: string;
}

export function createProviderB(ctx: CarrierContext, signingKey: KeyObject): ProviderB {
  const calls = new Map<string, ProviderBCall>();
  const dialCommands = new Map<string, ProviderBCall>();
  const applications = new Map<string, Application>();
  const numbers = new Map<string, NumberState>();
  const numbersById = new Map<string, string>();
  const createdAt = new Date().toISOString();

  const connectionWebhook = (connectionId: string) => applications.get(connectionId)?.webhookEventUrl ?? null;

  function remember(pb: ProviderBCall): void {
    calls.set(pb.call.record.callSid, pb);
    if (calls.size > MAX_CALLS) calls.delete(calls.keys().next().value!);
    ctx.track(pb.call);
  }

  function newCallControlId(): string {
    return `v3:${randomBytes(36).toString('base64url')}`;
  }

  function callData(pb: ProviderBCall): Record<string, unknown> {
    const r = pb.call.record;
    return {
      call_control_id: r.callSid,
      call_leg_id: pb.callLegId,
      call_session_id: pb.callSessionId,
      is_alive: r.state !== 'completed',
      record_type: 'call',
    };
  }

  function numberJson(phoneNumber: string): Record<string, unknown> {
    const state = numbers.get(phoneNumber);
    return {
      id: numericId(phoneNumber),
      record_type: 'phone_number',
      phone_number: phoneNumber,
      status: 'active',
      connection_id: state?.connectionId ?? null,
      tags: [],
      created_at: createdAt,
      updated_at: state?.updatedAt ?? createdAt,
    };
  }

  function applicationJson(id: string): Record<string, unknown> {
    const app = applications.get(id);
    return {
      id,
      record_type: 'call_control_application',
      application_name: `sandbox-${id}`,
      active: true,
      webhook_api_version: '2',
      webhook_event_url: app?.webhookEventUrl ?? null,
      created_at: app?.createdAt ?? createdAt,
      updated_at: app?.updatedAt ?? createdAt,
    };
  }

  function dial(body: Body): { status: number; data: Record<string, unknown> } {
    const connectionId = str(body, 'connection_id');
    if (!connectionId || !CONNECTION_ID.test(connectionId)) throw invalid('/connection_id', 'connection_id must be 1-128 letters, digits, _ or -.');
    const to = body.to;
    const from = body.from;
    if (typeof to !== 'string' || !E164.test(to)) throw invalidNumber('/to', to);
    if (typeof from !== 'string' || !E164.test(from)) throw invalidNumber('/from', from);
    const webhookUrl = url(body, 'webhook_url', ['http:', 'https:']) ?? null;
    const state = clientState(body) ?? null;
    const commandId = str(body, 'command_id');
    const ringTimeoutS = integer(body, 'timeout_secs', 1, 600, 30);
    const timeLimitS = integer(body, 'time_limit_secs', 1, DEFAULT_TIME_LIMIT_S, DEFAULT_TIME_LIMIT_S);
    const amd = str(body, 'answering_machine_detection') ?? null;
    if (amd !== null && !AMD_MODES.has(amd)) throw invalid('/answering_machine_detection', `Unknown answering_machine_detection ${amd}.`);
    const stream = streamParams(body);

    const dedupKey = commandId ? `${connectionId}\u0000${commandId}` : null;
    const earlier = dedupKey ? dialCommands.get(dedupKey) : undefined;
    if (earlier) return { status: 200, data: callData(earlier) };

    const callSid = newCallControlId();
    const request = withoutSecrets(body);
    if (calleeOf(to) === 'refused') {
      const record = newRecord({ provider: 'provider_b', callSid, direction: 'outbound', from, to, outcome: 'failed', request });
      Object.assign(record, { state: 'completed', endStatus: 'unspecified', endedAt: Date.now(), hangupBy: 'carrier' });
      ctx.records.add(record);
      throw invalidNumber('/to', to);
    }
    const plan = outboundPlan(ctx, to, ringTimeoutS * 1000, timeLimitS * 1000);
    const record = newRecord({ provider: 'provider_b', callSid, direction: 'outbound', from, to, outcome: outcomeOf(plan.callee), request });
    const call = new SimCall(record, ctx, plan);
    const pb = new ProviderBCall(call, ctx, signingKey, { connectionId, webhookUrl, clientState: state, amd, stream }, connectionWebhook);
    remember(pb);
    if (dedupKey) {
      dialCommands.set(dedupKey, pb);
      if (dialCommands.size > MAX_DIAL_COMMANDS) dialCommands.delete(dialCommands.keys().next().value!);
    }
    call.log.debug({ to, callee: plan.callee }, 'sandbox provider_b call placed');
    void call.dial();
    return { status: 200, data: callData(pb) };
  }

  function action(pb: ProviderBCall, name: string, body: Body): void {
    const call = pb.call;
    const commandId = str(body, 'command_id');
    if (commandId && pb.commandIds.has(commandId)) return;
    if (call.over) throw callEnded();
    const state = clientState(body);
    const incoming = call.record.direction === 'inbound';
    switch (name) {
      case 'answer': {
        if (!incoming || call.answered) throw wrongState('Only a parked incoming call can be answered.');
        const webhookUrl = url(body, 'webhook_url', ['http:', 'https:']);
        const stream = streamParams(body);
        if (webhookUrl) pb.webhookUrl = webhookUrl;
        if (state !== undefined) pb.clientState = state;
        if (stream) pb.setStream(stream);
        call.answer();
        break;
      }
      case 'reject': {
        if (!incoming || call.answered) throw wrongState('Only a parked incoming call can be rejected.');
        const cause = str(body, 'cause');
        if (cause !== 'CALL_REJECTED' && cause !== 'USER_BUSY') throw invalid('/cause', 'cause must be CALL_REJECTED or USER_BUSY.');
        if (state !== undefined) pb.clientState = state;
        call.end({ reason: 'rejected', by: 'service', detail: cause });
        break;
      }
      case 'hangup':
        if (state !== undefined) pb.clientState = state;
        if (call.answered) call.end({ reason: 'completed', by: 'service' });
        else if (incoming) call.end({ reason: 'rejected', by: 'service', detail: 'hangup' });
        else call.end({ reason: 'canceled', by: 'service' });
        break;
      case 'transfer': {
        const to = body.to;
        if (typeof to !== 'string' || !(E164.test(to) || /^sips?:/.test(to))) throw invalidNumber('/to', to);
        if (!call.answered) throw wrongState('Only an answered call can be transferred.');
        if (state !== undefined) pb.clientState = state;
        call.transfer(to);
        break;
      }
      case 'streaming_start': {
        const stream = streamParams(body);
        if (!stream) throw invalid('/stream_url', 'stream_url is required.');
        if (!call.answered) throw wrongState('Streaming starts on an answered call.');
        if (state !== undefined) pb.clientState = state;
        pb.startStreaming(stream);
        break;
      }
      case 'streaming_stop':
        if (state !== undefined) pb.clientState = state;
        call.stopStream();
        break;
      case 'send_dtmf': {
        const digits = str(body, 'digits');
        if (!digits || !DTMF_DIGITS.test(digits)) throw invalid('/digits', 'digits must be DTMF digits: 0-9, A-D, *, # and pauses w, W.');
        const toneMs = integer(body, 'duration_millis', 100, 500, 250);
        if (!call.answered) throw wrongState('DTMF can be sent on an answered call only.');
        if (state !== undefined) pb.clientState = state;
        call.playKeys(digits, toneMs);
        break;
      }
    }
    if (commandId) pb.commandIds.add(commandId);
  }

  async function jsonBody(req: http.IncomingMessage): Promise<Body> {
    const text = await readBody(req);
    if (!text.trim()) return {};
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new ApiError(400, { code: '10002', title: 'Invalid JSON', detail: 'The request body is not valid JSON.' });
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new ApiError(400, { code: '10002', title: 'Invalid JSON', detail: 'The request body must be a JSON object.' });
    }
    return body as Body;
  }

  async function route(req: http.IncomingMessage, res: http.ServerResponse, path: string, query: URLSearchParams): Promise<void> {
    const verb = req.method ?? 'GET';
    if (path === '/calls' && verb === 'POST') {
      const { status, data } = dial(await jsonBody(req));
      return sendJson(res, status, { data });
    }
    const callPath = /^\/calls\/([^/]+)(?:\/actions\/([^/]+))?$/.exec(path);
    if (callPath) {
      const pb = calls.get(decodeURIComponent(callPath[1]));
      if (!pb) throw notFound('Call control id not found.');
      if (!callPath[2] && verb === 'GET') return sendJson(res, 200, { data: callData(pb) });
      if (callPath[2] && verb === 'POST') {
        if (!ACTIONS.has(callPath[2])) throw notFound(`Unknown action ${callPath[2]}.`);
        action(pb, callPath[2], await jsonBody(req));
        return sendJson(res, 200, { data: { result: 'ok' } });
      }
    }
    if (path === '/phone_numbers' && verb === 'GET') {
      const wanted = query.get('filter[phone_number]') ?? query.get('filter[phone_number][eq]');
      const list = wanted === null ? [...numbers.keys()] : numberExists(wanted) ? [wanted] : [];
      for (const n of list) numbersById.set(numericId(n), n);
      return sendJson(res, 200, {
        data: list.map(numberJson),
        meta: { total_pages: 1, total_results: list.length, page_number: 1, page_size: 20 },
      });
    }
    const numberPath = /^\/phone_numbers\/([^/]+)$/.exec(path);
    if (numberPath) {
      const phoneNumber = numbersById.get(numberPath[1]);
      if (!phoneNumber) throw notFound('Phone number not found.');
      if (verb === 'GET') return sendJson(res, 200, { data: numberJson(phoneNumber) });
      if (verb === 'PATCH') {
        const body = await jsonBody(req);
        if ('connection_id' in body) {
          const id = body.connection_id;
          if (id !== null && (typeof id !== 'string' || !CONNECTION_ID.test(id)))
            throw invalid('/connection_id', 'connection_id must be 1-128 letters, digits, _ or -, or null.');
          numbers.set(phoneNumber, { connectionId: id as string | null, updatedAt: new Date().toISOString() });
          ctx.log.debug({ phoneNumber, connectionId: id }, 'sandbox provider_b number configured');
        }
        return sendJson(res, 200, { data: numberJson(phoneNumber) });
      }
    }
    const appPath = /^\/call_control_applications\/([^/]+)$/.exec(path);
    if (appPath) {
      const id = decodeURIComponent(appPath[1]);
      if (!CONNECTION_ID.test(id)) throw notFound('Call control application not found.');
      if (verb === 'GET') return sendJson(res, 200, { data: applicationJson(id) });
      if (verb === 'PATCH') {
        const body = await jsonBody(req);
        if ('webhook_event_url' in body) {
          const hook = body.webhook_event_url === null || body.webhook_event_url === '' ? null : url(body, 'webhook_event_url', ['http:', 'https:'])!;
          const now = new Date().toISOString();
          applications.set(id, { webhookEventUrl: hook, createdAt: applications.get(id)?.createdAt ?? now, updatedAt: now });
        }
        return sendJson(res, 200, { data: applicationJson(id) });
      }
    }
    throw notFound(`No route ${verb} ${path}.`);
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, path: string, query: URLSearchParams): Promise<void> {
    const auth = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '');
    if (!auth || !API_KEY.test(auth[1])) {
      return sendJson(res, 401, {
        errors: [{ code: '10009', title: 'Authentication failed', detail: 'The API key is missing or malformed (Authorization: Bearer KEY...).' }],
      });
    }
    try {
      await route(req, res, path, query);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      sendJson(res, err.status, { errors: [err.item] });
    }
  }

  async function ring(input: RingInput): Promise<{ callSid: string }> {
    const connectionId = numbers.get(input.to)?.connectionId;
    if (!connectionId) throw new Error(`provider_b: ${input.to} is attached to no connection (PATCH /phone_numbers/{id})`);
    if (!connectionWebhook(connectionId))
      throw new Error(`provider_b: connection ${connectionId} has no webhook_event_url (PATCH /call_control_applications/{id})`);
    if (!E164.test(input.from)) throw new Error(`provider_b: caller ${input.from} is not E.164`);
    const callSid = newCallControlId();
    const record = newRecord({
      provider: 'provider_b',
      callSid,
      direction: 'inbound',
      from: input.from,
      to: input.to,
      outcome: 'human',
      request: { from: input.from, to: input.to },
    });
    const call = new SimCall(record, ctx, inboundPlan(input.script, DEFAULT_TIME_LIMIT_S * 1000, input.from));
    const pb = new ProviderBCall(call, ctx, signingKey, { connectionId, webhookUrl: null, clientState: null, amd: null, stream: null }, connectionWebhook);
    remember(pb);
    void call.ringInbound(INBOUND_GIVE_UP_MS);
    await pb.initiated();
    return { callSid };
  }

  return {
    handle,
    ring,
    shutdown: () => {
      calls.clear();
      dialCommands.clear();
    },
  };
}
