/**
 * The sandbox carriers over real sockets, with this test playing the service: a local HTTP server
 * answers the voice webhook with TwiML, receives (and checks the signature of) every callback and
 * webhook, and a `ws` server takes the media streams, sends agent audio with marks, and decodes what
 * the callee said. Both providers: the default person, voicemail, busy, no answer, refused numbers,
 * credentials, REST hang-up, transfer, clear, callbacks off, inbound, command_id, reordered media, and
 * the phone menu (0005) hearing keys as tones in the agent audio or by provider_b's send_dtmf.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { createCarriers, type CallbackRequest, type CarrierAccounts, type Provider } from '../../src/carriers/index.js';
import { startSandboxCarriers, type CalleeScript, type SandboxCallRecord, type SandboxCarriers } from '../../src/sandbox/carriers/server.js';
import { mulawToPcm16, pcm16ToMulaw, rms } from '../../src/audio/pcm16.js';
import { decodeSpokenText } from '../../src/sandbox/spoken-text.js';
import { dtmfTonesUlaw } from '../../src/audio/dtmf.js';
import { MENU_PROMPT } from '../../src/sandbox/carriers/callee.js';

const ACCOUNT = 'AC0123456789abcdef0123456789abcdef';
const TOKEN = '0123456789abcdef0123456789abcdef';
const API_KEY = 'KEYsandbox_test_key_0123';
const CONNECTION = 'conn_test_1';
const AGENT_NUMBER = '+14155550100';
const PERSON_TEXTS = ['Hello, this is Sam.', 'Can you tell me about my appointment?', 'Thanks, goodbye.'];

type AgentMode = 'converse' | 'quiet' | 'long' | 'close';

// --- the service side -------------------------------------------------------------------------

/**
 * The service's own check of a callback's signature, through the carriers' front door: the sandbox
 * signs with code of its own (src/sandbox/carriers/signing.ts), so the two sides agreeing here is
 * what says both follow the carriers' documentation.
 */
function signedByAccount(provider: Provider, base: string, req: CallbackRequest, accounts: CarrierAccounts): boolean {
  const carriers = createCarriers({ provider_a: { apiUrl: base }, provider_b: { apiUrl: base } }, { base: () => base, media: () => base }, 5000);
  const { callbacks } = carriers.get(provider);
  return callbacks.read(callbacks.operations[0], req).verify(accounts, Math.floor(Date.now() / 1000)) === 'ok';
}

/** An agent's accounts as the plug-ins read them (RuntimeAgent's `carrierAccounts`): one account, its config in plaintext. */
const held = (provider: Provider, config: Record<string, string>): CarrierAccounts => ({
  carrierAccounts: { [provider]: { config, phoneNumber: null, inboundEnabled: false, configured: false } },
});

interface Received {
  provider: 'provider_a' | 'provider_b';
  path: string;
  query: URLSearchParams;
  /** provider_a: form params; provider_b: the parsed JSON. */
  params: Record<string, string>;
  event: { event_type: string; payload: Record<string, unknown>; id: string } | null;
  signatureOk: boolean;
}

/** One media stream as the service sees it. */
class Conn {
  frames: Array<Record<string, unknown>> = [];
  chunks: Array<{ chunk: number; timestamp: number; seq: number; payload: Buffer }> = [];
  marks: string[] = [];
  sentMarks: string[] = [];
  heard: string[] = [];
  stopped = false;
  closed: Promise<void>;
  callSid = '';
  mode: AgentMode = 'converse';
  private utterance: Buffer[] = [];
  private quietFrames = 0;
  private replies = 0;
  private listeners: Array<() => void> = [];

  constructor(
    readonly ws: WebSocket,
    readonly provider: 'provider_a' | 'provider_b',
  ) {
    this.closed = new Promise((resolve) => ws.on('close', () => resolve()));
    ws.on('message', (data) => this.onFrame(JSON.parse(data.toString()) as Record<string, unknown>));
  }

  get start(): Record<string, any> {
    return this.frames.find((f) => f.event === 'start') as Record<string, any>;
  }

  private get streamSid(): string {
    return this.start.streamSid as string;
  }

  /** Agent audio: `ms` of a loud tone in 20 ms frames, then a mark. */
  sendAudio(ms: number, mark?: string): void {
    for (let i = 0; i < ms / 20; i++) this.send({ event: 'media', media: { payload: TONE_FRAME } });
    if (mark) {
      this.sentMarks.push(mark);
      this.send({ event: 'mark', mark: { name: mark } });
    }
  }

  /** Keys as DTMF tones in the agent audio, 20 ms frames. */
  sendTones(keys: string): void {
    const tones = dtmfTonesUlaw(keys);
    for (let at = 0; at < tones.length; at += 160) this.send({ event: 'media', media: { payload: tones.subarray(at, at + 160).toString('base64') } });
  }

  clear(): void {
    this.send({ event: 'clear' });
  }

  waitFor(pred: () => boolean, timeoutMs = 10_000): Promise<void> {
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('media stream condition not met in time')), timeoutMs);
      const check = () => {
        if (!pred()) return;
        clearTimeout(timer);
        this.listeners = this.listeners.filter((l) => l !== check);
        resolve();
      };
      this.listeners.push(check);
    });
  }

  private send(frame: Record<string, unknown>): void {
    if (this.ws.readyState !== this.ws.OPEN) return;
    this.ws.send(JSON.stringify(this.provider === 'provider_a' ? { ...frame, streamSid: this.streamSid } : frame));
  }

  private onFrame(f: Record<string, any>): void {
    this.frames.push(f);
    if (f.event === 'start') {
      this.callSid = this.provider === 'provider_a' ? f.start.callSid : f.start.call_control_id;
      const state = f.start.client_state ? JSON.parse(Buffer.from(f.start.client_state, 'base64').toString()) : {};
      this.mode = (f.start.customParameters?.agent ?? state.agent ?? 'converse') as AgentMode;
      if (this.mode === 'converse') this.sendAudio(600, 'greeting');
      if (this.mode === 'long') for (let i = 1; i <= 6; i++) this.sendAudio(500, `long-${i}`);
    } else if (f.event === 'media') {
      const payload = Buffer.from(f.media.payload, 'base64');
      this.chunks.push({ chunk: Number(f.media.chunk), timestamp: Number(f.media.timestamp), seq: Number(f.sequenceNumber ?? f.sequence_number), payload });
      this.listen(payload);
      if (this.mode === 'close' && this.chunks.length === 10) this.ws.close(1000, 'done');
    } else if (f.event === 'mark') {
      this.marks.push(f.mark.name);
    } else if (f.event === 'stop') {
      this.stopped = true;
    }
    for (const l of [...this.listeners]) l();
  }

  /** A minimal voice-activity detector: an utterance ends after 300 ms of quiet; the agent answers it. */
  private listen(payload: Buffer): void {
    const loud = rms(mulawToPcm16(payload)) > 1000;
    if (loud) {
      this.quietFrames = 0;
      this.utterance.push(payload);
      return;
    }
    if (this.utterance.length === 0) return;
    this.utterance.push(payload);
    if (++this.quietFrames < 15) return;
    const text = decodeSpokenText(mulawToPcm16(Buffer.concat([SILENCE_20MS, ...this.utterance])), 8000);
    this.utterance = [];
    this.heard.push(text ?? '[undecodable]');
    if (this.mode === 'converse') this.sendAudio(600, `reply-${++this.replies}`);
  }

  /** Every callee frame in chunk order, as text (the whole call's speech decodes to the texts said). */
  decodeAll(): string | null {
    const ordered = [...this.chunks].sort((a, b) => a.chunk - b.chunk);
    return decodeSpokenText(mulawToPcm16(Buffer.concat(ordered.map((c) => c.payload))), 8000);
  }
}

