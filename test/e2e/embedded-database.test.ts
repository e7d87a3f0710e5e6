/**
 * The embedded default: the service started without DATABASE_URL runs its own PostgreSQL in DATA_DIR,
 * keeps data across restarts, reuses its own orphaned server, never a stranger's, and stops cleanly on SIGTERM.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import supertest from 'supertest';
import { freePort, startProcess } from '../helpers/process.js';
import { uniqueEmail } from '../helpers/fixtures.js';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-embedded-'));
fs.chmodSync(dataDir, 0o755);
after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

function postmasterPid(): number | null {
  try {
    return Number(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('embedded PostgreSQL', () => {
  it('keeps data across a graceful restart, reuses its own orphaned server, and refuses a stranger on the port', async () => {
    const pgPort = await freePort();
    const env = { DATA_DIR: dataDir, EMBEDDED_PG_PORT: String(pgPort) };
    const email = uniqueEmail();

    const first = await startProcess(env);
    let http = supertest(first.url);
    const signup = await http.post('/api/v1/auth/signup').send({ email, password: 'long-enough-pw', workspace_name: 'Embedded' });
    assert.equal(signup.status, 201);
    const key = await http.post('/api/v1/keys').set('Authorization', `Bearer ${signup.body.session_token}`).send({ name: 'survives' });
    assert.equal(key.status, 201);
    assert.equal(await first.stop('SIGTERM'), 0, first.output());
    assert.equal(postmasterPid() !== null && alive(postmasterPid()!), false, 'SIGTERM stops the embedded server too');

    const second = await startProcess(env);
    http = supertest(second.url);
    const login = await http.post('/api/v1/auth/login').send({ email, password: 'long-enough-pw' });
    assert.equal(login.status, 200, 'the account survived the restart');
    const keys = await http.get('/api/v1/keys').set('Authorization', `Bearer ${login.body.session_token}`);
    assert.deepEqual(
      keys.body.map((k: { name: string }) => k.name),
      ['survives'],
    );
    // A crash leaves the embedded server running; the next start reuses it because it is ours.
    await second.stop('SIGKILL');
    const orphan = postmasterPid();
    assert.ok(orphan && alive(orphan), 'the orphaned server is still running');

    const third = await startProcess(env);
    assert.match(third.output(), /reusing the embedded PostgreSQL/);
    const again = await supertest(third.url).post('/api/v1/auth/login').send({ email, password: 'long-enough-pw' });
    assert.equal(again.status, 200);
    assert.equal(await third.stop('SIGTERM'), 0);

    // Another server on the port that is not ours: start-up refuses, naming the setting.
    const stranger = net.createServer().listen(pgPort, '127.0.0.1');
    await new Promise((r) => stranger.once('listening', r));
    try {
      await assert.rejects(startProcess(env), /EMBEDDED_PG_PORT/);
    } finally {
      stranger.close();
    }
  });
});

describe('start-up configuration', () => {
  it('stops with a message naming a bad variable', async () => {
    await assert.rejects(startProcess({ DATA_DIR: dataDir, PORT: 'eighty' }), /PORT/);
  });
});
