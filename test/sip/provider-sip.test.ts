/**
 * Provider `sip` through the service: a second user agent of ours on loopback is the far end (the
 * trunk's side). Outbound: `POST /calls` with `provider: "sip"` dials the agent's trunk termination,
 * the far end answers and speaks (the sandbox voice service reads its words into the transcript) and
 * hears the agent. Inbound: an INVITE to a number the trunk delivers and an agent is bound to reaches
 * that agent, and one to a number no agent answers is refused with the same 403 as a stranger gets.
 * A hang-up asked of another instance reaches the instance holding the call's dialog. An inbound call
 * the calls side has not connected within CALL_RING_TIMEOUT_S (its inbound setup still deciding) is
 * given up with 480. Last, the instance drains: a new INVITE is answered 503 while the live call runs
 * on, and at the drain deadline that call ends `shutdown` with our BYE.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { encodeSpokenText } from '../../src/sandbox/spoken-text.js';
import { rms } from '../../src/audio/pcm16.js';
import type { SipCall, SipUserAgent, CallEnded } from '../../src/sip/index.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { FAST_CALLS, waitForCall } from '../helpers/calls.js';
import { freePort, LOOPBACK, testUserAgent } from '../helpers/sipp.js';
import { startHttpPeer, type HttpPeer } from '../helpers/http-peer.js';

type Entry = { role: string; text: string };

const NUMBER = '+14155550140';
/** Bound to an agent whose inbound setup answers only when the test lets it. */
const SLOW_NUMBER = '+14155550141';
const CALLER = '+14155550177';
const SAID = 'Hello, this is Sam.';

let t: TestService;
/** A second instance on the same database, with SIP off: API requests for SIP calls held by `t`. */
let t2: TestService;
let tn: Tenant;
let peer: SipUserAgent;
let sipPort: number;
let agentId: string;
/** The inbound setup of SLOW_NUMBER's agent: it answers `{}` once `setupHeld` settles. */
let setup: HttpPeer;
let setupHeld: Promise<void> = Promise.resolve();

/** The far end of a call: once the agent has spoken, says SAID; counts the agent's loud frames. */
function farEnd(call: SipCall): { agentFrames: () => number } {
  let loud = 0;
  let spoke = false;
  call.on('audio', (pcm) => {
    if (rms(pcm) < 300) return;
    loud++;
    if (!spoke && loud > 10) {
      spoke = true;
      call.sendAudio(encodeSpokenText(SAID));
    }
  });
  return { agentFrames: () => loud };
}

before(async () => {
  peer = await testUserAgent();
  sipPort = await freePort();
  const rtp = await freePort();
  const { SANDBOX_CARRIERS_SPEED: _speed, CALL_AUDIO_RATE: _rate, ...fast } = FAST_CALLS;
  setup = await startHttpPeer(async (_req, res) => {
    await setupHeld;
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{}');
  });
  t = await startTestService({
    ...fast,
    // Longer than CALL_RING_TIMEOUT_S (5 in FAST_CALLS): a held setup outlasts the ring.
    INBOUND_SETUP_TIMEOUT_MS: '30000',
    SHUTDOWN_DRAIN_MS: '3000',
    SIP_PORT: String(sipPort),
    SIP_HOST: LOOPBACK,
    SIP_ADVERTISED_ADDRESS: LOOPBACK,
    SIP_RTP_PORT_MIN: String(rtp),
    SIP_RTP_PORT_MAX: String(rtp + 40),
  });
  t2 = await startTestService({ ...fast, DATABASE_URL: t.service.db.url });
  tn = await tenant(t);
  const trunk = await t.http
    .post('/api/v1/sip-trunks')
    .set(bearer(tn.apiKey))
    .send({
      name: 'Loopback PBX',
      inbound: { allowed_sources: [LOOPBACK], numbers: [NUMBER, SLOW_NUMBER] },
      outbound: { host: `${LOOPBACK}:${peer.port}`, transport: 'udp', caller_id_numbers: [NUMBER] },
    });
  assert.equal(trunk.status, 201, JSON.stringify(trunk.body));
  const agent = await t.http
    .post('/api/v1/agents')
    .set(bearer(tn.apiKey))
    .send({
      name: 'Receptionist',
      instruction: 'You are the receptionist of Acme Dental.',
      first_message: 'Hello! This is Acme Dental.',
      sip_config: { trunk_id: trunk.body.trunk_id ?? trunk.body.id, phone_number: NUMBER },
    });
  assert.equal(agent.status, 201, JSON.stringify(agent.body));
  agentId = agent.body.agent_id;
  const slow = await t.http
    .post('/api/v1/agents')
    .set(bearer(tn.apiKey))
    .send({
      name: 'Slow receptionist',
      instruction: 'You are the receptionist of Acme Dental.',
      inbound_setup: { url: `${setup.url}/setup` },
      sip_config: { trunk_id: trunk.body.trunk_id, phone_number: SLOW_NUMBER },
    });
  assert.equal(slow.status, 201, JSON.stringify(slow.body));
});

