/**
 * The slot heartbeat (src/workspaces/slots.ts) against PostgreSQL: one beat at a time, and `stop()`
 * returns only once the beat under way has finished, so no beat touches a lease after it (a beat that
 * outlived `stop()` once took back a lease deleted after it, and an admission expected to find the
 * slot free was refused).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import type { Knex } from 'knex';
import { createKnex } from '../../src/db/database.js';
import { AdmissionStore } from '../../src/workspaces/admission-store.js';
import { SlotKeeper } from '../../src/workspaces/slots.js';
import { monthStart } from '../../src/workspaces/admission.js';
import { createTestDatabase } from '../helpers/database.js';
import { waitFor } from '../helpers/realtime.js';

const log = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let db: { url: string; drop(): Promise<void> };
let knex: Knex;

before(async () => {
  db = await createTestDatabase();
  knex = createKnex(db.url, { min: 0, max: 6 });
});

after(async () => {
  await knex.destroy();
  await db.drop();
});

/** Reservation renewals of this database waiting for a row lock now. */
const blockedRenewals = async (): Promise<number> => {
  const { rows } = await knex.raw<{ rows: Array<{ n: number }> }>(
    `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like 'update "reservations"%'`,
  );
  return rows[0].n;
};

describe('the slot heartbeat', () => {
  it('runs one beat at a time, and stop() returns only after the beat under way, which may still take back a deleted lease', async () => {
    const workspaceId = `ws_beat_${process.pid}_${Date.now()}`;
    await knex('workspaces').insert({
      id: workspaceId,
      name: 'Heartbeat',
      plan: 'enterprise',
      subscription_status: 'active',
      credit_balance_cents: 10_000,
      concurrent_session_limit: 1,
    });
    const keeper = new SlotKeeper(new AdmissionStore(knex), { instanceId: 'inst_beat', heartbeatMs: 60_000, expiryMs: 30_000 }, log);
    const admitted = await keeper.admit('sess_beat', workspaceId, 1, {
      kind: 'web_session',
      centsPerMinute: 1,
      minuteSeconds: 60,
      wantMinutes: 2,
      planSeconds: null,
      monthStart: monthStart(new Date()),
      expiryMs: 60_000,
    });
    assert.equal(typeof admitted, 'object', `admitted: ${JSON.stringify(admitted)}`);

    // Holding the session's reservation row stops a beat at its first statement.
    const hold = await knex.transaction();
    let stopped = false;
    try {
      await hold('reservations').where({ id: 'sess_beat' }).forUpdate().first();
      const first = keeper.heartbeat();
      const second = keeper.heartbeat();
      await waitFor(async () => (await blockedRenewals()) === 1, 3000, 'the first beat to wait for the row');
      await sleep(100);
      assert.equal(await blockedRenewals(), 1, 'the second beat waits for the first, not for the row');
      const stopping = keeper.stop().then(() => {
        stopped = true;
      });
      await sleep(100);
      assert.equal(stopped, false, 'stop() waits for the beats under way');
      // Meanwhile the lease goes (another instance took it for expired).
      await knex('session_leases').where({ id: 'sess_beat' }).delete();
      await hold.commit();
      await Promise.all([first, second, stopping]);
    } finally {
      if (!hold.isCompleted()) await hold.rollback();
    }
    assert.ok(await knex('session_leases').where({ id: 'sess_beat' }).first(), 'the beat under way found it gone and took it back before stop() returned');

    // Stopped: nothing renews or takes back the lease any more.
    await knex('session_leases').where({ id: 'sess_beat' }).delete();
    await sleep(200);
    assert.equal(await knex('session_leases').where({ id: 'sess_beat' }).first(), undefined, 'a deleted lease stays deleted after stop()');
    await keeper.settled('sess_beat', { releaseReservation: true });
  });
});
