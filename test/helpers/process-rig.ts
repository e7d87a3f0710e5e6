/**
 * What a test of service processes keeps in its own process, so that it outlives the service it kills
 * and restarts: sandbox carriers (speed 2), a webhook receiver, a database and a data directory, made
 * before the file's tests and removed after them; and the pieces such tests share (a receptionist
 * agent, the `call.completed` events of one conversation, one query on the database).
 */
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type supertest from 'supertest';
import { createTestDatabase } from './database.js';
import { startReceiver, type Receiver } from './webhooks.js';
import { providerConfig } from './calls.js';
import { startSandboxCarriers, type SandboxCarriers } from '../../src/sandbox/carriers/server.js';

export interface ProcessRig {
  carriers: SandboxCarriers;
  receiver: Receiver;
  db: { url: string; drop(): Promise<void> };
  dataDir: string;
  /** The `call.completed` events the receiver got for a conversation. */
  completedFor(conversationId: string): Array<Record<string, any>>;
  /** One statement on the rig's database, its rows. */
  query(sql: string, params: unknown[]): Promise<Array<Record<string, any>>>;
}

export function processRig(name: string): ProcessRig {
  const rig: ProcessRig = {
    dataDir: fs.mkdtempSync(path.join(os.tmpdir(), `vas-${name}-`)),
    completedFor: (id) =>
      rig.receiver.requests.map((r) => JSON.parse(r.rawBody.toString())).filter((e) => e.event === 'call.completed' && e.conversation_id === id),
    async query(sql, params) {
      const client = new pg.Client({ connectionString: rig.db.url });
      await client.connect();
      try {
        return (await client.query(sql, params)).rows;
      } finally {
        await client.end();
      }
    },
  } as ProcessRig;
  before(async () => {
    rig.carriers = await startSandboxCarriers({ speed: 2, ringMs: 50 });
    rig.receiver = await startReceiver();
    rig.db = await createTestDatabase();
  });
  after(async () => {
    await rig.carriers.close();
    await rig.receiver.close();
    await rig.db.drop();
    fs.rmSync(rig.dataDir, { recursive: true, force: true });
  });
  return rig;
}

/** A provider_a phone agent (Acme Dental's receptionist) of the workspace behind `auth`; its id. */
export async function createReceptionist(http: ReturnType<typeof supertest>, auth: Record<string, string>): Promise<string> {
  const agent = await http
    .post('/api/v1/agents')
    .set(auth)
    .send({
      name: 'Receptionist',
      instruction: 'You are the receptionist of Acme Dental.',
      first_message: 'Hello! This is Acme Dental.',
      ...providerConfig('provider_a'),
    });
  assert.equal(agent.status, 201, JSON.stringify(agent.body));
  return agent.body.agent_id as string;
}
