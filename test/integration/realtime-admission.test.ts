/**
 * Connection attempts before the upgrade: the per-address limit holds in any window of its length
 * (not per fixed window) and is shared by instances on one database; an attempt refused there (or
 * during shutdown) still uses up the token it names, as the spec says any attempt does.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant } from '../helpers/fixtures.js';
import { createAgent, expectRefusal, freshAddress, mintSession, upgradeRefusal } from '../helpers/realtime.js';

const WINDOW_MS = 4000;
let t: TestService;
before(async () => {
  t = await startTestService({ REALTIME_IP_ATTEMPTS: '20', REALTIME_IP_WINDOW_MS: String(WINDOW_MS) });
});
after(async () => {
  await t.close();
});

const wsUrl = (s: TestService, user = 'visitor-1', token = 'rts_' + 'x'.repeat(43)) => `${s.url.replace(/^http/, 'ws')}/ws/${user}?token=${token}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One attempt from `address`: true when it got through to the WebSocket (any close code), false on 429. */
async function attempt(s: TestService, address: string): Promise<boolean> {
  const r = await upgradeRefusal(wsUrl(s), address);
  if (r === 'accepted') return true;
  assert.equal(r.status, 429);
  return false;
}

describe('per-address connection attempts', () => {
  it('hold in any window: 19 attempts late in one window and 20 just after it let only the one that aged out through', async () => {
    const address = freshAddress();
    const start = Date.now();
    assert.equal(await attempt(t, address), true);
    await sleep(WINDOW_MS * 0.75);
    for (let i = 0; i < 19; i++) assert.equal(await attempt(t, address), true, `attempt ${i + 2}`);
    await sleep(Math.max(0, start + WINDOW_MS + 300 - Date.now()));
    let passed = 0;
    for (let i = 0; i < 20; i++) if (await attempt(t, address)) passed += 1;
    assert.equal(passed, 1, 'only the first attempt left the window (a fixed window would have let 20 through)');
  });

  it('are shared by two instances on one database', async () => {
    const t2 = await startTestService({ REALTIME_IP_ATTEMPTS: '4', REALTIME_IP_WINDOW_MS: '60000', DATABASE_URL: t.service.db.url });
    const t3 = await startTestService({ REALTIME_IP_ATTEMPTS: '4', REALTIME_IP_WINDOW_MS: '60000', DATABASE_URL: t.service.db.url });
    try {
      const address = freshAddress();
      assert.equal(await attempt(t2, address), true);
      assert.equal(await attempt(t3, address), true);
      assert.equal(await attempt(t2, address), true);
      assert.equal(await attempt(t3, address), true);
      assert.equal(await attempt(t2, address), false);
      assert.equal(await attempt(t3, address), false);
    } finally {
      await t3.close();
      await t2.close();
    }
  });

  it('an attempt refused by the limit uses up its token', async () => {
    const tn = await tenant(t);
    const agentId = await createAgent(t, tn);
    const address = freshAddress();
    for (let i = 0; i < 20; i++) await attempt(t, address);
    const minted = await mintSession(t, tn, agentId, 'text', 'visitor-1');
    const refused = await upgradeRefusal(minted.ws_url, address);
    assert.notEqual(refused, 'accepted');
    await expectRefusal(minted.ws_url, 4001, 'Invalid authentication token');
  });

  it('an attempt refused during shutdown uses up its token', async () => {
    const s = await startTestService();
    const tn = await tenant(s);
    const agentId = await createAgent(s, tn);
    const minted = await mintSession(s, tn, agentId, 'text', 'visitor-1');
    const hash = (await s.service.db.knex('realtime_tokens').where({ workspace_id: tn.workspaceId }).first()).token_hash;
    const draining = s.service.realtime.gateway.drain(Promise.resolve());
    const refused = await upgradeRefusal(minted.ws_url, freshAddress());
    assert.notEqual(refused, 'accepted');
    if (refused !== 'accepted') assert.equal(refused.status, 503);
    await draining;
    const row = await s.service.db.knex('realtime_tokens').where({ token_hash: hash }).first();
    assert.ok(row.used_at, 'the token is used');
    await s.close();
  });
});
