/**
 * The per-address connection cap is meant for browsers; a carrier's few media servers carry many
 * calls each (issue 21: 256 live calls per carrier address at most). The test is the carrier, from one
 * address, with the cap lowered to 3: more live media streams than the cap, each presenting its
 * stream token, all carry their call; signed callbacks being answered do not count either. Without
 * proof (an open connection, a media stream that has not presented a token, a callback's connection
 * once it is answered) a connection counts as before, and the cap holds; a kept-alive connection idle
 * between requests gives way to a new one from its address (it is closed, as HTTP clients expect).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, freshAddress, waitFor } from '../helpers/realtime.js';
import { startHttpPeer, type HttpPeer } from '../helpers/http-peer.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { startSandboxCarriers, type SandboxCarriers } from '../../src/sandbox/carriers/server.js';
import { twilioSignature } from '../../src/sandbox/carriers/signing.js';

const CAP = 3;
let carriers: SandboxCarriers;
let t: TestService;
let tn: Tenant;
let port: number;
let setupPeer: HttpPeer;
/** Inbound setup answers held until the test lets them go. */
const held: Array<() => void> = [];

before(async () => {
  // The test is the carrier: the sandbox takes the calls (they ring and are never answered there)
  // and sends no callback; the test asks for the TwiML and opens the streams.
  carriers = await startSandboxCarriers({ speed: 4, ringMs: 600_000 });
  carriers.setCallbacksEnabled(false);
  setupPeer = await startHttpPeer(
    (_req, res) =>
      new Promise<void>((resolve) =>
        held.push(() => {
          res.writeHead(200, { 'Content-Type': 'application/json' });
          res.end('{}');
          resolve();
        }),
      ),
  );
  t = await startTestService({
    ...FAST_CALLS,
    PROVIDER_A_API_URL: carriers.providerAUrl,
    HTTP_MAX_CONNECTIONS_PER_IP: String(CAP),
    INBOUND_SETUP_TIMEOUT_MS: '20000',
  });
  port = Number(new URL(t.url).port);
  tn = await tenant(t);
});

after(async () => {
  for (const release of held.splice(0)) release();
  await t.close();
  await Promise.all([carriers.close(), setupPeer.close()]);
});

/** A provider_a agent whose auth token the test knows (it signs the carrier's requests). */
async function providerAAgent(body: Record<string, unknown> = {}) {
  const token = randomBytes(16).toString('hex');
  const sid = `AC${randomBytes(16).toString('hex')}`;
  const from = sandboxNumber();
  const agentId = await createPhoneAgent(t, tn, 'provider_a', { provider_a_config: { account_sid: sid, auth_token: token, phone_number: from }, ...body });
  return { agentId, token, sid, from };
}

interface Answer {
  status: number | null;
  body: string;
  /** The connection it came on closed. */
  closed: Promise<void>;
}

/** A signed provider_a request from `localAddress` on a connection of its own, kept alive after the answer unless `close`. */
function signedPost(localAddress: string, token: string, path: string, params: Record<string, string>, close = false): Promise<Answer> {
  const body = new URLSearchParams(params).toString();
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1',
      port,
      localAddress,
      method: 'POST',
      path,
      agent: new http.Agent({ keepAlive: true, maxSockets: 1 }),
      headers: {
        'Content-Type': 'application/x-www-form-urlencoded',
        'Content-Length': Buffer.byteLength(body),
        'X-Twilio-Signature': twilioSignature(token, `${t.url}${path}`, params),
        ...(close ? { Connection: 'close' } : {}),
      },
    });
    req.on('socket', (socket) => {
      const closed = new Promise<void>((r) => socket.once('close', () => r()));
      req.on('response', (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? null, body: text, closed }));
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

interface Raw {
  socket: net.Socket;
  /** Everything the server sent, once it closed the connection. */
  closed: Promise<string>;
  received(): string;
}

/** A plain connection from `localAddress` sending `first`. */
function open(localAddress: string, first: string): Promise<Raw> {
  return new Promise((resolve, reject) => {
    let received = '';
    const socket = net.connect({ host: '127.0.0.1', port, localAddress }, () => {
      socket.write(first);
      resolve({ socket, closed, received: () => received });
    });
    socket.on('data', (d) => (received += d.toString()));
    const closed = new Promise<string>((r) => socket.on('close', () => r(received)));
    socket.on('error', () => undefined);
    socket.once('error', reject);
  });
}

/** A kept-alive `/healthz` from `localAddress`: its answer, or '' when the connection was closed unanswered. */
async function healthz(localAddress: string): Promise<Raw & { answer: string }> {
  const raw = await open(localAddress, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  const answer = await Promise.race([waitFor(async () => (/\r\n\r\n/.test(raw.received()) ? raw.received() : null), 10_000, 'an answer'), raw.closed]);
  return { ...raw, answer };
}

interface Stream {
  ws: WebSocket;
  /** Media frames of the agent's audio received so far. */
  frames(): number;
  closeCode: Promise<number>;
}

/** A provider_a media stream from `localAddress`; `start` presents the call's stream token when given. */
async function mediaStream(localAddress: string, start?: { callId: string; callSid: string; token: string }): Promise<Stream> {
  const ws = new WebSocket(`${t.url.replace('http', 'ws')}/telephony/provider_a/media`, { localAddress });
  let frames = 0;
  ws.on('message', (data) => {
    if ((JSON.parse(data.toString()) as { event?: string }).event === 'media') frames += 1;
  });
  const closeCode = new Promise<number>((r) => ws.once('close', (code) => r(code)));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  ws.send(JSON.stringify({ event: 'connected', protocol: 'Call', version: '1.0.0' }));
  if (start) {
    ws.send(
      JSON.stringify({
        event: 'start',
        sequenceNumber: '1',
        streamSid: `MZ${randomBytes(8).toString('hex')}`,
        start: {
          accountSid: 'AC1',
          streamSid: 'MZ1',
          callSid: start.callSid,
          tracks: ['inbound'],
          mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
          customParameters: { call_id: start.callId, stream_token: start.token },
        },
      }),
    );
  }
  return { ws, frames: () => frames, closeCode };
}

const streamToken = (twiml: string) => /name="stream_token" value="([^"]+)"/.exec(twiml)?.[1];

