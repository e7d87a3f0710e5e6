/**
 * A crash mid web session: the service runs as a real process and is killed with SIGKILL while a
 * session is live, then started again on the same database. The session is not lost: once its lease
 * expires the restarted service records it as `failed` with `end_reason: instance_lost`, keeps what was
 * said before the crash, bills the time it ran, frees its slot and sends exactly one `call.completed`,
 * which, like the record, carries the agent version the session ran (pinned to version 1 while 2 is
 * published: the orphan is finalised with its own version, not the published one).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import supertest from 'supertest';
import { processEnv, signupWithKey, startProcess, type ServiceProcess } from '../helpers/process.js';
import { createTestDatabase } from '../helpers/database.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { connect, waitFor } from '../helpers/realtime.js';

let receiver: Receiver;
let db: { url: string; drop(): Promise<void> };
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-session-crash-'));
const b64 = (s: string) => Buffer.from(s).toString('base64');
const noCarriers = { providerAUrl: 'http://127.0.0.1:9', providerBUrl: 'http://127.0.0.1:9' };

before(async () => {
  receiver = await startReceiver();
  db = await createTestDatabase();
});

after(async () => {
  await receiver.close();
  await db.drop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('restart mid web session', () => {
  it('a session cut by SIGKILL is finalised once after the restart, with its transcript, billing and call.completed', async () => {
    const env = await processEnv(db.url, dataDir, noCarriers, {
      REALTIME_LEASE_HEARTBEAT_MS: '200',
      REALTIME_LEASE_EXPIRY_MS: '1500',
      VOICE_SANDBOX_SPEED: '20',
      VOICE_SANDBOX_MS_PER_CHAR: '0',
    });
    let service: ServiceProcess = await startProcess(env);
    let http = supertest(service.url);
    const { auth } = await signupWithKey(http, 'SessionCrash');
    assert.equal(
      (
        await http
          .post('/api/v1/webhooks')
          .set(auth)
          .send({ url: receiver.url, events: ['call.completed'] })
      ).status,
      201,
    );
    const agent = await http.post('/api/v1/agents').set(auth).send({ name: 'Helper', instruction: 'You help visitors of Acme Dental.' });
    const second = await http.patch(`/api/v1/agents/${agent.body.agent_id}`).set(auth).send({ instruction: 'You help visitors of Acme Dental, version two.' });
    assert.equal(second.body.published_version, 2, JSON.stringify(second.body));
    const minted = await http
      .post('/api/v1/realtime/sessions')
      .set(auth)
      .send({ agent_id: agent.body.agent_id, agent_version: 1, user_id: 'visitor-9', source: 'voice' });
    assert.equal(minted.status, 201, JSON.stringify(minted.body));
    assert.equal(minted.body.agent_version, 1);
    const c = connect(minted.body.ws_url);
    const sessionId = String((await c.next('session_started')).session_id);
    c.sendFrame('text/plain', b64('I would like to book a cleaning.'));
    await c.next((m) => m.type === 'transcript' && m.role === 'model' && m.final === true, 10_000);
    // Long enough for the debounced progress save and a billable minute to have started.
    await new Promise((r) => setTimeout(r, 1200));

    assert.equal(await service.stop('SIGKILL'), null);
    c.ws.terminate();
    service = await startProcess(env);
    http = supertest(service.url);
    try {
      const record = await waitFor(
        async () => {
          const res = await http.get(`/api/v1/realtime/conversations/${sessionId}`).set(auth);
          return res.status === 200 ? res.body : null;
        },
        20_000,
        'the session to be finalised after the restart',
      );
      assert.equal(record.status, 'failed');
      assert.equal(record.end_reason, 'instance_lost');
      assert.equal(record.agent_version, 1);
      assert.ok(
        record.transcript.some((e: { text: string }) => e.text === 'I would like to book a cleaning.'),
        JSON.stringify(record.transcript),
      );
      assert.ok(
        record.transcript.some((e: { role: string }) => e.role === 'model'),
        'the agent reply saved before the crash is kept',
      );
      assert.ok(record.duration >= 1, `billed time: ${record.duration}s`);
      await waitFor(async () => receiver.requests.some((r) => r.rawBody.toString().includes(sessionId)), 10_000, 'call.completed');
      await new Promise((r) => setTimeout(r, 1000));
      const events = receiver.requests.filter((r) => r.rawBody.toString().includes(sessionId)).map((r) => JSON.parse(r.rawBody.toString()));
      assert.equal(events.length, 1, 'exactly one call.completed');
      assert.equal(events[0].status, 'failed');
      assert.equal(events[0].agent_version, 1);
      assert.deepEqual(events[0].transcript, record.transcript);
      const stored = await waitFor(async () => {
        const { default: pg } = await import('pg');
        const client = new pg.Client({ connectionString: db.url });
        await client.connect();
        try {
          const usage = await client.query('select cents from usage_records where ref_id = $1', [sessionId]);
          const leases = await client.query('select 1 from session_leases where id = $1', [sessionId]);
          const live = await client.query('select 1 from realtime_live_sessions where id = $1', [sessionId]);
          const reservations = await client.query('select 1 from reservations where id = $1', [sessionId]);
          return { usage: usage.rows, leases: leases.rowCount, live: live.rowCount, reservations: reservations.rowCount };
        } finally {
          await client.end();
        }
      });
      assert.equal(stored.usage.length, 1, 'billed once');
      assert.ok(Number(stored.usage[0].cents) > 0, 'for the time the session ran');
      assert.equal(stored.leases, 0, 'its slot is free');
      assert.equal(stored.live, 0, 'no live row left');
      assert.equal(stored.reservations, 0, 'its reservation was released with the charge');
    } finally {
      assert.equal(await service.stop('SIGTERM'), 0, service.output().slice(-2000));
    }
  });
});
