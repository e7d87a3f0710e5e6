/**
 * Every code `session.start()` rejects with, provoked for real in headless Chromium: the customer's
 * token endpoint down, failing or giving no `ws_url`; a wrong token (4001); the workspace's concurrent
 * sessions (4029), subscription (4402), credit and plan minutes (4028); the camera turned off after
 * minting (4003); the voice service refusing the agent's model (4022) or failing to start (1011). And
 * `stop()` freeing the slot.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, createAgent, setWorkspace, waitFor } from '../helpers/realtime.js';
import { deadUrl, launchChromium, openCustomerPage, startCustomerSite, type CustomerPage, type CustomerSite } from '../helpers/browser.js';
import { REFUSED_MODEL } from '../../src/sandbox/voice/connection.js';

let t: TestService;
let site: CustomerSite;
let browser: Browser;
let p: CustomerPage;

before(async () => {
  t = await startTestService({
    REALTIME_PLAN_MINUTES: 'trial=600,starter=0',
    // A live session's lease renewal delayed by a loaded machine must not free its slot (see widget.test.ts).
    REALTIME_LEASE_HEARTBEAT_MS: '250',
    REALTIME_LEASE_EXPIRY_MS: '5000',
    VOICE_RETRY_MAX: '1',
    VOICE_RETRY_BASE_MS: '20',
    VOICE_CONNECT_TIMEOUT_MS: '1000',
    VOICE_MODELS: `gemini-live-2.5-flash-preview,${REFUSED_MODEL}`,
  });
  site = await startCustomerSite(t.url);
  browser = await launchChromium();
  p = await openCustomerPage(browser, site);
});
after(async () => {
  await browser?.close();
  await site?.close();
  await t?.close();
});

/** A fresh workspace whose key the customer's endpoint uses, with one agent. */
async function workspace(): Promise<{ a: Tenant; agentId: string }> {
  const a = await tenant(t);
  site.apiKey = a.apiKey;
  site.mode = 'pass';
  site.afterMint = null;
  return { a, agentId: await createAgent(t, a) };
}

async function leases(workspaceId: string): Promise<number> {
  const [{ count }] = await t.service.db
    .knex('session_leases')
    .where({ workspace_id: workspaceId })
    .where('expires_at', '>', new Date())
    .count<{ count: string }[]>('* as count');
  return Number(count);
}

/** Starts a session (from a click when it uses devices) and expects start() to reject with `code`. */
async function expectStartError(opts: Record<string, unknown>, code: string, closeCode?: number): Promise<Record<string, unknown>> {
  const i = await p.create(opts);
  const res = opts.source === 'text' ? await p.start(i) : await p.clickToStart(i);
  assert.equal(res.ok, false, `start() resolved: ${JSON.stringify(res)}`);
  assert.equal(res.code, code, JSON.stringify(res));
  assert.equal(res.isError, true);
  assert.equal(res.isVoiceAgentError, true);
  assert.equal(res.closeCode, closeCode);
  assert.equal(await p.call('state', i), 'closed');
  const events = await p.events(i);
  assert.deepEqual(
    events.filter((e) => e.e === 'state').map((e) => e.v),
    ['starting', 'closed'],
  );
  assert.ok(!events.some((e) => e.e === 'message'), 'no message before a refusal');
  return res;
}