describe('the per-address connection cap and carriers', () => {
  it('a carrier address carries more live media streams than the cap; unauthenticated connections from it still count', async () => {
    const a = await providerAAgent();
    const carrier = freshAddress();
    const streams: Stream[] = [];
    const callIds: string[] = [];
    try {
      for (let i = 0; i < CAP + 2; i++) {
        const to = sandboxNumber();
        const placed = await placeCall(t, tn, { agent_id: a.agentId, to_number: to });
        assert.equal(placed.status, 201, JSON.stringify(placed.body));
        const callId = placed.body.call_id as string;
        callIds.push(callId);
        const call = await waitForCall(t, tn, callId, (c) => Boolean(c.call_sid));
        // The carrier asks for our TwiML (a signed voice webhook), then opens the stream it names.
        const path = `/telephony/provider_a/voice?call_id=${callId}`;
        const params = { CallSid: call.call_sid, AccountSid: a.sid, From: a.from, To: to, CallStatus: 'in-progress', Direction: 'outbound-api' };
        const twiml = await signedPost(carrier, a.token, path, params, true);
        assert.equal(twiml.status, 200, twiml.body);
        const token = streamToken(twiml.body);
        assert.ok(token, twiml.body);
        const stream = await mediaStream(carrier, { callId, callSid: call.call_sid, token });
        streams.push(stream);
        await waitFor(async () => stream.frames() > 0, 20_000, `the agent audio on stream ${i + 1}`);
      }
      for (const s of streams) assert.equal(s.ws.readyState, WebSocket.OPEN, 'every stream is still live');
      for (const callId of callIds) assert.equal((await waitForCall(t, tn, callId, () => true)).status, 'in_progress');

      // Connections that proved nothing count: a media stream that has not presented a token, and
      // plain connections in the middle of a request; one more than the cap is closed unanswered.
      const pending = await mediaStream(carrier);
      const plain = [];
      for (let i = 0; i < CAP - 1; i++) plain.push(await open(carrier, 'GET /healthz HTTP/1.1\r\nHost: x\r\n'));
      const over = await healthz(carrier);
      assert.equal(over.answer, '', 'the connection over the cap is closed without an answer');
      // Once answered, they wait kept alive for a next request: a new connection from the address
      // then closes the oldest of them instead of being refused.
      for (const p of plain) p.socket.write('\r\n');
      for (const p of plain) await waitFor(async () => /^HTTP\/1\.1 200[^]*\r\n\r\n/.test(p.received()), 10_000, 'the answer');
      const next = await healthz(carrier);
      assert.match(next.answer, /^HTTP\/1\.1 200/, 'a new connection is served in place of an idle one');
      await Promise.race(plain.map((p) => p.closed));
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(plain.filter((p) => p.socket.destroyed).length, 1, 'one idle connection was closed for it');
      pending.ws.terminate();
      for (const p of [...plain, next]) p.socket.destroy();
    } finally {
      for (const s of streams) s.ws.close();
      for (const callId of callIds) await t.http.post(`/api/v1/calls/${callId}/hangup`).set(bearer(tn.apiKey));
    }
  });

  it('signed callbacks being answered do not count; once answered, a callback connection counts again or is closed', async () => {
    const a = await providerAAgent({ inbound_setup: { url: `${setupPeer.url}/setup` } });
    const on = await t.http.post(`/api/v1/agents/${a.agentId}/telephony/provider_a/inbound`).set(bearer(tn.apiKey));
    assert.equal(on.status, 200, JSON.stringify(on.body));
    const carrier = freshAddress();
    // CAP inbound calls announced at once: each voice webhook, its signature verified, waits for the
    // agent's inbound setup (held by the test).
    const answers = Array.from({ length: CAP }, () =>
      signedPost(carrier, a.token, '/telephony/provider_a/voice', {
        CallSid: `CA${randomBytes(16).toString('hex')}`,
        AccountSid: a.sid,
        From: sandboxNumber(),
        To: a.from,
        CallStatus: 'ringing',
        Direction: 'inbound',
      }),
    );
    await waitFor(async () => held.length === CAP, 20_000, 'the callbacks to wait for their setup');
    // The address holds CAP connections, all being answered as verified callbacks: there is room for
    // CAP plain connections in the middle of a request (which cannot be closed for a newcomer).
    const plain = [];
    for (let i = 0; i < CAP; i++) plain.push(await open(carrier, 'GET /healthz HTTP/1.1\r\nHost: x\r\n'));
    await new Promise((r) => setTimeout(r, 200));
    assert.ok(
      plain.every((p) => !p.socket.destroyed),
      `${CAP} plain connections beside ${CAP} callbacks being answered`,
    );
    // The address is full: the callbacks are still answered, and their connections then closed.
    for (const release of held.splice(0)) release();
    for (const answer of await Promise.all(answers)) {
      assert.equal(answer.status, 200, answer.body);
      assert.ok(streamToken(answer.body), answer.body);
      await answer.closed;
    }
    const over = await healthz(carrier);
    assert.equal(over.answer, '', 'still full: the callbacks took no place beyond the cap');
    for (const p of plain) p.socket.destroy();
  });
});
