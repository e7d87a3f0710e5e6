/**
 * Instances on one database must share SECRETS_KEY: one started with another key refuses to start,
 * naming the variable, instead of answering 500 whenever it reads a secret. A database from before
 * the key's fingerprint was kept is judged by whether the key opens a stored secret.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startService, type RunningService } from '../../src/service.js';
import { SecretsKeyMismatchError } from '../../src/crypto/key-check.js';
import { createTestDatabase } from '../helpers/database.js';
import { SHARED_MACHINE_ENV } from '../helpers/service.js';
import { tenant } from '../helpers/fixtures.js';
import supertest from 'supertest';

const K1 = randomBytes(32).toString('base64');
const K2 = randomBytes(32).toString('base64');
let db: { url: string; drop(): Promise<void> };
const dirs: string[] = [];

before(async () => {
  db = await createTestDatabase();
});
after(async () => {
  await db.drop();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function start(secretsKey: string): Promise<RunningService> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-key-'));
  dirs.push(dataDir);
  const config = loadConfig({
    NODE_ENV: 'test',
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    SECRETS_KEY: secretsKey,
    SHUTDOWN_GRACE_MS: '500',
    ...SHARED_MACHINE_ENV,
  });
  return startService(config, createLogger('silent'));
}

describe('SECRETS_KEY across instances', () => {
  it('an instance with another key refuses to start; one with the same key starts and reads the secrets', async () => {
    const first = await start(K1);
    let secret: string;
    let apiKey: string;
    try {
      const tn = await tenant({ http: supertest(first.url) } as never);
      apiKey = tn.apiKey;
      secret = (await supertest(first.url).get('/api/v1/webhooks/secret').set('Authorization', `Bearer ${apiKey}`)).body.webhook_secret;
      assert.ok(secret);
    } finally {
      await first.close();
    }
    await assert.rejects(
      start(K2),
      (err: Error) =>
        err instanceof SecretsKeyMismatchError && /SECRETS_KEY differs/.test(err.message) && !err.message.includes(K1) && !err.message.includes(K2),
    );

    const again = await start(K1);
    try {
      const res = await supertest(again.url).get('/api/v1/webhooks/secret').set('Authorization', `Bearer ${apiKey}`);
      assert.equal(res.body.webhook_secret, secret);
    } finally {
      await again.close();
    }
  });

  it('a database whose fingerprint was never kept is judged by its stored secrets', async () => {
    const { createKnex } = await import('../../src/db/database.js');
    const knex = createKnex(db.url);
    try {
      await knex('service_settings').delete();
      await assert.rejects(start(K2), (err: Error) => err instanceof SecretsKeyMismatchError && /cannot open the secrets/.test(err.message));
      assert.equal(await knex('service_settings').first(), undefined, 'the wrong key is not recorded');
      const ok = await start(K1);
      await ok.close();
      assert.equal(Number((await knex('service_settings').count())[0].count), 1);
    } finally {
      await knex.destroy();
    }
  });
});