describe('mint_failed: the token endpoint failed or gave no ws_url', () => {
  it('the endpoint is down', async () => {
    const { agentId } = await workspace();
    const res = await expectStartError({ tokenUrl: await deadUrl('/token'), agentId, userId: 'visitor-1', source: 'text' }, 'mint_failed');
    assert.match(String(res.message), /^The token endpoint failed: /);
  });

  it('the endpoint fails (it passes on the service refusing its API key: HTTP 401)', async () => {
    const { agentId } = await workspace();
    site.apiKey = 'vak_not_a_key';
    const before = site.requests.length;
    const res = await expectStartError({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-1', source: 'voice' }, 'mint_failed');
    assert.equal(res.message, 'The token endpoint answered HTTP 401.');
    assert.equal(site.requests.length, before + 1);
  });

  it('the endpoint answers without ws_url; getToken resolves without one', async () => {
    const { agentId } = await workspace();
    site.mode = 'no_ws_url';
    const res = await expectStartError({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-1', source: 'text' }, 'mint_failed');
    assert.equal(res.message, 'The token endpoint gave no ws_url.');
    for (const answer of [{}, { ws_url: '' }, { ws_url: 'https://example.com/ws/visitor-1' }, null]) {
      await expectStartError({ getTokenReturns: answer, agentId, userId: 'visitor-1', source: 'text' }, 'mint_failed');
    }
  });
});

describe('refusals of the realtime WebSocket (close codes)', () => {
  it('invalid_token (4001): a token the service never issued', async () => {
    const { agentId } = await workspace();
    site.mode = 'wrong_token';
    const res = await expectStartError({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-1', source: 'text' }, 'invalid_token', 4001);
    assert.match(String(res.message), /4001 Invalid authentication token/);
  });

  it('billing_blocked (4402): the subscription went past due after minting', async () => {
    const { a, agentId } = await workspace();
    site.afterMint = () => setWorkspace(t, a.workspaceId, { subscription_status: 'past_due' });
    const res = await expectStartError({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-1', source: 'voice' }, 'billing_blocked', 4402);
    assert.match(String(res.message), /4402 Service unavailable/);
  });

  it('limit_reached (4028): no credit left for a voice session; the plan minutes used up for a text session', async () => {
    const { a, agentId } = await workspace();
    site.afterMint = () => setWorkspace(t, a.workspaceId, { credit_balance_cents: 0 });
    const credit = await expectStartError({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-1', source: 'voice' }, 'limit_reached', 4028);
    assert.match(String(credit.message), /4028 Insufficient credits/);
    site.afterMint = () => setWorkspace(t, a.workspaceId, { plan: 'starter' });
    const plan = await expectStartError({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-1', source: 'text' }, 'limit_reached', 4028);
    assert.match(String(plan.message), /4028 Plan limit/);
  });

  it('source_not_enabled (4003): the camera was turned off on the agent after minting', async () => {
    const { a, agentId } = await workspace();
    site.afterMint = async () => {
      const res = await t.http
        .patch(`/api/v1/agents/${agentId}`)
        .set(bearer(a.apiKey))
        .send({ realtime: { enable_webcam: false } });
      assert.equal(res.status, 200);
    };
    const res = await expectStartError({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-1', source: 'camera' }, 'source_not_enabled', 4003);
    assert.match(String(res.message), /4003 Camera is not enabled for this agent/);
  });

  it("model_refused (4022): the voice service refused the agent's model; its slot goes back", async () => {
    const { a } = await workspace();
    const agentId = await createAgent(t, a, { model: REFUSED_MODEL });
    const res = await expectStartError({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-1', source: 'voice' }, 'model_refused', 4022);
    assert.match(String(res.message), /4022 Model refused/);
    assert.equal(await leases(a.workspaceId), 0);
  });

  it('server_error (1011): the agent session could not start', async () => {
    const { a, agentId } = await workspace();
    site.afterMint = async () => t.service.sandbox.voice!.setUnavailable(true);
    try {
      await expectStartError({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-1', source: 'voice' }, 'server_error', 1011);
    } finally {
      t.service.sandbox.voice!.setUnavailable(false);
    }
    assert.equal(await leases(a.workspaceId), 0);
  });

  it('rate_limited (4029) at the concurrent-session limit; stop() frees the slot for the next session', async () => {
    const { a, agentId } = await workspace();
    await setWorkspace(t, a.workspaceId, { concurrent_session_limit: 1 });
    const first = await p.create({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-1', source: 'voice' });
    assert.equal((await p.clickToStart(first)).ok, true);
    assert.equal(await leases(a.workspaceId), 1);

    const res = await expectStartError({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-2', source: 'text' }, 'rate_limited', 4029);
    assert.match(String(res.message), /4029 Too many concurrent sessions for your plan/);
    assert.equal(await p.call('state', first), 'live', 'the first session goes on');

    assert.equal(await p.call('stop', first), 'closed');
    assert.deepEqual((await p.waitForEvent(first, (e) => e.e === 'close')).v, { code: 1000, reason: '' });
    await waitFor(async () => (await leases(a.workspaceId)) === 0, 3000, 'the slot to be released');
    const next = await p.create({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-2', source: 'text' });
    assert.equal((await p.start(next)).ok, true, 'a new session starts in the freed slot');
    await p.call('stop', next);
  });
});

describe('stop() before the session started', () => {
  it('rejects start() with aborted and leaves no session behind', async () => {
    const { a, agentId } = await workspace();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    site.afterMint = () => held;
    const i = await p.create({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-1', source: 'text' });
    const pending = p.start(i);
    await waitFor(async () => (await p.call('state', i)) === 'starting', 3000, 'starting');
    const stopped = p.call('stop', i);
    release();
    assert.equal(await stopped, 'closed');
    const res = await pending;
    assert.deepEqual([res.ok, res.code], [false, 'aborted']);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(await leases(a.workspaceId), 0);
    const [{ count }] = await t.service.db.knex('realtime_conversations').where({ workspace_id: a.workspaceId }).count<{ count: string }[]>('* as count');
    assert.equal(Number(count), 0, 'no session was opened');
  });

  it('a session stopped before start() never starts: start() rejects with aborted and mints nothing', async () => {
    const { agentId } = await workspace();
    const before = site.requests.length;
    const i = await p.create({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-1', source: 'text' });
    assert.equal(await p.call('stop', i), 'closed');
    const res = await p.start(i);
    assert.deepEqual([res.ok, res.code, res.isVoiceAgentError], [false, 'aborted', true]);
    assert.equal(site.requests.length, before);
  });
});
