/**
 * A realtime token is good only while the credential that minted it is: revoking the API key (or
 * logging out the dashboard session) voids its unused tokens, which then close 4001; tokens of other
 * keys and sessions already connected are unaffected.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant } from '../helpers/fixtures.js';
import { bearer, connect, createAgent, expectRefusal, mintSession } from '../helpers/realtime.js';

let t: TestService;
before(async () => {
  t = await startTestService();
});
after(async () => {
  await t.close();
});

describe('realtime tokens follow their credential', () => {
  it("revoking an API key voids the tokens it minted; another key's token still connects", async () => {
    const tn = await tenant(t);
    const agentId = await createAgent(t, tn, {});
    const other = (await t.http.post('/api/v1/keys').set(bearer(tn.sessionToken)).send({ name: 'other' })).body.key as string;
    const minted = await mintSession(t, tn, agentId, 'text', 'u1');
    const live = connect((await mintSession(t, tn, agentId, 'text', 'u2')).ws_url);
    await live.next('session_started');
    const byOther = (await t.http.post('/api/v1/realtime/sessions').set(bearer(other)).send({ agent_id: agentId, user_id: 'u3', source: 'text' })).body;
    assert.equal((await t.http.delete(`/api/v1/keys/${tn.keyId}`).set(bearer(tn.sessionToken))).status, 200);
    await expectRefusal(minted.ws_url, 4001, 'Invalid authentication token');
    const c = connect(byOther.ws_url);
    await c.next('session_started');
    await c.close();
    assert.equal(live.ws.readyState, live.ws.OPEN, 'a session already connected goes on');
    await live.close();
  });

  it('logging out a dashboard session voids the tokens it minted', async () => {
    const tn = await tenant(t);
    const agentId = await createAgent(t, tn, {});
    const minted = (await t.http.post('/api/v1/realtime/sessions').set(bearer(tn.sessionToken)).send({ agent_id: agentId, user_id: 'u1', source: 'text' }))
      .body;
    assert.ok(minted.ws_url);
    assert.equal((await t.http.post('/api/v1/auth/logout').set(bearer(tn.sessionToken))).status < 300, true);
    await expectRefusal(minted.ws_url, 4001, 'Invalid authentication token');
  });
});