const SILENCE_20MS = Buffer.alloc(160, 0xff);
const TONE_FRAME = (() => {
  const pcm = Buffer.alloc(320);
  for (let i = 0; i < 160; i++) pcm.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 8000)), i * 2);
  return pcm16ToMulaw(pcm).toString('base64');
})();

interface FakeService {
  url: string;
  wsUrl: string;
  received: Received[];
  conns: Conn[];
  waitReceived(pred: (r: Received) => boolean, timeoutMs?: number): Promise<Received>;
  conn(callSid: string, timeoutMs?: number): Promise<Conn>;
  close(): Promise<void>;
}

function twimlFor(query: URLSearchParams, wsUrl: string): { status: number; body: string } {
  switch (query.get('twiml')) {
    case 'reject-busy':
      return { status: 200, body: '<Response><Reject reason="busy"/></Response>' };
    case 'broken':
      return { status: 200, body: '<Response><Connect>' };
    case 'error':
      return { status: 500, body: 'oops' };
    default: {
      const agent = query.get('agent') ?? 'converse';
      return {
        status: 200,
        body:
          '<?xml version="1.0" encoding="UTF-8"?><Response><Connect>' +
          `<Stream url="${wsUrl}/media/a"><Parameter name="call_id" value="call_test"/>` +
          `<Parameter name="stream_token" value="st_secret"/><Parameter name="agent" value="${agent}"/></Stream>` +
          '</Connect></Response>',
      };
    }
  }
}