after(async () => {
  await t2?.close();
  await t?.close();
  await peer?.stop();
  await setup?.close();
});

/** Our inbound call of the SIP Call-ID, once the calls side recorded it. */
async function inboundCall(callSid: string): Promise<Record<string, any>> {
  for (;;) {
    const list = await t2.http.get('/api/v1/calls?direction=inbound').set(bearer(tn.apiKey));
    const c = (list.body.data as Array<Record<string, any>>).find((x) => x.call_sid === callSid);
    if (c) return c;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('provider sip', () => {
  it('dials the trunk: the far end hears the agent, and its words are in the transcript', async () => {
    const answered = once(peer, 'incoming') as Promise<[SipCall]>;
    const res = await t.http.post('/api/v1/calls').set(bearer(tn.apiKey)).send({ agent_id: agentId, to_number: '+14155550123', provider: 'sip' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const [call] = await answered;
    assert.equal(call.to.user, '+14155550123');
    assert.equal(call.from.user, NUMBER, 'the caller id is the bound number');
    const far = farEnd(call);
    await call.answer();
    const live = await waitForCall(t, tn, res.body.call_id, (c) => (c.transcript as Entry[]).some((e) => e.role === 'user' && e.text === SAID));
    assert.equal(live.status, 'in_progress');
    assert.equal(live.call_sid, call.callId);
    assert.ok(far.agentFrames() > 10, 'the far end heard the agent');
    const ended = once(call, 'ended') as Promise<[CallEnded]>;
    assert.equal((await t.http.post(`/api/v1/calls/${live.call_id}/hangup`).set(bearer(tn.apiKey))).status, 200);
    assert.equal((await ended)[0].reason, 'remote_hangup', 'our BYE ended it');
    const done = await waitForCall(t, tn, live.call_id);
    assert.equal(done.status, 'completed');
    assert.equal(done.provider, 'sip');
  });

  it('a hang-up sent to another instance ends the call on the instance holding its dialog', async () => {
    const answered = once(peer, 'incoming') as Promise<[SipCall]>;
    const res = await t.http.post('/api/v1/calls').set(bearer(tn.apiKey)).send({ agent_id: agentId, to_number: '+14155550125', provider: 'sip' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const [call] = await answered;
    farEnd(call);
    await call.answer();
    await waitForCall(t, tn, res.body.call_id, (c) => (c.transcript as Entry[]).some((e) => e.role === 'user' && e.text === SAID));
    const ended = once(call, 'ended') as Promise<[CallEnded]>;
    const hangup = await t2.http.post(`/api/v1/calls/${res.body.call_id}/hangup`).set(bearer(tn.apiKey));
    assert.equal(hangup.status, 200, JSON.stringify(hangup.body));
    assert.equal((await ended)[0].reason, 'remote_hangup', 'our BYE, from the instance holding the dialog');
    const done = await waitForCall(t2, tn, res.body.call_id);
    assert.deepEqual([done.status, done.end_reason], ['completed', 'api_hangup']);
  });

  it('maps a busy far end (486) onto busy, dialed only by the instance running SIP', async () => {
    // Both instances take jobs; t2 runs no SIP, so a SIP dial it took would fail the call (carrier_error).
    const onIncoming = (call: SipCall) => call.reject(486);
    peer.on('incoming', onIncoming);
    try {
      for (const to of ['+14155550124', '+14155550126', '+14155550127', '+14155550128']) {
        const res = await (to.endsWith('4') ? t : t2).http
          .post('/api/v1/calls')
          .set(bearer(tn.apiKey))
          .send({ agent_id: agentId, to_number: to, provider: 'sip' });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        const done = await waitForCall(t, tn, res.body.call_id);
        assert.deepEqual([done.status, done.end_reason], ['busy', 'not_answered'], to);
      }
    } finally {
      peer.off('incoming', onIncoming);
    }
  });

  it('takes an INVITE to the bound number through the trunk to the agent', async () => {
    const call = await peer.invite({ host: LOOPBACK, port: sipPort, to: NUMBER, from: CALLER });
    const far = farEnd(call);
    await once(call, 'answered');
    const inbound = await inboundCall(call.callId);
    assert.equal(inbound.agent_id, agentId);
    const live = await waitForCall(t, tn, inbound.call_id, (c) => (c.transcript as Entry[]).some((e) => e.role === 'user' && e.text === SAID));
    assert.equal(live.from_number, CALLER);
    assert.equal(live.to_number, NUMBER);
    assert.ok(far.agentFrames() > 10, 'the caller heard the agent');
    call.hangup();
    const done = await waitForCall(t, tn, inbound.call_id);
    assert.equal(done.status, 'completed');
    assert.equal(done.direction, 'inbound');
  });

  it('refuses an INVITE to a number no agent answers with a bare 403', async () => {
    const call = await peer.invite({ host: LOOPBACK, port: sipPort, to: '+14155550999', from: CALLER });
    const [ended] = (await once(call, 'ended')) as [CallEnded];
    assert.equal(ended.status, 403);
  });

  it('gives an inbound call nobody connects up with 480 after CALL_RING_TIMEOUT_S', async () => {
    let release!: () => void;
    setupHeld = new Promise<void>((resolve) => (release = resolve));
    const call = await peer.invite({ host: LOOPBACK, port: sipPort, to: SLOW_NUMBER, from: CALLER });
    const [ended] = (await once(call, 'ended')) as [CallEnded];
    assert.equal(ended.status, 480);
    assert.equal(setup.requests.length, 1, 'the calls side was still asking the inbound setup');
    release();
    const done = await waitForCall(t, tn, (await inboundCall(call.callId)).call_id);
    assert.deepEqual([done.status, done.answered_at], ['no_answer', null]);
  });

  // Last: the instance drains and stops.
  it('draining, answers new INVITEs 503 while live calls run on, which end `shutdown` at the deadline', async () => {
    const live = await peer.invite({ host: LOOPBACK, port: sipPort, to: NUMBER, from: CALLER });
    farEnd(live);
    await once(live, 'answered');
    const inbound = await inboundCall(live.callId);
    await waitForCall(t, tn, inbound.call_id, (c) => (c.transcript as Entry[]).some((e) => e.role === 'user' && e.text === SAID));
    const liveEnded = once(live, 'ended') as Promise<[CallEnded]>;
    const closed = t.service.close();
    const late = await peer.invite({ host: LOOPBACK, port: sipPort, to: NUMBER, from: CALLER });
    const [refused] = (await once(late, 'ended')) as [CallEnded];
    assert.equal(refused.status, 503);
    assert.equal(live.state, 'active', 'the live call runs on');
    assert.equal((await liveEnded)[0].reason, 'remote_hangup', 'our BYE at the drain deadline');
    await closed;
    const done = await waitForCall(t2, tn, inbound.call_id);
    assert.deepEqual([done.status, done.end_reason], ['completed', 'shutdown']);
  });
});
