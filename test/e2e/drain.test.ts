/**
 * Graceful drain on SIGTERM, the service running as a real process (sandbox carriers in this test's
 * process, so they outlive it):
 *
 * - SIGTERM while a phone call and a web session are live: readiness answers 503 at once, a new call
 *   and a new session are refused with 503 + Retry-After (error envelope), other requests are still
 *   served, the live call runs to its natural end (the callee's goodbye) and the live session goes on
 *   until its client closes it; each is reported by exactly one `call.completed`; the process exits 0.
 * - With a short drain deadline (SHUTDOWN_DRAIN_MS), a call and a session still live at the deadline
 *   are ended by the service: `end_reason` `shutdown` (never as if the callee had hung up), billed once,
 *   exactly one `call.completed` each.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import supertest from 'supertest';
import { processEnv, signupWithKey, startProcess, type ServiceProcess } from '../helpers/process.js';
import { createReceptionist, processRig } from '../helpers/process-rig.js';
import { sandboxNumber } from '../helpers/calls.js';
import { connect, waitFor, type Client } from '../helpers/realtime.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';

const rig = processRig('drain');
const { completedFor, query } = rig;
const b64 = (s: string) => Buffer.from(s).toString('base64');

const TIMINGS: Record<string, string> = {
  CALL_RING_TIMEOUT_S: '5',
  CALL_DIAL_GRACE_MS: '500',
  CALL_ORPHAN_AFTER_MS: '3000',
  CALL_HEARTBEAT_MS: '300',
  JOBS_POLL_INTERVAL_MS: '200',
  WEBHOOK_POLL_INTERVAL_MS: '200',
  VOICE_SANDBOX_SPEED: '4',
  VOICE_SANDBOX_MS_PER_CHAR: '20',
  // The sandbox carriers below run at speed 2: the caller's audio arrives at twice real time.
  CALL_AUDIO_RATE: '2',
};

const exited = (p: ServiceProcess) =>
  new Promise<number | null>((r) => (p.child.exitCode !== null ? r(p.child.exitCode) : p.child.once('exit', (code) => r(code))));

/** A workspace with a webhook, a provider_a phone agent and a web agent, on a running service. */
async function setUp(http: ReturnType<typeof supertest>, name: string) {
  const { auth } = await signupWithKey(http, name);
  assert.equal((await http.post('/api/v1/webhooks').set(auth).send({ url: rig.receiver.url })).status, 201);
  const phoneAgent = await createReceptionist(http, auth);
  const web = await http.post('/api/v1/agents').set(auth).send({ name: 'Helper', instruction: 'You help visitors of Acme Dental.' });
  assert.equal(web.status, 201, JSON.stringify(web.body));
  return { auth, phoneAgent, webAgent: web.body.agent_id as string };
}

/** Places a call to a callee following `script` and waits until it is live with the caller's first turn answered. */
async function liveCall(
  http: ReturnType<typeof supertest>,
  auth: Record<string, string>,
  agentId: string,
  script: Parameters<SandboxCarriers['setScript']>[1],
) {
  const to = sandboxNumber(String(7000 + Math.floor(Math.random() * 999)));
  rig.carriers.setScript(to, script);
  const placed = await http.post('/api/v1/calls').set(auth).send({ agent_id: agentId, to_number: to });
  assert.equal(placed.status, 201, JSON.stringify(placed.body));
  const callId = placed.body.call_id as string;
  await waitFor(
    async () => {
      const c = (await http.get(`/api/v1/calls/${callId}`).set(auth)).body;
      return c.status === 'in_progress' && c.transcript.length >= 3 ? c : null;
    },
    20_000,
    'a live call with a few turns',
  );
  return callId;
}

/** Opens a text web session and waits for the agent's answer to a first question. */
async function liveSession(http: ReturnType<typeof supertest>, auth: Record<string, string>, agentId: string): Promise<{ c: Client; sessionId: string }> {
  const minted = await http.post('/api/v1/realtime/sessions').set(auth).send({ agent_id: agentId, user_id: 'visitor-1', source: 'text' });
  assert.equal(minted.status, 201, JSON.stringify(minted.body));
  const c = connect(minted.body.ws_url);
  const sessionId = String((await c.next('session_started')).session_id);
  c.sendFrame('text/plain', b64('What are your opening hours?'));
  await c.next('text', 10_000);
  return { c, sessionId };
}

function assertRetryableRefusal(res: { status: number; headers: Record<string, string>; body: any }, what: string): void {
  assert.equal(res.status, 503, `${what}: ${JSON.stringify(res.body)}`);
  assert.match(res.headers['retry-after'] ?? '', /^[0-9]+$/, `${what}: Retry-After`);
  assert.equal(res.body.error.code, 'service_unavailable', what);
  assert.equal(res.body.error.type, 'api_error', what);
}

