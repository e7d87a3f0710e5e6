/**
 * A crash mid-call: the service runs as a real process against sandbox carriers living in this test's
 * process (so they outlive it); it is killed with SIGKILL while a call is live, then started again on
 * the same database. The call still ends (its deadline job runs after the restart), keeps the
 * conversation recorded before the crash, frees its slot, and is reported by exactly one
 * `call.completed`. It ends, and is billed, when its instance was last known alive (its last
 * heartbeat), not at the deadline that found it orphaned.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import supertest from 'supertest';
import { CRASH_TIMINGS, processEnv, signupWithKey, startProcess, type ServiceProcess } from '../helpers/process.js';
import { createTestDatabase } from '../helpers/database.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { providerConfig, sandboxNumber } from '../helpers/calls.js';
import { waitFor } from '../helpers/realtime.js';
import { startSandboxCarriers, type SandboxCarriers } from '../../src/sandbox/carriers/server.js';

let carriers: SandboxCarriers;
let receiver: Receiver;
let db: { url: string; drop(): Promise<void> };
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-restart-'));

before(async () => {
  carriers = await startSandboxCarriers({ speed: 2, ringMs: 50 });
  receiver = await startReceiver();
  db = await createTestDatabase();
});

after(async () => {
  await carriers.close();
  await receiver.close();
  await db.drop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('restart mid-call', () => {
  it('the call ends after a SIGKILL and a restart, once, with what was said before the crash', async () => {
    const env = await processEnv(db.url, dataDir, carriers, CRASH_TIMINGS);
    let service: ServiceProcess = await startProcess(env);
    let http = supertest(service.url);
    const { auth } = await signupWithKey(http, 'Restart');
    assert.equal((await http.post('/api/v1/webhooks').set(auth).send({ url: receiver.url })).status, 201);
    const agent = await http
      .post('/api/v1/agents')
      .set(auth)
      .send({
        name: 'Receptionist',
        instruction: 'You are the receptionist of Acme Dental.',
        first_message: 'Hello! This is Acme Dental.',
        ...providerConfig('provider_a'),
      });
    const to = sandboxNumber('8001');
    carriers.setScript(to, [{ waitForAgent: true }, { say: 'I would like to book a cleaning.' }, { waitForAgent: true }, { pause: 60_000 }]);
    const placed = await http.post('/api/v1/calls').set(auth).send({ agent_id: agent.body.agent_id, to_number: to });
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
          const got = receiver.requests.filter((r) => JSON.parse(r.rawBody.toString()).conversation_id === callId);
          return got.length ? got : null;
        },
        10_000,
        'call.completed',
      );
      await new Promise((r) => setTimeout(r, 1000));
      assert.equal(receiver.requests.filter((r) => JSON.parse(r.rawBody.toString()).conversation_id === callId).length, 1, 'exactly one call.completed');
      assert.equal(JSON.parse(events[0].rawBody.toString()).status, 'failed');
      // Its slot and its reservation of the workspace's credit were released with its charge.
      const { default: pg } = await import('pg');
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        assert.equal((await client.query('select 1 from session_leases where id = $1', [callId])).rowCount, 0);
        assert.equal((await client.query('select 1 from reservations where id = $1', [callId])).rowCount, 0);
        const usage = await client.query('select seconds from usage_records where ref_id = $1', [callId]);
        assert.equal(usage.rowCount, 1, 'billed once');
        assert.ok(usage.rows[0].seconds <= talkedS, `billed ${usage.rows[0].seconds}s, talked at most ${talkedS}s before the crash`);
      } finally {
        await client.end();
      }
    } finally {
      assert.equal(await service.stop('SIGTERM'), 0, service.output().slice(-2000));
    }
  });
});
