/**
 * A scheduled batch across a restart: created, then the service stops and starts again before its
 * time. The schedule lives in the job queue (PostgreSQL), so the new process starts the batch at
 * `scheduled_at`: not before, and about on time (within a few of its job queue's polls of the later of
 * `scheduled_at` and the moment it was up: a busy machine may take longer than the wait to restart it).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import supertest from 'supertest';
import { processEnv, signupWithKey, startProcess, type ServiceProcess } from '../helpers/process.js';
import { createTestDatabase } from '../helpers/database.js';
import { providerConfig } from '../helpers/calls.js';
import { sandboxNumbers } from '../helpers/batches.js';
import { waitFor } from '../helpers/realtime.js';
import { startSandboxCarriers, type SandboxCarriers } from '../../src/sandbox/carriers/server.js';

let carriers: SandboxCarriers;
let db: { url: string; drop(): Promise<void> };
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-schedule-'));

before(async () => {
  carriers = await startSandboxCarriers({ speed: 2, ringMs: 50 });
  db = await createTestDatabase();
});

after(async () => {
  await carriers.close();
  await db.drop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('a scheduled batch and a restart', () => {
  it('starts at scheduled_at in the new process, not before', async () => {
    const pollMs = 200;
    const env = await processEnv(db.url, dataDir, carriers, { CALL_RING_TIMEOUT_S: '5', JOBS_POLL_INTERVAL_MS: String(pollMs), CALL_AUDIO_RATE: '2' });
    // Polls of the job queue that may pass before a due job starts: room for a loaded machine.
    const onTimeMs = 25 * pollMs;
    let service: ServiceProcess = await startProcess(env);
    let http = supertest(service.url);
    const { auth } = await signupWithKey(http, 'Schedule');
    const agent = await http
      .post('/api/v1/agents')
      .set(auth)
      .send({ name: 'Reminder', instruction: 'Remind people.', ...providerConfig('provider_a') });
    const numbers = sandboxNumbers('0002', 3, 100);
    const at = new Date(Date.now() + 8000);
    const created = await http
      .post('/api/v1/batches')
      .set(auth)
      .send({
        agent_id: agent.body.agent_id,
        name: 'Across a restart',
        recipients: numbers.map((to_number) => ({ to_number })),
        scheduled_at: at.toISOString(),
      });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.status, 'scheduled');
    const batchId = created.body.batch_id as string;

    assert.equal(await service.stop('SIGTERM'), 0, service.output().slice(-2000));
    service = await startProcess(env);
    const upAt = Date.now();
    http = supertest(service.url);
    try {
      const dialedEarly = () => carriers.calls().filter((c) => numbers.includes(c.to) && Date.now() < at.getTime()).length;
      while (Date.now() < at.getTime() - 300) {
        assert.equal(dialedEarly(), 0, 'nobody is called before scheduled_at');
        await new Promise((r) => setTimeout(r, 100));
      }
      const batch = await waitFor(
        async () => {
          const b = (await http.get(`/api/v1/batches/${batchId}`).set(auth)).body;
          return b.completed_at ? b : null;
        },
        30_000,
        'the batch to finish',
      );
      assert.equal(batch.status, 'completed');
      assert.equal(batch.failed_count, 3, 'every recipient busy, called once');
      const calls = (await http.get('/api/v1/calls').query({ batch_id: batchId }).set(auth)).body.data as Array<{ created_at: string }>;
      assert.equal(calls.length, 3);
      const first = Math.min(...calls.map((c) => new Date(c.created_at).getTime()));
      assert.ok(first >= at.getTime(), `not early (${first - at.getTime()} ms)`);
      const due = Math.max(at.getTime(), upAt);
      assert.ok(
        first - due < onTimeMs,
        `on time after the restart (${first - due} ms after it was due, the restart ${upAt - at.getTime()} ms after scheduled_at)`,
      );
    } finally {
      assert.equal(await service.stop('SIGTERM'), 0, service.output().slice(-2000));
    }
  });
});
