/** The instance's one LISTEN connection (src/db/listener.ts): every channel on it, a channel added while listening, a lost connection re-opened with every channel. */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import pino from 'pino';
import { createTestDatabase } from '../helpers/database.js';
import { waitFor } from '../helpers/realtime.js';
import { Listener } from '../../src/db/listener.js';

describe('one LISTEN connection for every channel', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let sql: pg.Client;
  let listener: Listener;
  const heard: Array<[string, string | undefined]> = [];
  const listening: string[] = [];
  const notify = (channel: string, payload: string) => sql.query('select pg_notify($1, $2)', [channel, payload]);
  const connections = async () =>
    (await sql.query<{ pid: number }>(`select pid from pg_stat_activity where datname = current_database() and application_name = 'vas-listen'`)).rows.map(
      (r) => r.pid,
    );

  before(async () => {
    db = await createTestDatabase();
    sql = new pg.Client({ connectionString: db.url });
    await sql.connect();
    listener = new Listener(db.url, pino({ level: 'silent' }), { retryMs: 50 });
    for (const channel of ['first_channel', 'second_channel']) {
      listener.on(channel, (payload) => heard.push([channel, payload]), { onListening: () => listening.push(channel) });
    }
  });
  after(async () => {
    await listener.stop();
    await sql.end();
    await db.drop();
  });

  it('listens on every registered channel over one connection, each handler told when it is listening', async () => {
    assert.equal(listener.listening, false);
    await listener.start();
    assert.equal(listener.listening, true);
    assert.deepEqual(listening, ['first_channel', 'second_channel']);
    assert.equal((await connections()).length, 1);
    await notify('first_channel', 'one');
    await notify('second_channel', 'two');
    await notify('unheard_channel', 'three');
    await waitFor(async () => (heard.length >= 2 ? true : null), 5000, 'both notifications');
    assert.deepEqual(heard, [
      ['first_channel', 'one'],
      ['second_channel', 'two'],
    ]);
  });

  it('a channel registered while listening is listened on at once, on the same connection; a failing handler does not stop the others', async () => {
    const late: Array<string | undefined> = [];
    let told = false;
    listener.on('first_channel', () => {
      throw new Error('a handler that fails');
    });
    listener.on('late_channel', (payload) => late.push(payload), { onListening: () => (told = true) });
    await waitFor(async () => (told ? true : null), 5000, 'the late channel to be listened on');
    heard.length = 0;
    await notify('late_channel', 'late');
    await notify('first_channel', 'still');
    await waitFor(async () => (late.length && heard.length ? true : null), 5000, 'the late notification');
    assert.deepEqual(late, ['late']);
    assert.deepEqual(heard, [['first_channel', 'still']]);
    assert.equal((await connections()).length, 1);
  });

  it('a connection the database drops is opened again with every channel, and every handler is told', async () => {
    const [pid] = await connections();
    listening.length = 0;
    await sql.query('select pg_terminate_backend($1)', [pid]);
    await waitFor(async () => (listening.length === 2 ? true : null), 5000, 'listening again');
    const now = await connections();
    assert.equal(now.length, 1);
    assert.notEqual(now[0], pid);
    heard.length = 0;
    await notify('second_channel', 'again');
    await waitFor(async () => (heard.length ? true : null), 5000, 'a notification after the reconnect');
    assert.deepEqual(heard, [['second_channel', 'again']]);
  });
});
