/**
 * A web session's first message is recorded and reported as the agent said it: with its placeholders
 * filled from the agent's defaults (the contract says "after variable substitution").
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, connect, createAgent, mintSession, waitFor } from '../helpers/realtime.js';

let t: TestService;
let tn: Tenant;

before(async () => {
  t = await startTestService({ VOICE_SANDBOX_SPEED: '4', VOICE_SANDBOX_MS_PER_CHAR: '20' });
  tn = await tenant(t);
});

after(async () => {
  await t.close();
});

describe('web session first message', () => {
  it('is stored and read back with its placeholders filled', async () => {
    const agentId = await createAgent(t, tn, {
      first_message: 'Hello {{visitor}}, welcome to {{clinic}}!',
      variable_placeholders: { visitor: 'friend', clinic: 'Acme Dental' },
    });
    const c = connect((await mintSession(t, tn, agentId, 'text')).ws_url);
    const started = await c.next('session_started');
    const first = await c.next('text');
    assert.equal(first.text, 'Hello friend, welcome to Acme Dental!');
    await c.next('turn_complete');
    await c.close();
    const record = await waitFor(
      async () => {
        const res = await t.http.get(`/api/v1/realtime/conversations/${started.session_id}`).set(bearer(tn.apiKey));
        return res.status === 200 ? res.body : null;
      },
      5000,
      'the record',
    );
    assert.equal(record.first_message, 'Hello friend, welcome to Acme Dental!');
    assert.equal(record.first_message_delivered, true);
  });
});