async function startFakeService(getPublicKey: () => string): Promise<FakeService> {
  const received: Received[] = [];
  const conns: Conn[] = [];
  const waiters: Array<() => void> = [];
  const notify = () => waiters.splice(0).forEach((w) => w());
  let url = '';
  let wsUrl = '';

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const u = new URL(req.url ?? '/', url);
      if (u.pathname.startsWith('/a/')) {
        const form: Record<string, string> = {};
        for (const [k, v] of new URLSearchParams(raw)) form[k] = v;
        const request = {
          url: req.url ?? '/',
          callId: undefined,
          rawBody: raw,
          header: (name: string) => req.headers[name.toLowerCase()] as string | undefined,
        };
        const signatureOk = signedByAccount('provider_a', url, request, held('provider_a', { account_sid: ACCOUNT, auth_token: TOKEN }));
        received.push({ provider: 'provider_a', path: u.pathname, query: u.searchParams, params: form, event: null, signatureOk });
        notify();
        if (u.pathname === '/a/voice') {
          const { status, body } = twimlFor(u.searchParams, wsUrl);
          res.writeHead(status, { 'content-type': 'text/xml' });
          return void res.end(body);
        }
        res.writeHead(204);
        return void res.end();
      }
      if (u.pathname.startsWith('/b/')) {
        const request = {
          url: req.url ?? '/',
          callId: undefined,
          rawBody: raw,
          header: (name: string) => req.headers[name.toLowerCase()] as string | undefined,
        };
        const signatureOk = signedByAccount(
          'provider_b',
          url,
          request,
          held('provider_b', { api_key: API_KEY, connection_id: CONNECTION, public_key: getPublicKey() }),
        );
        const body = JSON.parse(raw) as { data: Received['event'] };
        received.push({ provider: 'provider_b', path: u.pathname, query: u.searchParams, params: {}, event: body.data, signatureOk });
        notify();
        res.writeHead(200);
        return void res.end();
      }
      res.writeHead(404);
      res.end();
    });
  });
  const wss = new WebSocketServer({ server });
  wss.on('connection', (ws, req) => {
    const conn = new Conn(ws, req.url?.startsWith('/media/a') ? 'provider_a' : 'provider_b');
    conns.push(conn);
    ws.on('message', notify);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  url = `http://127.0.0.1:${port}`;
  wsUrl = `ws://127.0.0.1:${port}`;

  function waitUntil<T>(find: () => T | undefined, timeoutMs: number, what: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs);
      const check = () => {
        const hit = find();
        if (hit !== undefined) {
          clearTimeout(timer);
          resolve(hit);
        } else waiters.push(check);
      };
      check();
    });
  }

  return {
    url,
    wsUrl,
    received,
    conns,
    waitReceived: (pred, timeoutMs = 10_000) => waitUntil(() => received.find(pred), timeoutMs, 'a carrier request'),
    conn: (callSid, timeoutMs = 10_000) => waitUntil(() => conns.find((c) => c.callSid === callSid), timeoutMs, `the media stream of ${callSid}`),
    close: async () => {
      for (const c of wss.clients) c.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// --- helpers --------------------------------------------------------------------------------------

let sandbox: SandboxCarriers;
let svc: FakeService;

const basic = (user = ACCOUNT, token = TOKEN) => `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;

async function providerA(path: string, form: Record<string, string | string[]>, init: { method?: string; auth?: string } = {}) {
  const body = new URLSearchParams();
  for (const [k, v] of Object.entries(form)) for (const one of Array.isArray(v) ? v : [v]) body.append(k, one);
  const method = init.method ?? 'POST';
  const res = await fetch(`${sandbox.providerAUrl}/2010-04-01/Accounts/${ACCOUNT}${path}`, {
    method,
    headers: { authorization: init.auth ?? basic(), ...(method === 'POST' ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
    body: method === 'POST' ? body : undefined,
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

async function providerB(path: string, body?: unknown, init: { method?: string; auth?: string } = {}) {
  const res = await fetch(`${sandbox.providerBUrl}${path}`, {
    method: init.method ?? (body === undefined ? 'GET' : 'POST'),
    headers: { authorization: init.auth ?? `Bearer ${API_KEY}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

function dialA(to: string, extra: Record<string, string | string[]> = {}, agent: AgentMode = 'converse') {
  return providerA('/Calls.json', {
    To: to,
    From: AGENT_NUMBER,
    Url: `${svc.url}/a/voice?agent=${agent}`,
    StatusCallback: `${svc.url}/a/status`,
    StatusCallbackEvent: ['initiated', 'ringing', 'answered', 'completed'],
    ...extra,
  });
}

const clientState = (agent: AgentMode) => Buffer.from(JSON.stringify({ call_id: 'call_test', agent })).toString('base64');

function dialB(to: string, extra: Record<string, unknown> = {}, agent: AgentMode = 'converse') {
  return providerB('/calls', {
    connection_id: CONNECTION,
    to,
    from: AGENT_NUMBER,
    webhook_url: `${svc.url}/b/webhook`,
    client_state: clientState(agent),
    stream_url: `${svc.wsUrl}/media/b`,
    stream_track: 'inbound_track',
    stream_bidirectional_mode: 'rtp',
    stream_bidirectional_codec: 'PCMU',
    ...extra,
  });
}

const completed = (callSid: string, timeoutMs = 20_000) => sandbox.waitForCall((c) => c.callSid === callSid && c.state === 'completed', timeoutMs);
const statusCallbacks = (callSid: string) => svc.received.filter((r) => r.path === '/a/status' && r.params.CallSid === callSid);
const events = (callSid: string) => svc.received.filter((r) => r.event?.payload.call_control_id === callSid).map((r) => r.event!);
const eventTypes = (callSid: string) => events(callSid).map((e) => e.event_type);

/** The last callback of a call has been answered (callbacks go out after the state changes). */
async function callbacksDone(record: SandboxCallRecord, event: string): Promise<void> {
  await sandbox.waitForCall((c) => c === record && c.callbacks.some((cb) => cb.event === event));
}

function assertSignedAll(): void {
  const bad = svc.received.filter((r) => !r.signatureOk);
  assert.deepEqual(
    bad.map((r) => `${r.provider} ${r.path}`),
    [],
    'every carrier request is signed',
  );
}

function assertContinuousMedia(conn: Conn): void {
  const chunks = conn.chunks.map((c) => c.chunk).sort((a, b) => a - b);
  assert.ok(chunks.length > 20, 'media frames flowed');
  chunks.forEach((c, i) => assert.equal(c, i + 1, 'every chunk once, none missing'));
  for (const c of conn.chunks) {
    assert.equal(c.payload.length, 160);
    assert.equal(c.timestamp, (c.chunk - 1) * 20);
  }
}

const PERSON_SAID = PERSON_TEXTS.join(' ');

// --- tests ----------------------------------------------------------------------------------------

describe('sandbox carriers', () => {
  before(async () => {
    sandbox = await startSandboxCarriers({ speed: 6, ringMs: 300, noAnswerMs: 1500 });
    svc = await startFakeService(() => sandbox.providerBPublicKey);
  });

  after(async () => {
    await sandbox.close();
    await svc.close();
  });

  describe('provider_a', () => {
    it('a person answers and holds the default conversation', async () => {
      const res = await dialA('+15551230010', { MachineDetection: 'Enable', AsyncAmd: 'true', AsyncAmdStatusCallback: `${svc.url}/a/amd` });
      assert.equal(res.status, 201);
      assert.match(res.body.sid, /^CA[0-9a-f]{32}$/);
      assert.equal(res.body.status, 'queued');
      assert.equal(res.body.account_sid, ACCOUNT);
      assert.equal(res.body.direction, 'outbound-api');
      assert.equal(res.body.api_version, '2010-04-01');
      assert.equal(res.body.to, '+15551230010');
      assert.equal(res.body.from, AGENT_NUMBER);
      assert.equal(res.body.uri, `/2010-04-01/Accounts/${ACCOUNT}/Calls/${res.body.sid}.json`);
      const sid = res.body.sid as string;

      const record = await completed(sid);
      await callbacksDone(record, 'completed');
      const conn = await svc.conn(sid);
      await conn.closed;

      assert.equal(record.outcome, 'human');
      assert.equal(record.hangupBy, 'callee');
      assert.equal(record.endStatus, 'completed');
      assert.deepEqual(record.spoken, PERSON_TEXTS);
      assert.equal(record.answeredBy, 'human');
      assert.ok(record.agentAudioMs > 0);
      assert.deepEqual(record.marksReceived, conn.sentMarks);
      assert.deepEqual(record.marksEchoed, conn.sentMarks);
      assert.deepEqual(conn.marks, conn.sentMarks, 'every mark echoed, in order');
      assert.deepEqual(record.protocolErrors, []);
      assert.equal(record.request.To, '+15551230010');
      assert.equal(record.request.AccountSid, ACCOUNT);

      // The stream: connected, start, continuous media, stop.
      assert.deepEqual(conn.frames[0], { event: 'connected', protocol: 'Call', version: '1.0.0' });
      const start = conn.start;
      assert.equal(start.sequenceNumber, '1');
      assert.match(start.streamSid, /^MZ[0-9a-f]{32}$/);
      assert.deepEqual(start.start, {
        accountSid: ACCOUNT,
        streamSid: start.streamSid,
        callSid: sid,
        tracks: ['inbound'],
        mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
        customParameters: { call_id: 'call_test', stream_token: 'st_secret', agent: 'converse' },
      });
      assert.deepEqual(record.streamStartParams, start.start);
      assert.ok(conn.stopped, 'stop frame before the socket closed');
      assertContinuousMedia(conn);
      const seqs = conn.frames.filter((f) => f.sequenceNumber !== undefined).map((f) => Number(f.sequenceNumber));
      seqs.forEach((s, i) => assert.equal(s, i + 1, 'sequence numbers count every frame'));
      assert.deepEqual(conn.heard, PERSON_TEXTS, 'the agent heard each sentence as its own utterance');
      assert.equal(conn.decodeAll(), PERSON_SAID);

      // Callbacks.
      const voice = svc.received.find((r) => r.path === '/a/voice' && r.params.CallSid === sid)!;
      assert.equal(voice.params.CallStatus, 'in-progress');
      assert.equal(voice.params.Direction, 'outbound-api');
      assert.equal(voice.params.AccountSid, ACCOUNT);
      const statuses = statusCallbacks(sid);
      assert.deepEqual(
        statuses.map((s) => s.params.CallStatus),
        ['initiated', 'ringing', 'in-progress', 'completed'],
      );
      assert.deepEqual(
        statuses.map((s) => s.params.SequenceNumber),
        ['0', '1', '2', '3'],
      );
      const last = statuses[3].params;
      assert.match(last.CallDuration, /^[0-9]+$/);
      assert.equal(last.CallbackSource, 'call-progress-events');
      assert.equal(last.ApiVersion, '2010-04-01');
      assert.equal(last.Direction, 'outbound-api');
      assert.match(last.Timestamp, /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} \+0000$/);
      const amd = svc.received.find((r) => r.path === '/a/amd' && r.params.CallSid === sid)!;
      assert.equal(amd.params.AnsweredBy, 'human');
      assert.match(amd.params.MachineDetectionDuration, /^[0-9]+$/);
      assertSignedAll();

      const fetched = await providerA(`/Calls/${sid}.json`, {}, { method: 'GET' });
      assert.equal(fetched.body.status, 'completed');
      assert.equal(fetched.body.answered_by, 'human');
    });

    it('0001: a machine answers; DetectMessageEnd reports the beep and the message after it is recorded', async () => {
      const res = await dialA('+15551230001', { MachineDetection: 'DetectMessageEnd', AsyncAmd: 'true', AsyncAmdStatusCallback: `${svc.url}/a/amd` }, 'quiet');
      const sid = res.body.sid as string;
      const amd = await svc.waitReceived((r) => r.path === '/a/amd' && r.params.CallSid === sid, 15_000);
      assert.equal(amd.params.AnsweredBy, 'machine_end_beep');
      const conn = await svc.conn(sid);
      conn.sendAudio(1000, 'voicemail-done');
      const record = await completed(sid);
      assert.equal(record.outcome, 'voicemail');
      assert.equal(record.hangupBy, 'callee');
      assert.ok(record.agentAudioAfterBeepMs >= 900, `recorded ${record.agentAudioAfterBeepMs} ms`);
      assert.deepEqual(conn.marks, ['voicemail-done']);
      assertSignedAll();
    });

    it('0001 with Enable: machine_start soon after the answer', async () => {
      const res = await dialA('+15551230001', { MachineDetection: 'Enable', AsyncAmd: 'true', AsyncAmdStatusCallback: `${svc.url}/a/amd` }, 'quiet');
      const sid = res.body.sid as string;
      const amd = await svc.waitReceived((r) => r.path === '/a/amd' && r.params.CallSid === sid);
      assert.equal(amd.params.AnsweredBy, 'machine_start');
      await providerA(`/Calls/${sid}.json`, { Status: 'completed' });
      const record = await completed(sid);
      assert.equal(record.hangupBy, 'service');
    });

    it('0002 busy and 0003 no answer end with their status', async () => {
      const busy = await dialA('+15551230002');
      const noAnswer = await dialA('+15551230003', { Timeout: '1' });
      const busyRecord = await completed(busy.body.sid);
      const noAnswerRecord = await completed(noAnswer.body.sid);
      await callbacksDone(busyRecord, 'busy');
      await callbacksDone(noAnswerRecord, 'no-answer');
      assert.equal(busyRecord.outcome, 'busy');
      assert.equal(noAnswerRecord.outcome, 'no_answer');
      assert.equal(busyRecord.answeredAt, null);
      assert.deepEqual(
        statusCallbacks(busy.body.sid).map((s) => s.params.CallStatus),
        ['initiated', 'ringing', 'busy'],
      );
      const last = statusCallbacks(noAnswer.body.sid).at(-1)!.params;
      assert.equal(last.CallStatus, 'no-answer');
      assert.equal(last.CallDuration, '0');
      assert.equal(svc.conns.filter((c) => c.callSid === busy.body.sid || c.callSid === noAnswer.body.sid).length, 0);
    });

    it('0004 and malformed numbers are refused at the dial request', async () => {
      const refused = await dialA('+15551230004');
      assert.equal(refused.status, 400);
      assert.deepEqual(refused.body, {
        code: 21211,
        message: "Invalid 'To' Phone Number: +15551230004",
        more_info: 'https://www.twilio.com/docs/errors/21211',
        status: 400,
      });
      assert.equal((await dialA('5551234')).body.code, 21211);
      assert.equal((await dialA('+15551230010', { From: 'agent' })).body.code, 21212);
      const attempt = await sandbox.waitForCall((c) => c.to === '+15551230004' && c.provider === 'provider_a');
      assert.equal(attempt.outcome, 'failed');
    });

    it('refuses malformed credentials with 401 code 20003', async () => {
      const unauthorized = { code: 20003, message: 'Authenticate', more_info: 'https://www.twilio.com/docs/errors/20003', status: 401 };
      for (const auth of [basic(ACCOUNT, 'not-a-token'), basic('ACshort', TOKEN), basic('AC' + 'f'.repeat(32), TOKEN), 'Bearer x', '']) {
        const res = await providerA('/Calls.json', { To: '+15551230010', From: AGENT_NUMBER, Url: `${svc.url}/a/voice` }, { auth });
        assert.equal(res.status, 401);
        assert.deepEqual(res.body, unauthorized);
      }
    });

    it('0005: the phone menu hears keys played as tones in the agent audio and puts the person through', async () => {
      const sid = (await dialA('+15551230005')).body.sid as string;
      const conn = await svc.conn(sid);
      const record = await sandbox.waitForCall((c) => c.callSid === sid && c.spoken.includes(MENU_PROMPT));
      conn.sendTones('1#');
      await sandbox.waitForCall((c) => c === record && c.spoken.includes('Connecting you to the front desk.'));
      assert.equal(record.dtmfReceived, '1#');
      assert.deepEqual(record.protocolErrors, []);
      assert.equal((await providerA(`/Calls/${sid}.json`, { Status: 'completed' })).status, 200);
      await completed(sid);
    });

    it('hangs up through REST; a finished call answers with its final status; an unknown one is 404', async () => {
      sandbox.setScript('+15551230020', [{ waitForAgent: true }, { pause: 60_000 }]);
      const sid = (await dialA('+15551230020')).body.sid as string;
      const conn = await svc.conn(sid);
      await conn.waitFor(() => conn.marks.includes('greeting'));
      const hangup = await providerA(`/Calls/${sid}.json`, { Status: 'completed' });
      assert.equal(hangup.status, 200);
      const record = await completed(sid);
      await conn.closed;
      assert.ok(conn.stopped);
      assert.equal(record.hangupBy, 'service');
      assert.equal(record.endStatus, 'completed');
      const again = await providerA(`/Calls/${sid}.json`, { Status: 'completed' });
      assert.equal(again.status, 200);
      assert.equal(again.body.status, 'completed');
      const unknown = await providerA(`/Calls/CA${'0'.repeat(32)}.json`, { Status: 'completed' });
      assert.equal(unknown.status, 404);
      assert.equal(unknown.body.code, 20404);
      sandbox.setScript('+15551230020', null);
    });

    it('cancels a ringing call', async () => {
      const sid = (await dialA('+15551230021')).body.sid as string;
      await sandbox.waitForCall((c) => c.callSid === sid && c.state === 'ringing');
      await providerA(`/Calls/${sid}.json`, { Status: 'canceled' });
      const record = await completed(sid);
      await callbacksDone(record, 'canceled');
      assert.equal(record.outcome, 'canceled');
      assert.equal(record.answeredAt, null);
    });

    it('the adapter hangs up a call it believed unanswered though the person answered meanwhile', async () => {
      // The service's view lags the carrier's: its hang-up cancels, the carrier (like Twilio) ignores a
      // cancel of an answered call and answers `in-progress`, so the adapter must hang it up as answered.
      sandbox.setScript('+15551230027', [{ waitForAgent: true }, { pause: 60_000 }]);
      const sid = (await dialA('+15551230027')).body.sid as string;
      const conn = await svc.conn(sid);
      await conn.waitFor(() => conn.marks.includes('greeting'));
      const urls = { base: () => svc.url, media: () => svc.url.replace(/^http/, 'ws') };
      const adapter = createCarriers({ provider_a: { apiUrl: sandbox.providerAUrl }, provider_b: { apiUrl: sandbox.providerBUrl } }, urls, 5000).get(
        'provider_a',
      ).rest;
      await adapter.hangup({ provider: 'provider_a', accountSid: ACCOUNT, authToken: TOKEN }, sid, { answered: false });
      const record = await completed(sid);
      await conn.closed;
      assert.equal(record.hangupBy, 'service');
      assert.equal(record.endStatus, 'completed');
      assert.notEqual(record.answeredAt, null);
      sandbox.setScript('+15551230027', null);
    });

    it('transfers with <Dial>: the stream stops and the call completes', async () => {
      sandbox.setScript('+15551230022', [{ waitForAgent: true }, { pause: 60_000 }]);
      const sid = (await dialA('+15551230022')).body.sid as string;
      const conn = await svc.conn(sid);
      await conn.waitFor(() => conn.marks.includes('greeting'));
      const res = await providerA(`/Calls/${sid}.json`, { Twiml: '<Response><Dial>+15557654321</Dial></Response>' });
      assert.equal(res.status, 200);
      await conn.closed;
      assert.ok(conn.stopped);
      const record = await completed(sid);
      assert.equal(record.transferredTo, '+15557654321');
      assert.equal(record.streamClosedBy, 'carrier');
      sandbox.setScript('+15551230022', null);
    });

    it('the service closing the stream ends the TwiML and the call', async () => {
      const sid = (await dialA('+15551230023', {}, 'close')).body.sid as string;
      const record = await completed(sid);
      assert.equal(record.hangupBy, 'stream_closed');
      assert.equal(record.streamClosedBy, 'service');
      assert.equal(record.streamCloseCode, 1000);
    });

    it('TwiML that cannot be fetched or parsed fails the call', async () => {
      for (const twiml of ['error', 'broken']) {
        const res = await providerA('/Calls.json', { To: '+15551230024', From: AGENT_NUMBER, Url: `${svc.url}/a/voice?twiml=${twiml}` });
        const record = await completed(res.body.sid);
        assert.equal(record.outcome, 'failed');
        assert.equal(record.endStatus, 'failed');
      }
    });

    it('hangs up at TimeLimit', async () => {
      sandbox.setScript('+15551230025', [{ pause: 60_000 }]);
      const record = await completed((await dialA('+15551230025', { TimeLimit: '2' }, 'quiet')).body.sid);
      assert.equal(record.hangupBy, 'carrier');
      assert.equal(record.endStatus, 'completed');
      sandbox.setScript('+15551230025', null);
    });

    it('with callbacks off, only the voice request is made and media still flows', async () => {
      sandbox.setCallbacksEnabled(false);
      try {
        const sid = (await dialA('+15551230026', { MachineDetection: 'Enable', AsyncAmd: 'true', AsyncAmdStatusCallback: `${svc.url}/a/amd` })).body
          .sid as string;
        const record = await completed(sid);
        const conn = await svc.conn(sid);
        assert.deepEqual(record.spoken, PERSON_TEXTS);
        assert.ok(conn.chunks.length > 20);
        assert.deepEqual(statusCallbacks(sid), []);
        assert.equal(svc.received.filter((r) => r.path === '/a/amd' && r.params.CallSid === sid).length, 0);
        assert.deepEqual(
          record.callbacks.map((c) => c.kind),
          ['voice'],
        );
      } finally {
        sandbox.setCallbacksEnabled(true);
      }
    });

    it('inbound: the number is configured, ring() reaches the voice URL, and the call is held', async () => {
      const number = '+15551239000';
      const list = await providerA(`/IncomingPhoneNumbers.json?PhoneNumber=${encodeURIComponent(number)}`, {}, { method: 'GET' });
      assert.equal(list.status, 200);
      const [entry] = list.body.incoming_phone_numbers as Array<Record<string, string>>;
      assert.equal(entry.phone_number, number);
      assert.match(entry.sid, /^PN[0-9a-f]{32}$/);
      const missing = await providerA(`/IncomingPhoneNumbers.json?PhoneNumber=${encodeURIComponent('+15551230004')}`, {}, { method: 'GET' });
      assert.deepEqual(missing.body.incoming_phone_numbers, []);

      await assert.rejects(sandbox.ring({ provider: 'provider_a', from: '+15559990000', to: number }), /no VoiceUrl/);
      const set = await providerA(`/IncomingPhoneNumbers/${entry.sid}.json`, { VoiceUrl: `${svc.url}/a/voice?agent=converse`, VoiceMethod: 'POST' });
      assert.equal(set.status, 200);
      assert.equal(set.body.voice_url, `${svc.url}/a/voice?agent=converse`);

      const { callSid } = await sandbox.ring({ provider: 'provider_a', from: '+15559990000', to: number });
      const voice = svc.received.find((r) => r.path === '/a/voice' && r.params.CallSid === callSid)!;
      assert.equal(voice.params.Direction, 'inbound');
      assert.equal(voice.params.CallStatus, 'ringing');
      assert.equal(voice.params.From, '+15559990000');
      assert.equal(voice.params.To, number);
      const record = await completed(callSid);
      assert.equal(record.direction, 'inbound');
      assert.deepEqual(record.spoken, PERSON_TEXTS);
      assert.equal((await svc.conn(callSid)).decodeAll(), PERSON_SAID);

      await providerA(`/IncomingPhoneNumbers/${entry.sid}.json`, { VoiceUrl: `${svc.url}/a/voice?twiml=reject-busy` });
      const rejected = await completed((await sandbox.ring({ provider: 'provider_a', from: '+15559990000', to: number })).callSid);
      assert.equal(rejected.outcome, 'rejected');
      assert.equal(rejected.endStatus, 'busy');
      assert.equal(rejected.answeredAt, null);
      assertSignedAll();
    });
  });

  describe('provider_b', () => {
    it('a person answers and holds the default conversation', async () => {
      const res = await dialB('+15552230010', { answering_machine_detection: 'detect' });
      assert.equal(res.status, 200);
      const data = res.body.data as Record<string, unknown>;
      assert.match(String(data.call_control_id), /^v3:/);
      assert.equal(data.is_alive, true);
      assert.equal(data.record_type, 'call');
      assert.ok(data.call_leg_id && data.call_session_id);
      const sid = data.call_control_id as string;

      const record = await completed(sid);
      await callbacksDone(record, 'streaming.stopped');
      const conn = await svc.conn(sid);
      await conn.closed;
      assert.equal(record.outcome, 'human');
      assert.equal(record.hangupBy, 'callee');
      assert.equal(record.endStatus, 'normal_clearing');
      assert.deepEqual(record.spoken, PERSON_TEXTS);
      assert.deepEqual(conn.marks, conn.sentMarks);
      assert.deepEqual(record.protocolErrors, []);
      assert.equal(record.request.connection_id, CONNECTION);

      assert.deepEqual(conn.frames[0], { event: 'connected', version: '1.0.0' });
      const start = conn.start;
      assert.equal(start.start.call_control_id, sid);
      assert.equal(start.start.client_state, clientState('converse'));
      assert.deepEqual(start.start.media_format, { encoding: 'PCMU', sample_rate: 8000, channels: 1 });
      assert.equal(start.start.from, AGENT_NUMBER);
      assert.equal(start.start.to, '+15552230010');
      assert.ok(conn.stopped);
      assertContinuousMedia(conn);
      assert.deepEqual(conn.heard, PERSON_TEXTS);

      const types = eventTypes(sid);
      assert.deepEqual(types.slice(0, 2), ['call.initiated', 'call.answered']);
      assert.deepEqual([...types.slice(2, 4)].sort(), ['call.machine.detection.ended', 'streaming.started']);
      assert.deepEqual(types.slice(4), ['call.hangup', 'streaming.stopped']);
      const evs = events(sid);
      for (const e of evs) {
        assert.equal(e.payload.client_state, clientState('converse'));
        assert.equal(e.payload.connection_id, CONNECTION);
        assert.equal(e.payload.direction, 'outgoing');
      }
      assert.equal(evs.find((e) => e.event_type === 'call.machine.detection.ended')!.payload.result, 'human');
      assert.equal(evs[4].payload.hangup_cause, 'normal_clearing');
      assert.equal(evs[4].payload.hangup_source, 'callee');
      assertSignedAll();
    });

    it('0001: detection says machine, the greeting ends with a beep, the message after it is recorded', async () => {
      const sid = (await dialB('+15552230001', { answering_machine_detection: 'detect_beep' }, 'quiet')).body.data.call_control_id as string;
      const greeting = await svc.waitReceived((r) => r.event?.event_type === 'call.machine.greeting.ended' && r.event.payload.call_control_id === sid, 15_000);
      assert.equal(greeting.event!.payload.result, 'beep_detected');
      const detection = events(sid).find((e) => e.event_type === 'call.machine.detection.ended')!;
      assert.equal(detection.payload.result, 'machine');
      const conn = await svc.conn(sid);
      conn.sendAudio(1000, 'voicemail-done');
      const record = await completed(sid);
      await callbacksDone(record, 'call.hangup');
      assert.equal(record.outcome, 'voicemail');
      assert.ok(record.agentAudioAfterBeepMs >= 900, `recorded ${record.agentAudioAfterBeepMs} ms`);
      assert.equal(events(sid).find((e) => e.event_type === 'call.hangup')!.payload.hangup_source, 'callee');
    });

    it('0002 busy and 0003 no answer end with their hangup cause', async () => {
      const busy = (await dialB('+15552230002')).body.data.call_control_id as string;
      // No timeout_secs: the default 30 s is capped by the sandbox's noAnswerMs.
      const noAnswer = (await dialB('+15552230003')).body.data.call_control_id as string;
      await callbacksDone(await completed(busy), 'call.hangup');
      await callbacksDone(await completed(noAnswer), 'call.hangup');
      const cause = (sid: string) => events(sid).find((e) => e.event_type === 'call.hangup')!.payload.hangup_cause;
      assert.equal(cause(busy), 'user_busy');
      assert.equal(cause(noAnswer), 'timeout');
      assert.deepEqual(eventTypes(busy), ['call.initiated', 'call.hangup']);
      assert.equal(sandbox.call(noAnswer)!.outcome, 'no_answer');
    });

    it('0004 and malformed numbers are refused with 422', async () => {
      const refused = await dialB('+15552230004');
      assert.equal(refused.status, 422);
      assert.equal(refused.body.errors.length, 1);
      assert.deepEqual(refused.body.errors[0], {
        code: '10016',
        title: 'Invalid phone number',
        detail: '"+15552230004" is not a valid phone number.',
        source: { pointer: '/to' },
      });
      assert.equal((await dialB('555')).body.errors[0].source.pointer, '/to');
      assert.equal((await dialB('+15552230010', { from: 'x' })).body.errors[0].source.pointer, '/from');
      assert.equal((await dialB('+15552230010', { connection_id: 'bad id!' })).status, 422);
    });

    it('refuses a missing or malformed API key with 401 code 10009', async () => {
      for (const auth of ['', 'Bearer nope', `Basic ${API_KEY}`, 'Bearer KEYshort']) {
        const res = await providerB('/calls', { connection_id: CONNECTION, to: '+15552230010', from: AGENT_NUMBER }, { auth });
        assert.equal(res.status, 401);
        assert.equal(res.body.errors[0].code, '10009');
        assert.equal(res.body.errors[0].title, 'Authentication failed');
      }
    });

    it('hangs up through REST; command_id repeats are no-ops; an ended call answers 90018', async () => {
      sandbox.setScript('+15552230020', [{ waitForAgent: true }, { pause: 60_000 }]);
      const first = await dialB('+15552230020', { command_id: 'dial-1' });
      const repeat = await dialB('+15552230020', { command_id: 'dial-1' });
      const sid = first.body.data.call_control_id as string;
      assert.equal(repeat.body.data.call_control_id, sid);
      assert.equal(sandbox.calls().filter((c) => c.to === '+15552230020').length, 1);

      const conn = await svc.conn(sid);
      await conn.waitFor(() => conn.marks.includes('greeting'));
      const hangup = await providerB(`/calls/${encodeURIComponent(sid)}/actions/hangup`, { command_id: 'hangup-1' });
      assert.deepEqual(hangup, { status: 200, body: { data: { result: 'ok' } } });
      const record = await completed(sid);
      await callbacksDone(record, 'streaming.stopped');
      assert.equal(record.hangupBy, 'service');
      const again = await providerB(`/calls/${encodeURIComponent(sid)}/actions/hangup`, { command_id: 'hangup-1' });
      assert.equal(again.status, 200, 'the same command_id is a no-op');
      const ended = await providerB(`/calls/${encodeURIComponent(sid)}/actions/hangup`, { command_id: 'hangup-2' });
      assert.equal(ended.status, 422);
      assert.equal(ended.body.errors[0].code, '90018');
      assert.equal(ended.body.errors[0].title, 'Call has already ended');
      const unknown = await providerB('/calls/v3:nope/actions/hangup', {});
      assert.equal(unknown.status, 404);
      const hangupEvent = events(sid).find((e) => e.event_type === 'call.hangup')!;
      assert.equal(hangupEvent.payload.hangup_cause, 'normal_clearing');
      assert.equal(hangupEvent.payload.hangup_source, 'caller');
      assert.equal(eventTypes(sid).filter((t) => t === 'call.hangup').length, 1);
      sandbox.setScript('+15552230020', null);
    });

    it('send_dtmf: keys reach the phone menu (0005); bad digits and an unanswered call are refused', async () => {
      const sid = (await dialB('+15552230005')).body.data.call_control_id as string;
      const record = await sandbox.waitForCall((c) => c.callSid === sid && c.spoken.includes(MENU_PROMPT));
      const action = `/calls/${encodeURIComponent(sid)}/actions/send_dtmf`;
      for (const body of [{ digits: '1x#' }, { digits: '' }, {}, { digits: '1#', duration_millis: 50 }]) {
        const bad = await providerB(action, body);
        assert.equal(bad.status, 422, JSON.stringify(body));
        assert.equal(bad.body.errors[0].code, '10015');
      }
      assert.equal(record.dtmfReceived, '', 'nothing refused was played');
      assert.deepEqual(await providerB(action, { digits: '1w#', duration_millis: 100 }), { status: 200, body: { data: { result: 'ok' } } });
      await sandbox.waitForCall((c) => c === record && c.spoken.includes('Connecting you to the front desk.'));
      assert.equal(record.dtmfReceived, '1#');
      assert.equal((await providerB(`/calls/${encodeURIComponent(sid)}/actions/hangup`, {})).status, 200);
      await completed(sid);

      const ringing = (await dialB('+15552230003')).body.data.call_control_id as string;
      const early = await providerB(`/calls/${encodeURIComponent(ringing)}/actions/send_dtmf`, { digits: '1' });
      assert.equal(early.status, 422);
      assert.equal(early.body.errors[0].code, '90034');
      await providerB(`/calls/${encodeURIComponent(ringing)}/actions/hangup`, {});
    });

    it('transfers: the stream stops and the call completes', async () => {
      sandbox.setScript('+15552230022', [{ waitForAgent: true }, { pause: 60_000 }]);
      const sid = (await dialB('+15552230022')).body.data.call_control_id as string;
      const conn = await svc.conn(sid);
      await conn.waitFor(() => conn.marks.includes('greeting'));
      assert.equal((await providerB(`/calls/${encodeURIComponent(sid)}/actions/transfer`, {})).status, 422, 'transfer needs to');
      const res = await providerB(`/calls/${encodeURIComponent(sid)}/actions/transfer`, { to: '+15557654321' });
      assert.equal(res.status, 200);
      await conn.closed;
      assert.ok(conn.stopped);
      const record = await completed(sid);
      await callbacksDone(record, 'call.hangup');
      assert.equal(record.transferredTo, '+15557654321');
      const types = eventTypes(sid);
      assert.ok(types.indexOf('streaming.stopped') < types.indexOf('call.hangup'));
      sandbox.setScript('+15552230022', null);
    });

    it('the service closing the stream: streaming.stopped, then the carrier hangs up', async () => {
      const sid = (await dialB('+15552230023', {}, 'close')).body.data.call_control_id as string;
      const record = await completed(sid);
      await callbacksDone(record, 'call.hangup');
      assert.equal(record.hangupBy, 'stream_closed');
      const types = eventTypes(sid);
      assert.ok(types.indexOf('streaming.stopped') < types.indexOf('call.hangup'));
      assert.equal(events(sid).find((e) => e.event_type === 'call.hangup')!.payload.hangup_cause, 'normal_clearing');
    });

    it('hangs up at time_limit_secs', async () => {
      sandbox.setScript('+15552230025', [{ pause: 60_000 }]);
      const sid = (await dialB('+15552230025', { time_limit_secs: 2 }, 'quiet')).body.data.call_control_id as string;
      await callbacksDone(await completed(sid), 'call.hangup');
      assert.equal(events(sid).find((e) => e.event_type === 'call.hangup')!.payload.hangup_cause, 'time_limit');
      sandbox.setScript('+15552230025', null);
    });

    it('with callbacks off, no webhook is sent and media still flows', async () => {
      sandbox.setCallbacksEnabled(false);
      try {
        const sid = (await dialB('+15552230026')).body.data.call_control_id as string;
        const record = await completed(sid);
        const conn = await svc.conn(sid);
        assert.deepEqual(record.spoken, PERSON_TEXTS);
        assert.ok(conn.chunks.length > 20);
        assert.deepEqual(events(sid), []);
        assert.deepEqual(record.callbacks, []);
      } finally {
        sandbox.setCallbacksEnabled(true);
      }
    });

    it('delivers reordered media that still carries every chunk', async () => {
      sandbox.setReorderMedia(true);
      try {
        const sid = (await dialB('+15552230027')).body.data.call_control_id as string;
        await completed(sid);
        const conn = await svc.conn(sid);
        await conn.closed;
        const arrival = conn.chunks.map((c) => c.chunk);
        assert.ok(
          arrival.some((c, i) => i > 0 && c < arrival[i - 1]),
          'some frames arrive out of order',
        );
        assertContinuousMedia(conn);
        assert.equal(conn.decodeAll(), PERSON_SAID);
      } finally {
        sandbox.setReorderMedia(false);
      }
    });

    it('agent audio on a stream that is not bidirectional is not played, and is noted', async () => {
      sandbox.setScript('+15552230028', [{ pause: 60_000 }]);
      const sid = (await dialB('+15552230028', { stream_bidirectional_mode: undefined })).body.data.call_control_id as string;
      const record = await sandbox.waitForCall((c) => c.callSid === sid && c.protocolErrors.length > 0);
      assert.match(record.protocolErrors[0], /not bidirectional/);
      assert.equal(record.agentAudioMs, 0);
      await providerB(`/calls/${encodeURIComponent(sid)}/actions/hangup`, {});
      await completed(sid);
      sandbox.setScript('+15552230028', null);
    });

    it('inbound: number and application configured, ring() sends call.initiated, the service answers or rejects', async () => {
      const number = '+15552239000';
      const list = await providerB(`/phone_numbers?filter[phone_number]=${encodeURIComponent(number)}`);
      assert.equal(list.status, 200);
      const [entry] = list.body.data as Array<Record<string, unknown>>;
      assert.equal(entry.phone_number, number);
      const eq = await providerB(`/phone_numbers?filter[phone_number][eq]=${encodeURIComponent(number)}`);
      assert.equal(eq.body.data[0].id, entry.id);
      assert.deepEqual((await providerB(`/phone_numbers?filter[phone_number]=${encodeURIComponent('+15552230004')}`)).body.data, []);

      await assert.rejects(sandbox.ring({ provider: 'provider_b', from: '+15559990000', to: number }), /no connection/);
      const attach = await providerB(`/phone_numbers/${entry.id}`, { connection_id: CONNECTION }, { method: 'PATCH' });
      assert.equal(attach.body.data.connection_id, CONNECTION);
      const app = await providerB(`/call_control_applications/${CONNECTION}`, { webhook_event_url: `${svc.url}/b/webhook` }, { method: 'PATCH' });
      assert.equal(app.body.data.webhook_event_url, `${svc.url}/b/webhook`);

      const { callSid } = await sandbox.ring({ provider: 'provider_b', from: '+15559990000', to: number });
      const initiated = events(callSid)[0];
      assert.equal(initiated.event_type, 'call.initiated');
      assert.equal(initiated.payload.direction, 'incoming');
      assert.equal(initiated.payload.state, 'parked');
      assert.equal(initiated.payload.client_state, null);
      const answer = await providerB(`/calls/${encodeURIComponent(callSid)}/actions/answer`, {
        client_state: clientState('converse'),
        stream_url: `${svc.wsUrl}/media/b`,
        stream_track: 'inbound_track',
        stream_bidirectional_mode: 'rtp',
        stream_bidirectional_codec: 'PCMU',
      });
      assert.equal(answer.status, 200);
      const record = await completed(callSid);
      await callbacksDone(record, 'streaming.stopped');
      assert.deepEqual(record.spoken, PERSON_TEXTS);
      const hangupEvent = events(callSid).find((e) => e.event_type === 'call.hangup')!;
      assert.equal(hangupEvent.payload.hangup_source, 'caller');
      assert.equal(hangupEvent.payload.client_state, clientState('converse'));

      const second = await sandbox.ring({ provider: 'provider_b', from: '+15559990001', to: number });
      const reject = await providerB(`/calls/${encodeURIComponent(second.callSid)}/actions/reject`, { cause: 'USER_BUSY' });
      assert.equal(reject.status, 200);
      const rejected = await completed(second.callSid);
      await callbacksDone(rejected, 'call.hangup');
      assert.equal(rejected.outcome, 'rejected');
      assert.equal(events(second.callSid).find((e) => e.event_type === 'call.hangup')!.payload.hangup_cause, 'user_busy');

      await providerB(`/phone_numbers/${entry.id}`, { connection_id: null }, { method: 'PATCH' });
      await assert.rejects(sandbox.ring({ provider: 'provider_b', from: '+15559990000', to: number }), /no connection/);
      assertSignedAll();
    });
  });

  describe('both providers', () => {
    for (const provider of ['provider_a', 'provider_b'] as const) {
      it(`${provider}: clear flushes playback and echoes the pending marks at once`, async () => {
        const to = provider === 'provider_a' ? '+15551230030' : '+15552230030';
        sandbox.setScript(to, [{ pause: 60_000 }]);
        const res = provider === 'provider_a' ? await dialA(to, {}, 'long') : await dialB(to, {}, 'long');
        const sid = (res.body.sid ?? res.body.data.call_control_id) as string;
        const conn = await svc.conn(sid);
        await conn.waitFor(() => conn.marks.includes('long-1'));
        assert.ok(conn.marks.length < 6, 'the audio is still playing');
        conn.clear();
        await conn.waitFor(() => conn.marks.length === 6);
        assert.deepEqual(conn.marks, ['long-1', 'long-2', 'long-3', 'long-4', 'long-5', 'long-6']);
        const record = sandbox.call(sid)!;
        assert.equal(record.clears, 1);
        assert.deepEqual(record.marksEchoed, record.marksReceived);
        await (provider === 'provider_a'
          ? providerA(`/Calls/${sid}.json`, { Status: 'completed' })
          : providerB(`/calls/${encodeURIComponent(sid)}/actions/hangup`, {}));
        await completed(sid);
        sandbox.setScript(to, null);
      });

      it(`${provider}: a scripted callee barges in and presses keys`, async () => {
        const to = provider === 'provider_a' ? '+15551230031' : '+15552230031';
        const script: CalleeScript = [{ sayWhileAgentSpeaks: 'Wait, stop.' }, { pressDigits: '12#' }, { hangup: true }];
        sandbox.setScript(to, script);
        const res = provider === 'provider_a' ? await dialA(to, {}, 'long') : await dialB(to, {}, 'long');
        const sid = (res.body.sid ?? res.body.data.call_control_id) as string;
        const record = await completed(sid);
        const conn = await svc.conn(sid);
        await conn.closed;
        assert.deepEqual(record.spoken, ['Wait, stop.']);
        assert.equal(record.dtmfSent, '12#');
        assert.deepEqual(
          conn.frames.filter((f) => f.event === 'dtmf').map((f) => (f.dtmf as { digit: string }).digit),
          ['1', '2', '#'],
        );
        assert.ok(conn.heard.includes('Wait, stop.'));
        if (provider === 'provider_b') {
          await callbacksDone(record, 'call.hangup');
          assert.equal(eventTypes(sid).filter((t) => t === 'call.dtmf.received').length, 3);
        }
        sandbox.setScript(to, null);
      });
    }
  });
});
