/**
 * The service can run as a role that only reads and writes rows: migrations run as the schema owner
 * (DATABASE_MIGRATION_URL), which then grants the service's role (DATABASE_URL) what it needs. The
 * service works end to end as that role (accounts, agents, jobs, webhooks, a realtime session), and
 * the role cannot create, alter or drop tables.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import supertest from 'supertest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startService, type RunningService } from '../../src/service.js';
import { serverUrl } from '../helpers/database.js';
import { SHARED_MACHINE_ENV } from '../helpers/service.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { connect, waitFor } from '../helpers/realtime.js';
import { providerConfig, sandboxNumber } from '../helpers/calls.js';

const suffix = randomBytes(4).toString('hex');
const OWNER = `vas_owner_${suffix}`;
const APP = `vas_app_${suffix}`;
const DB = `vas_lp_${suffix}`;
// Both roles log in with a password: the machine's PostgreSQL trusts local connections, but the
// embedded one (no DATABASE_URL) asks every role for a SCRAM password.
const PASSWORD = randomBytes(12).toString('hex');

function urlAs(role: string): string {
  const u = new URL(serverUrl());
  u.username = role;
  u.password = PASSWORD;
  u.pathname = `/${DB}`;
  return u.toString();
}

async function asAdmin(sql: string, database?: string): Promise<void> {
  const u = new URL(serverUrl());
  if (database) u.pathname = `/${database}`;
  const c = new pg.Client({ connectionString: u.toString() });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

let service: RunningService;
let receiver: Receiver;
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-lp-'));

before(async () => {
  await asAdmin(`create role ${OWNER} login password '${PASSWORD}'`);
  await asAdmin(`create role ${APP} login password '${PASSWORD}'`);
  await asAdmin(`create database ${DB} owner ${OWNER}`);
  // PostgreSQL 15 lets only the owner of `public` create in it: make that the schema owner role.
  await asAdmin(`alter schema public owner to ${OWNER}`, DB);
  receiver = await startReceiver();
  const config = loadConfig({
    NODE_ENV: 'test',
    DATABASE_URL: urlAs(APP),
    DATABASE_MIGRATION_URL: urlAs(OWNER),
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    CONTRACT_CHECK: 'enforce',
    WEBHOOK_POLL_INTERVAL_MS: '100',
    VOICE_SANDBOX_SPEED: '20',
    VOICE_SANDBOX_MS_PER_CHAR: '0',
    SHUTDOWN_GRACE_MS: '1000',
    ...SHARED_MACHINE_ENV,
  });
  service = await startService(config, createLogger('silent'));
});

after(async () => {
  await service?.close();
  await receiver.close();
  await asAdmin(`drop database if exists ${DB} with (force)`);
  await asAdmin(`drop role if exists ${APP}`);
  await asAdmin(`drop role if exists ${OWNER}`);
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('a least-privilege database role', () => {
  it('runs the service end to end', async () => {
    const http = supertest(service.url);
    const signup = await http
      .post('/api/v1/auth/signup')
      .send({ email: `lp-${suffix}@example.com`, password: 'long-enough-pw', workspace_name: 'Least privilege' });
    assert.equal(signup.status, 201, JSON.stringify(signup.body));
    const key = await http.post('/api/v1/keys').set('Authorization', `Bearer ${signup.body.session_token}`).send({ name: 'k' });
    assert.equal(key.status, 201);
    const auth = { Authorization: `Bearer ${key.body.key}` };
    assert.equal(
      (
        await http
          .post('/api/v1/webhooks')
          .set(auth)
          .send({ url: receiver.url, events: ['call.completed'] })
      ).status,
      201,
    );
    const agent = await http.post('/api/v1/agents').set(auth).send({ name: 'Helper', instruction: 'Help.' });
    assert.equal(agent.status, 201);
    const minted = await http.post('/api/v1/realtime/sessions').set(auth).send({ agent_id: agent.body.agent_id, user_id: 'visitor', source: 'text' });
    assert.equal(minted.status, 201);
    const c = connect(minted.body.ws_url);
    const sessionId = String((await c.next('session_started')).session_id);
    c.sendFrame('text/plain', Buffer.from('Hello').toString('base64'));
    await c.next('turn_complete');
    await c.close();
    await waitFor(async () => receiver.requests.some((r) => r.rawBody.toString().includes(sessionId)), 10_000, 'call.completed delivered');

    // A phone call goes through the job queue (dialing, its deadline): graphile-worker's tables have
    // row-level security, which hides every row from a role that is not their owner unless a policy
    // lets it in.
    const phone = await http
      .post('/api/v1/agents')
      .set(auth)
      .send({ name: 'Receptionist', instruction: 'Help.', first_message: 'Hello!', ...providerConfig('provider_b') });
    assert.equal(phone.status, 201, JSON.stringify(phone.body));
    const placed = await http.post('/api/v1/calls').set(auth).send({ agent_id: phone.body.agent_id, to_number: sandboxNumber() });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const call = await waitFor(
      async () => {
        const c = (await http.get(`/api/v1/calls/${placed.body.call_id}`).set(auth)).body;
        return c.status === 'completed' ? c : null;
      },
      30_000,
      'the call dialed by a job and completed',
    );
    assert.ok(call.transcript.length > 0);
  });

  it('the service role cannot create, alter or drop tables', async () => {
    const c = new pg.Client({ connectionString: urlAs(APP) });
    await c.connect();
    try {
      for (const sql of [
        'create table intruder (id int)',
        'drop table agents',
        'alter table agents add column x int',
        'truncate knex_migrations',
        'delete from knex_migrations',
      ]) {
        await assert.rejects(c.query(sql), /permission denied|must be owner/, sql);
      }
      assert.ok((await c.query('select count(*) from agents')).rows[0]);
    } finally {
      await c.end();
    }
  });
});
