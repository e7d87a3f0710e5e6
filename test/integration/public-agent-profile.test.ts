/**
 * GET /api/v1/public/agents/{agent_id}: the agent's name and realtime settings for the web widget, read
 * without credentials from any origin, and nothing else of the agent; unknown and malformed ids 404;
 * CORS open on this path only; cacheable briefly.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';

let t: TestService;
let a: Tenant;

before(async () => {
  t = await startTestService();
  a = await tenant(t);
});
after(() => t.close());

const SITE = 'https://shop.example';
const profileUrl = (id: string) => `/api/v1/public/agents/${id}`;

async function createAgent(body: Record<string, unknown>): Promise<string> {
  const res = await t.http.post('/api/v1/agents').set(bearer(a.apiKey)).send(body);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.agent_id as string;
}

describe('the public profile of an agent', () => {
  it('answers without credentials with exactly agent_id, name and realtime; nothing else of the agent', async () => {
    const secrets = {
      instruction: 'You are Maya from Bright Smile Dental. The door code is 4711.',
      first_message: 'Hi, this is Maya from Bright Smile Dental.',
      description: 'Internal: confirms appointments.',
      transfer_phone_number: '+14155550123',
      variable_placeholders: { patient_name: 'there' },
    };
    const agentId = await createAgent({
      name: 'Maya at Bright Smile',
      ...secrets,
      provider_a_config: { account_sid: 'AC0123456789abcdef0123456789abcdef', auth_token: '9f8e7d6c5b4a39281706f5e4d3c2b1a0', phone_number: '+14155550100' },
      realtime: { enable_webcam: false, enable_screen_share: true },
    });
    const res = await t.http.get(profileUrl(agentId)).set('Origin', SITE);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body, { agent_id: agentId, name: 'Maya at Bright Smile', realtime: { enable_webcam: false, enable_screen_share: true } });
    assert.deepEqual(Object.keys(res.body).sort(), ['agent_id', 'name', 'realtime']);
    assert.deepEqual(Object.keys(res.body.realtime).sort(), ['enable_screen_share', 'enable_webcam']);
    for (const secret of [
      ...Object.values(secrets).flatMap((v) => (typeof v === 'string' ? [v] : Object.values(v))),
      'AC0123456789abcdef',
      '9f8e7d6c5b4a',
      '+14155550100',
      a.workspaceId,
      'door code',
    ]) {
      assert.ok(!res.text.includes(secret), `the profile shows ${secret}`);
    }

    assert.equal(res.headers['access-control-allow-origin'], '*');
    assert.equal(res.headers['access-control-allow-credentials'], undefined);
    assert.equal(res.headers['cache-control'], 'public, max-age=60');
    assert.match(res.headers['content-type'], /^application\/json/);
  });

  it('follows the agent: a change of name or realtime settings shows, a deleted agent answers 404', async () => {
    const agentId = await createAgent({ name: 'Front desk' });
    assert.deepEqual((await t.http.get(profileUrl(agentId))).body.realtime, { enable_webcam: true, enable_screen_share: true }, 'both default to enabled');

    const patched = await t.http
      .patch(`/api/v1/agents/${agentId}`)
      .set(bearer(a.apiKey))
      .send({ name: 'Reception', realtime: { enable_webcam: false } });
    assert.equal(patched.status, 200, JSON.stringify(patched.body));
    assert.deepEqual((await t.http.get(profileUrl(agentId))).body, {
      agent_id: agentId,
      name: 'Reception',
      realtime: { enable_webcam: false, enable_screen_share: true },
    });

    assert.equal((await t.http.delete(`/api/v1/agents/${agentId}`).set(bearer(a.apiKey))).status, 200);
    const gone = await t.http.get(profileUrl(agentId));
    assert.equal(gone.status, 404);
    assert.equal(gone.body.error.code, 'agent_not_found');
  });

  it('takes no credentials: the answer is the same with none, an API key, or a wrong token', async () => {
    const agentId = await createAgent({ name: 'Anyone may ask' });
    const none = await t.http.get(profileUrl(agentId));
    const key = await t.http.get(profileUrl(agentId)).set(bearer(a.apiKey));
    const wrong = await t.http.get(profileUrl(agentId)).set(bearer('ek_not_a_key'));
    for (const res of [none, key, wrong]) {
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(res.body, none.body);
    }
  });

  it('an unknown or malformed id answers 404 agent_not_found in the envelope, readable by any origin; a too long id 422', async () => {
    const unknown = 'agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8V';
    for (const id of [unknown, 'agt_nope', 'call_01JD5Z7Q8Y1C2B3A4N5M6K7P8V', 'agt_01jd5z7q8y1c2b3a4n5m6k7p8v', encodeURIComponent("agt_' or 1=1 --")]) {
      const res = await t.http.get(profileUrl(id)).set('Origin', SITE);
      assert.equal(res.status, 404, `${id}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'agent_not_found');
      assert.equal(res.body.error.type, 'not_found_error');
      assert.equal(res.body.error.param, 'agent_id');
      assert.match(res.body.error.request_id, /^req_/);
      assert.equal(res.headers['access-control-allow-origin'], '*', 'the widget can tell a 404 from a network failure');
      assert.equal(res.headers['cache-control'], undefined, 'a 404 is not cached');
    }
    const long = await t.http.get(profileUrl(`agt_${'A'.repeat(61)}`)).set('Origin', SITE);
    assert.equal(long.status, 422, JSON.stringify(long.body));
    assert.equal(long.headers['access-control-allow-origin'], '*');
  });

  it('is a read: other methods answer 405', async () => {
    const agentId = await createAgent({ name: 'Read only' });
    for (const method of ['post', 'patch', 'delete'] as const) {
      const res = await t.http[method](profileUrl(agentId)).set('Origin', SITE);
      assert.equal(res.status, 405, `${method}: ${JSON.stringify(res.body)}`);
      assert.equal(res.headers.allow, 'GET, HEAD', 'HEAD wherever GET (RFC 9110)');
    }
  });
});

describe('agent ids cannot be guessed from other ids', () => {
  it('an agent id is not a request id (given to every caller) or another agent id of the same millisecond plus a little', async () => {
    const B32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
    const parts = (id: string) => {
      const u = id.slice(id.indexOf('_') + 1);
      return { time: u.slice(0, 10), random: [...u.slice(10)].reduce((n, c) => n * 32n + BigInt(B32.indexOf(c)), 0n) };
    };
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        t.http
          .post('/api/v1/agents')
          .set(bearer(a.apiKey))
          .send({ name: `Guess me ${i}` }),
      ),
    );
    const agents = answers.map((r) => parts(r.body.agent_id as string));
    const others = [...answers.map((r) => parts(r.headers['x-request-id'] as string)), ...agents];
    let sameMillisecond = 0;
    for (const agent of agents) {
      for (const other of others) {
        if (other === agent || other.time !== agent.time) continue;
        sameMillisecond++;
        const gap = agent.random > other.random ? agent.random - other.random : other.random - agent.random;
        assert.ok(gap > 1_000_000n, `an agent id is ${gap} away from an id of the same millisecond`);
      }
    }
    console.log(`  (${sameMillisecond} same-millisecond pairs compared)`);
  });
});

describe('CORS: open on the public path only', () => {
  it('a preflight from any origin is answered for the public path; the developer API still refuses that origin', async () => {
    const agentId = await createAgent({ name: 'Preflight' });
    const pre = await t.http
      .options(profileUrl(agentId))
      .set('Origin', SITE)
      .set('Access-Control-Request-Method', 'GET')
      .set('Access-Control-Request-Headers', 'x-request-id');
    assert.equal(pre.status, 204);
    assert.equal(pre.headers['access-control-allow-origin'], '*');
    assert.match(pre.headers['access-control-allow-methods'], /\bGET\b/);
    assert.doesNotMatch(pre.headers['access-control-allow-methods'], /POST|PATCH|DELETE/);
    assert.doesNotMatch(pre.headers['access-control-allow-headers'] ?? '', /authorization/i, 'no credentials on the public path');

    const apiPre = await t.http.options(`/api/v1/agents/${agentId}`).set('Origin', SITE).set('Access-Control-Request-Method', 'GET');
    assert.equal(apiPre.status, 403);
    assert.equal(apiPre.body.error.code, 'origin_not_allowed');
    const apiGet = await t.http.get(`/api/v1/agents/${agentId}`).set('Origin', SITE).set(bearer(a.apiKey));
    assert.equal(apiGet.status, 200);
    assert.equal(apiGet.headers['access-control-allow-origin'], undefined, 'the developer API gives that origin no CORS headers');
  });
});
