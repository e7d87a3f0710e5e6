/**
 * A user id is whatever a product uses to name its user (an email, a name with spaces, any script,
 * slashes), 1-128 printable characters: ws_url carries it percent-encoded, connecting with that URL
 * binds the session to it, and it comes back unchanged in session_started and the record. Control
 * characters, ids of only dots and over-long ids are refused with 422 and no token is issued.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, connect, createAgent, tokenCount, waitFor } from '../helpers/realtime.js';

let t: TestService;
let tn: Tenant;
let agentId: string;
before(async () => {
  t = await startTestService({ VOICE_SANDBOX_SPEED: '20', VOICE_SANDBOX_MS_PER_CHAR: '0' });
  tn = await tenant(t);
  agentId = await createAgent(t, tn);
});
after(async () => {
  await t.close();
});

const create = (user_id: unknown) => t.http.post('/api/v1/realtime/sessions').set(bearer(tn.apiKey)).send({ agent_id: agentId, user_id, source: 'text' });

describe('user ids', () => {
  for (const userId of ['ada@example.com', 'Ada Lovelace', 'Zoë 日本語 Ünïcode', 'team/ada', 'a?b#c%d&e=f', '..hidden', '😀'.repeat(64), 'x'.repeat(128)]) {
    it(`accepts ${JSON.stringify(userId.length > 20 ? userId.slice(0, 20) + '…' : userId)}, with a ws_url that connects as it`, async () => {
      const res = await create(userId);
      assert.equal(res.status, 201, res.text);
      const url = new URL(res.body.ws_url);
      assert.equal(decodeURIComponent(url.pathname.split('/').pop()!), userId);
      const c = connect(res.body.ws_url);
      const started = await c.next('session_started');
      assert.equal(started.user_id, userId);
      await c.close();
      const record = await waitFor(() => t.service.realtime.store.getConversation(String(started.session_id)), 5000, 'record');
      assert.equal(record.user_id, userId);
      const listed = await t.http.get('/api/v1/realtime/conversations').query({ user_id: userId }).set(bearer(tn.apiKey));
      assert.ok(listed.body.data.some((r: { conversation_id: string }) => r.conversation_id === started.session_id));
    });
  }

  it('refuses empty, dot-only, control-character and over-long ids with 422 user_id; no token is issued', async () => {
    const before = await tokenCount(t, tn.workspaceId);
    for (const userId of ['', '.', '..', 'a\u0000b', 'tab\there', 'line\nbreak', 'del\u007f', 'c1\u0085', 'x'.repeat(129), 42]) {
      const res = await create(userId);
      assert.equal(res.status, 422, `${JSON.stringify(userId)}: ${res.text}`);
      assert.equal(res.body.error.param, 'user_id');
    }
    assert.equal(await tokenCount(t, tn.workspaceId), before);
  });
});
