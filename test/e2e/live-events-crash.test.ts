/**
 * A crash of the instance bridging a call (issue 22, live events): two service processes on one
 * database against sandbox carriers living in this test's process. A call is bridged on A; a client
 * follows its event stream on B; A is killed with SIGKILL mid-call. B's deadline job finalises the
 * orphaned call, and the stream on B still ends: its `end` after the record, the events A wrote
 * before the crash (the caller's line) kept, in order, with no gap.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import supertest from 'supertest';
import { CRASH_TIMINGS, processEnv, signupWithKey, startProcess, type ServiceProcess } from '../helpers/process.js';
import { createReceptionist, processRig } from '../helpers/process-rig.js';
import { sandboxNumber } from '../helpers/calls.js';
import { waitFor } from '../helpers/realtime.js';
import { openSse } from '../helpers/sse.js';

const rig = processRig('events-crash');
const LINE = 'I would like to book a cleaning.';

describe('a crash of the bridging instance', () => {
  it('the stream on another instance ends once the orphaned call is finalised', async () => {
    const envA = await processEnv(rig.db.url, rig.dataDir, rig.carriers, { ...CRASH_TIMINGS, EVENTS_HEARTBEAT_MS: '500' });
    const envB = await processEnv(rig.db.url, rig.dataDir, rig.carriers, { ...CRASH_TIMINGS, EVENTS_HEARTBEAT_MS: '500' });
    const a: ServiceProcess = await startProcess(envA);
    let b: ServiceProcess | undefined;
    try {
      const httpA = supertest(a.url);
      const { auth } = await signupWithKey(httpA, 'Events crash');
      const agentId = await createReceptionist(httpA, auth);
      const to = sandboxNumber('8201');
      rig.carriers.setScript(to, [{ waitForAgent: true }, { say: LINE }, { waitForAgent: true }, { pause: 60_000 }]);
      // Placed before B runs, so A dials it and the carriers connect its media stream to A.
      const placed = await httpA.post('/api/v1/calls').set(auth).send({ agent_id: agentId, to_number: to });
      assert.equal(placed.status, 201, JSON.stringify(placed.body));
      const callId = placed.body.call_id as string;
      await waitFor(
        async () => {
          const c = (await httpA.get(`/api/v1/calls/${callId}`).set(auth)).body;
          return c.status === 'in_progress' && c.transcript.length >= 3 ? c : null;
        },
        20_000,
        'a live call with a few turns',
      );
      b = await startProcess(envB);
      const sse = await openSse(`${b.url}/api/v1/calls/${callId}/events`, auth);
      assert.equal(sse.status, 200);
      await sse.waitFor((m) => m.event === 'transcript' && m.data.final && m.data.text === LINE);

      assert.equal(await a.stop('SIGKILL'), null);
      await sse.ended;
      const call = (await supertest(b.url).get(`/api/v1/calls/${callId}`).set(auth)).body;
      assert.equal(call.status, 'failed');
      assert.equal(call.end_reason, 'service_error');
      const ids = sse.messages.map((m) => m.id);
      assert.deepEqual(
        ids,
        ids.map((_, i) => i + 1),
        'every event, in order',
      );
      const last = sse.messages.at(-1)!;
      assert.deepEqual([last.event, last.data.status, last.data.end_reason], ['end', 'failed', 'service_error']);
      const moves = sse.messages.filter((m) => m.event === 'status').map((m) => m.data.status);
      assert.equal(moves.at(-1), 'ended');
      // A stream opened now replays the same events and ends.
      const replay = await openSse(`${b.url}/api/v1/calls/${callId}/events`, auth);
      await replay.ended;
      assert.deepEqual(replay.messages, sse.messages);
    } finally {
      if (a.child.exitCode === null && a.child.signalCode === null) await a.stop('SIGKILL');
      if (b) assert.equal(await b.stop('SIGTERM'), 0, b.output().slice(-2000));
    }
  });
});