describe('graceful drain on SIGTERM', () => {
  it('live conversations run to their natural end while new ones are refused with a retryable status', async () => {
    const env = await processEnv(rig.db.url, rig.dataDir, rig.carriers, { ...TIMINGS, SHUTDOWN_DRAIN_MS: '60000' });
    let service = await startProcess(env);
    const http = supertest(service.url);
    const { auth, phoneAgent, webAgent } = await setUp(http, 'Drain');
    // The callee talks a while longer, then says goodbye and hangs up: the natural end of the call.
    const callId = await liveCall(http, auth, phoneAgent, [
      { waitForAgent: true },
      { say: 'I would like to book a cleaning.' },
      { waitForAgent: true },
      { pause: 3000 },
      { say: 'Thanks, goodbye.' },
      { waitForAgent: true, startWithinMs: 2000 },
      { hangup: true },
    ]);
    const { c, sessionId } = await liveSession(http, auth, webAgent);

    service.child.kill('SIGTERM');
    const exit = exited(service);
    await waitFor(async () => (await http.get('/readyz')).status === 503, 5000, 'readiness to answer 503');
    const ready = await http.get('/readyz');
    assert.equal(ready.body.error.code, 'not_ready');
    assertRetryableRefusal(
      await http
        .post('/api/v1/calls')
        .set(auth)
        .send({ agent_id: phoneAgent, to_number: sandboxNumber('5555') }),
      'a new call',
    );
    assertRetryableRefusal(
      await http.post('/api/v1/realtime/sessions').set(auth).send({ agent_id: webAgent, user_id: 'visitor-2', source: 'text' }),
      'a new session',
    );
    // Other requests are served while the instance drains.
    assert.equal((await http.get(`/api/v1/calls/${callId}`).set(auth)).status, 200);
    // The live session goes on: the agent still answers, until the client closes it.
    c.sendFrame('text/plain', b64('And on Saturdays?'));
    await c.next('text', 10_000);
    await c.close();

    assert.equal(await exit, 0, service.output().slice(-3000));
    assert.match(service.output(), /draining: no new calls, sessions or jobs/);
    const [call] = await query('select status, end_reason, transcript from calls where id = $1', [callId]);
    assert.equal(call.status, 'completed');
    assert.equal(call.end_reason, 'remote_hangup', 'the callee hung up at the end of the conversation');
    assert.ok(
      call.transcript.some((t: { text: string }) => t.text === 'Thanks, goodbye.'),
      `the conversation ran to its end: ${JSON.stringify(call.transcript)}`,
    );
    const [session] = await query('select status, end_reason from realtime_conversations where id = $1', [sessionId]);
    assert.deepEqual([session.status, session.end_reason], ['completed', 'client_closed']);

    // Started again: whatever was not yet delivered is; each conversation is reported exactly once.
    service = await startProcess(env);
    try {
      await waitFor(async () => completedFor(callId).length > 0 && completedFor(sessionId).length > 0, 15_000, 'call.completed for both');
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal(completedFor(callId).length, 1, 'exactly one call.completed for the call');
      assert.equal(completedFor(sessionId).length, 1, 'exactly one call.completed for the session');
    } finally {
      assert.equal(await service.stop('SIGTERM'), 0, service.output().slice(-2000));
    }
  });

  it('at the drain deadline, what is still live ends with `shutdown`: recorded, billed, reported once', async () => {
    const env = await processEnv(rig.db.url, rig.dataDir, rig.carriers, { ...TIMINGS, SHUTDOWN_DRAIN_MS: '1500' });
    let service = await startProcess(env);
    const http = supertest(service.url);
    const { auth, phoneAgent, webAgent } = await setUp(http, 'Deadline');
    // A callee who would stay on the line for a minute.
    const callId = await liveCall(http, auth, phoneAgent, [
      { waitForAgent: true },
      { say: 'I would like to book a cleaning.' },
      { waitForAgent: true },
      { pause: 60_000 },
    ]);
    const { c, sessionId } = await liveSession(http, auth, webAgent);

    assert.equal(await service.stop('SIGTERM'), 0, service.output().slice(-3000));
    assert.equal((await c.closed).code, 1001, 'the session is closed by the server (shutting down)');
    const [call] = await query('select status, end_reason, cost_cents, duration from calls where id = $1', [callId]);
    assert.deepEqual([call.status, call.end_reason], ['completed', 'shutdown'], 'ended by us, never as if the callee had hung up');
    const [session] = await query('select status, end_reason from realtime_conversations where id = $1', [sessionId]);
    assert.deepEqual([session.status, session.end_reason], ['completed', 'shutdown']);
    for (const id of [callId, sessionId]) {
      assert.equal((await query('select 1 from usage_records where ref_id = $1', [id])).length, 1, `${id} billed once`);
      assert.equal((await query('select 1 from session_leases where id = $1', [id])).length, 0, `${id}: slot freed`);
      assert.equal((await query('select 1 from reservations where id = $1', [id])).length, 0, `${id}: reservation released`);
    }

    service = await startProcess(env);
    try {
      await waitFor(async () => completedFor(callId).length > 0 && completedFor(sessionId).length > 0, 15_000, 'call.completed for both');
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal(completedFor(callId).length, 1, 'exactly one call.completed for the call');
      assert.equal(completedFor(callId)[0].status, 'completed');
      assert.equal(completedFor(sessionId).length, 1, 'exactly one call.completed for the session');
      const fetched = await supertest(service.url).get(`/api/v1/calls/${callId}`).set(auth);
      assert.equal(fetched.body.end_reason, 'shutdown', 'the API says so (and the contract allows it)');
    } finally {
      assert.equal(await service.stop('SIGTERM'), 0, service.output().slice(-2000));
    }
  });
});
