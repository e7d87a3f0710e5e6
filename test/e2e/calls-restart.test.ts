/**
 * A crash mid-call: the service runs as a real process against sandbox carriers living in this test's
 * process (so they outlive it); it is killed with SIGKILL while a call is live, then started again on
 * the same database. The call still ends (its deadline job runs after the restart), keeps the
 * conversation recorded before the crash, frees its slot, and is reported by exactly one
 * `call.completed`. It ends, and is billed, when its instance was last known alive (its last
 * heartbeat), not at the deadline that found it orphaned.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import supertest from 'supertest';
import { CRASH_TIMINGS, processEnv, signupWithKey, startProcess, type ServiceProcess } from '../helpers/process.js';
import { createReceptionist, processRig } from '../helpers/process-rig.js';
import { sandboxNumber } from '../helpers/calls.js';
import { waitFor } from '../helpers/realtime.js';

const rig = processRig('restart');

describe('restart mid-call', () => {
  it('the call ends after a SIGKILL and a restart, once, with what was said before the crash', async () => {
    const env = await processEnv(rig.db.url, rig.dataDir, rig.carriers, CRASH_TIMINGS);
    let service: ServiceProcess = await startProcess(env);
    let http = supertest(service.url);
    const { auth } = await signupWithKey(http, 'Restart');
    assert.equal((await http.post('/api/v1/webhooks').set(auth).send({ url: rig.receiver.url })).status, 201);
    const agentId = await createReceptionist(http, auth);
    const to = sandboxNumber('8001');
    rig.carriers.setScript(to, [{ waitForAgent: true }, { say: 'I would like to book a cleaning.' }, { waitForAgent: true }, { pause: 60_000 }]);
    const placed = await http.post('/api/v1/calls').set(auth).send({ agent_id: agentId, to_number: to });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const callId = placed.body.call_id as string;
    // Live, with the caller's turn answered and recorded.
    await waitFor(
      async () => {
        const c = (await http.get(`/api/v1/calls/${callId}`).set(auth)).body;
        return c.status === 'in_progress' && c.transcript.length >= 3 ? c : null;
      },
      20_000,
      'a live call with a few turns',
    );

    const killedAt = Date.now();
    assert.equal(await service.stop('SIGKILL'), null);
    service = await startProcess(env);
    http = supertest(service.url);
    try {
      const call = await waitFor(
        async () => {
          const c = (await http.get(`/api/v1/calls/${callId}`).set(auth)).body;
          return ['completed', 'failed', 'voicemail'].includes(c.status) ? c : null;
        },
        30_000,
        'the call to end after the restart',
      );
      assert.equal(call.status, 'failed');
      assert.equal(call.end_reason, 'service_error', 'the media stream was cut by the crash');
      // Before the fix it ended (and was billed) at its deadline, CALL_ORPHAN_AFTER_MS after the crash.
      assert.ok(
        Date.parse(call.ended_at) <= killedAt,
        `ended at its last heartbeat (${call.ended_at}), not after the crash (${new Date(killedAt).toISOString()})`,
      );
      const talkedS = Math.ceil((killedAt - Date.parse(call.answered_at)) / 1000);
      assert.ok(call.duration <= talkedS, `duration ${call.duration}s, talked at most ${talkedS}s before the crash`);
      assert.ok(
        call.transcript.some((e: { text: string }) => e.text === 'I would like to book a cleaning.'),
        'what was said before the crash is kept',
      );
      const events = await waitFor(
        async () => {
          const got = rig.receiver.requests.filter((r) => JSON.parse(r.rawBody.toString()).conversation_id === callId);
          return got.length ? got : null;
        },
        10_000,
        'call.completed',
      );
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal(rig.receiver.requests.filter((r) => JSON.parse(r.rawBody.toString()).conversation_id === callId).length, 1, 'exactly one call.completed');
      assert.equal(JSON.parse(events[0].rawBody.toString()).status, 'failed');
      // Its slot and its reservation of the workspace's credit were released with its charge.
      assert.equal((await rig.query('select 1 from session_leases where id = $1', [callId])).length, 0);
      assert.equal((await rig.query('select 1 from reservations where id = $1', [callId])).length, 0);
      const usage = await rig.query('select seconds from usage_records where ref_id = $1', [callId]);
      assert.equal(usage.length, 1, 'billed once');
      assert.ok(usage[0].seconds <= talkedS, `billed ${usage[0].seconds}s, talked at most ${talkedS}s before the crash`);
    } finally {
      assert.equal(await service.stop('SIGTERM'), 0, service.output().slice(-2000));
    }
  });
});
