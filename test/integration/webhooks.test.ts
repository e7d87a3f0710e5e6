/** The webhook registry, the signing secret and its rotation, over the real API and database. */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/webhooks.js';

let t: TestService;
before(async () => {
  t = await startTestService();
});
after(() => t.close());

const rows = (workspaceId: string) => t.service.db.knex('webhooks').where({ workspace_id: workspaceId }).orderBy('id');
const register = (tn: Tenant, body: unknown) =>
  t.http
    .post('/api/v1/webhooks')
    .set(bearer(tn.apiKey))
    .send(body as object);

describe('webhook registry', () => {
  it('registers a URL for both events by default, lists it, and answers 200 with the same webhook on re-registration', async () => {
    const tn = await tenant(t);
    const created = await register(tn, { url: 'http://127.0.0.1:9/hooks/voice' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.match(created.body.webhook_id, /^whk_[0-9A-Z]{26}$/);
    assert.deepEqual(created.body.events, ['call.completed', 'batch.completed']);
    assert.equal(created.body.url, 'http://127.0.0.1:9/hooks/voice');

    // Same URL after normalisation (scheme/host case, default port): the existing webhook, events kept.
    const again = await register(tn, { url: 'HTTP://127.0.0.1:9/hooks/voice' });
    assert.equal(again.status, 200);
    assert.deepEqual(again.body, created.body);

    // With another events list too: nothing changes, the existing webhook comes back as it is.
    const withEvents = await register(tn, { url: 'http://127.0.0.1:9/hooks/voice', events: ['batch.completed'] });
    assert.equal(withEvents.status, 200);
    assert.deepEqual(withEvents.body, created.body);
    assert.equal((await rows(tn.workspaceId)).length, 1);
    assert.deepEqual((await rows(tn.workspaceId))[0].events, ['call.completed', 'batch.completed']);

    const list = await t.http.get('/api/v1/webhooks').set(bearer(tn.apiKey));
    assert.equal(list.status, 200);
    assert.deepEqual(list.body, { object: 'list', data: [created.body], has_more: false, next_cursor: null });
  });

  it("changes a webhook's events with PATCH, and only its own workspace's", async () => {
    const tn = await tenant(t);
    const created = await register(tn, { url: 'http://127.0.0.1:9/hooks/patch' });
    const patch = (key: string, id: string, body: unknown) =>
      t.http
        .patch(`/api/v1/webhooks/${id}`)
        .set(bearer(key))
        .send(body as object);
    const narrowed = await patch(tn.apiKey, created.body.webhook_id, { events: ['batch.completed'] });
    assert.equal(narrowed.status, 200, JSON.stringify(narrowed.body));
    assert.deepEqual(narrowed.body, { ...created.body, events: ['batch.completed'] });
    const list = await t.http.get('/api/v1/webhooks').set(bearer(tn.apiKey));
    assert.deepEqual(list.body.data, [narrowed.body]);

    for (const [body, param] of [
      [{}, 'events'],
      [{ events: [] }, 'events'],
      [{ events: ['call.started'] }, 'events'],
      [{ events: ['call.completed'], url: 'http://127.0.0.1:9/other' }, 'url'],
    ] as const) {
      const res = await patch(tn.apiKey, created.body.webhook_id, body);
      assert.equal(res.status, 422, JSON.stringify(body));
      assert.ok(String(res.body.error.param).startsWith(param), `${JSON.stringify(body)}: param ${res.body.error.param}`);
    }
    const other = await tenant(t);
    const foreign = await patch(other.apiKey, created.body.webhook_id, { events: ['call.completed'] });
    assert.equal(foreign.status, 403);
    const missing = await patch(tn.apiKey, 'whk_00000000000000000000000000', { events: ['call.completed'] });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'webhook_not_found');
    assert.deepEqual((await rows(tn.workspaceId))[0].events, ['batch.completed'], 'refused changes left the events as they were');
  });

  it('treats a default port and an empty path as the same URL', async () => {
    const tn = await tenant(t);
    const a = await register(tn, { url: 'http://localhost/' });
    const b = await register(tn, { url: 'http://LOCALHOST:80' });
    assert.equal(a.status, 201);
    assert.equal(b.status, 200);
    assert.equal(b.body.webhook_id, a.body.webhook_id);
  });

  it('refuses bad bodies and URLs with 422 and stores nothing', async () => {
    const tn = await tenant(t);
    const cases: Array<[unknown, string, string | null]> = [
      [{}, 'url', null],
      [{ url: 'https://example.com/h', extra: 1 }, 'extra', null],
      [{ url: 'https://example.com/h', events: ['call.started'] }, 'events', null],
      [{ url: 'https://example.com/h', events: [] }, 'events', null],
      [{ url: 'https://example.com/h', events: ['call.completed', 'call.completed'] }, 'events', null],
      [{ url: '/relative/path' }, 'url', 'invalid_value'],
      [{ url: 'ftp://example.com/hook' }, 'url', 'invalid_value'],
      [{ url: 'https://exa mple.com/hook' }, 'url', 'invalid_value'],
      [{ url: 'https://user:pass@example.com/hook' }, 'url', 'url_not_allowed'],
      [{ url: 'http://0.0.0.0:8080/hook' }, 'url', 'url_not_allowed'],
      [{ url: 'http://[ff02::1]/hook' }, 'url', 'url_not_allowed'],
    ];
    for (const [body, param, code] of cases) {
      const res = await register(tn, body);
      assert.equal(res.status, 422, `${JSON.stringify(body)} -> ${res.status} ${JSON.stringify(res.body)}`);
      assert.ok(String(res.body.error.param).startsWith(param), `${JSON.stringify(body)}: param ${res.body.error.param}`);
      if (code) assert.equal(res.body.error.code, code);
    }
    assert.equal((await rows(tn.workspaceId)).length, 0);
  });

  it('accepts a host name that does not resolve yet (every delivery checks the address again)', async () => {
    const tn = await tenant(t);
    const res = await register(tn, { url: 'https://hooks.invalid/voice' });
    assert.equal(res.status, 201);
  });

  it('allows 20 webhooks per workspace: the 21st is refused, re-registering one still works, deleting frees a place', async () => {
    const tn = await tenant(t);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const res = await register(tn, { url: `http://127.0.0.1:9/hook/${i}` });
      assert.equal(res.status, 201);
      ids.push(res.body.webhook_id);
    }
    const refused = await register(tn, { url: 'http://127.0.0.1:9/hook/20' });
    assert.equal(refused.status, 422);
    assert.equal(refused.body.error.code, 'webhook_limit_reached');
    assert.match(refused.body.error.message, /20/);
    assert.equal((await rows(tn.workspaceId)).length, 20);

    const existing = await register(tn, { url: 'http://127.0.0.1:9/hook/3', events: ['call.completed'] });
    assert.equal(existing.status, 200);
    assert.equal(existing.body.webhook_id, ids[3]);
    assert.deepEqual(existing.body.events, ['call.completed', 'batch.completed'], 'unchanged');

    // Another workspace has its own 20.
    const other = await tenant(t);
    assert.equal((await register(other, { url: 'http://127.0.0.1:9/hook/20' })).status, 201);

    assert.equal((await t.http.delete(`/api/v1/webhooks/${ids[0]}`).set(bearer(tn.apiKey))).status, 200);
    assert.equal((await register(tn, { url: 'http://127.0.0.1:9/hook/20' })).status, 201);
  });

  it('holds the limit under concurrent registrations', async () => {
    const tn = await tenant(t);
    const results = await Promise.all(Array.from({ length: 25 }, (_, i) => register(tn, { url: `http://127.0.0.1:9/c/${i}` })));
    assert.equal(results.filter((r) => r.status === 201).length, 20);
    assert.equal(results.filter((r) => r.status === 422 && r.body.error.code === 'webhook_limit_reached').length, 5);
    assert.equal((await rows(tn.workspaceId)).length, 20);
  });

  it('pages the list newest first', async () => {
    const tn = await tenant(t);
    for (let i = 0; i < 3; i++) await register(tn, { url: `http://127.0.0.1:9/p/${i}` });
    const first = await t.http.get('/api/v1/webhooks?limit=2').set(bearer(tn.apiKey));
    assert.equal(first.status, 200);
    assert.equal(first.body.data.length, 2);
    assert.equal(first.body.has_more, true);
    assert.equal(first.body.data[0].url, 'http://127.0.0.1:9/p/2');
    const second = await t.http.get(`/api/v1/webhooks?limit=2&starting_after=${first.body.next_cursor}`).set(bearer(tn.apiKey));
    assert.deepEqual(
      second.body.data.map((w: { url: string }) => w.url),
      ['http://127.0.0.1:9/p/0'],
    );
    assert.equal(second.body.has_more, false);
  });

  it("deletes a webhook; another workspace's is 403, an unknown one 404, a malformed id 422, and nothing changes", async () => {
    const tn = await tenant(t);
    const other = await tenant(t);
    const mine = (await register(tn, { url: 'http://127.0.0.1:9/del' })).body;
    const theirs = (await register(other, { url: 'http://127.0.0.1:9/del' })).body;

    const forbidden = await t.http.delete(`/api/v1/webhooks/${theirs.webhook_id}`).set(bearer(tn.apiKey));
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.body.error.code, 'forbidden');
    const unknown = await t.http.delete('/api/v1/webhooks/whk_01JD5ZA1B2C3D4E5F6G7H8J9K0').set(bearer(tn.apiKey));
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, 'webhook_not_found');
    const malformed = await t.http.delete('/api/v1/webhooks/not-an-id').set(bearer(tn.apiKey));
    assert.equal(malformed.status, 422);
    assert.equal((await rows(other.workspaceId)).length, 1);
    assert.equal((await rows(tn.workspaceId)).length, 1);

    const deleted = await t.http.delete(`/api/v1/webhooks/${mine.webhook_id}`).set(bearer(tn.apiKey));
    assert.equal(deleted.status, 200);
    assert.deepEqual(deleted.body, { status: 'deleted', webhook_id: mine.webhook_id });
    assert.equal((await rows(tn.workspaceId)).length, 0);
    assert.equal((await t.http.delete(`/api/v1/webhooks/${mine.webhook_id}`).set(bearer(tn.apiKey))).status, 404);
    const list = await t.http.get('/api/v1/webhooks').set(bearer(tn.apiKey));
    assert.deepEqual(list.body.data, []);
  });

  it('lists deliveries only of an existing webhook of the workspace', async () => {
    const tn = await tenant(t);
    const other = await tenant(t);
    const mine = (await register(tn, { url: 'http://127.0.0.1:9/dl' })).body;
    const theirs = (await register(other, { url: 'http://127.0.0.1:9/dl' })).body;
    const empty = await t.http.get(`/api/v1/webhooks/${mine.webhook_id}/deliveries`).set(bearer(tn.apiKey));
    assert.equal(empty.status, 200);
    assert.deepEqual(empty.body, { object: 'list', data: [], has_more: false, next_cursor: null });
    assert.equal((await t.http.get(`/api/v1/webhooks/${theirs.webhook_id}/deliveries`).set(bearer(tn.apiKey))).status, 403);
    assert.equal((await t.http.get('/api/v1/webhooks/whk_01JD5ZA1B2C3D4E5F6G7H8J9K0/deliveries').set(bearer(tn.apiKey))).status, 404);
    assert.equal((await t.http.get('/api/v1/webhooks/whk_x/deliveries').set(bearer(tn.apiKey))).status, 422);
  });

  it('requires credentials on every webhook route', async () => {
    const tn = await tenant(t);
    for (const res of [
      await t.http.post('/api/v1/webhooks').send({ url: 'http://127.0.0.1:9/x' }),
      await t.http.get('/api/v1/webhooks'),
      await t.http.get('/api/v1/webhooks/secret'),
      await t.http.post('/api/v1/webhooks/secret/rotate'),
      await t.http.get('/api/v1/webhooks/secret').set(bearer(`ds_${'x'.repeat(43)}`)),
    ]) {
      assert.equal(res.status, 401);
      assert.equal(res.body.error.code, 'unauthorized');
    }
    assert.equal((await rows(tn.workspaceId)).length, 0);
    assert.equal(await t.service.db.knex('webhook_secrets').where({ workspace_id: tn.workspaceId }).first(), undefined);
  });
});

describe('webhook secret', () => {
  it('is created on first read, the same on every read, sealed at rest, different per workspace, and never logged', async () => {
    const tn = await tenant(t);
    const first = await t.http.get('/api/v1/webhooks/secret').set(bearer(tn.apiKey));
    assert.equal(first.status, 200);
    assert.match(first.body.webhook_secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(Buffer.from(first.body.webhook_secret.slice(6), 'base64').length, 32);
    for (let i = 0; i < 3; i++) {
      assert.equal((await t.http.get('/api/v1/webhooks/secret').set(bearer(tn.apiKey))).body.webhook_secret, first.body.webhook_secret);
    }
    const row = await t.service.db.knex('webhook_secrets').where({ workspace_id: tn.workspaceId }).first();
    assert.ok(row.secret_sealed.startsWith('v2.'));
    assert.ok(!JSON.stringify(row).includes(first.body.webhook_secret.slice(6)), 'the secret is not stored in clear');
    assert.equal(t.service.secrets.open(row.secret_sealed, `webhook_secrets/${tn.workspaceId}`), first.body.webhook_secret);

    const other = await tenant(t);
    const theirs = await t.http.get('/api/v1/webhooks/secret').set(bearer(other.apiKey));
    assert.notEqual(theirs.body.webhook_secret, first.body.webhook_secret);
    assert.ok(!t.logs.join('').includes(first.body.webhook_secret.slice(6)), 'the secret is not logged');
  });

  it('rotates: a new secret, the previous kept for 24 hours, only the latest replaced secret stays previous', async () => {
    const tn = await tenant(t);
    const original = (await t.http.get('/api/v1/webhooks/secret').set(bearer(tn.apiKey))).body.webhook_secret;
    const before = Date.now();
    const rotated = await t.http.post('/api/v1/webhooks/secret/rotate').set(bearer(tn.apiKey));
    assert.equal(rotated.status, 200);
    assert.match(rotated.body.webhook_secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.notEqual(rotated.body.webhook_secret, original);
    const expires = Date.parse(rotated.body.previous_secret_expires_at);
    assert.ok(Math.abs(expires - (before + 24 * 3600 * 1000)) < 60_000, rotated.body.previous_secret_expires_at);
    assert.equal((await t.http.get('/api/v1/webhooks/secret').set(bearer(tn.apiKey))).body.webhook_secret, rotated.body.webhook_secret);

    let row = await t.service.db.knex('webhook_secrets').where({ workspace_id: tn.workspaceId }).first();
    assert.equal(t.service.secrets.open(row.previous_secret_sealed, `webhook_secrets/${tn.workspaceId}`), original);
    assert.deepEqual(await t.service.webhooks.signingSecrets(tn.workspaceId), [rotated.body.webhook_secret, original]);

    const again = await t.http.post('/api/v1/webhooks/secret/rotate').set(bearer(tn.apiKey));
    row = await t.service.db.knex('webhook_secrets').where({ workspace_id: tn.workspaceId }).first();
    assert.equal(t.service.secrets.open(row.previous_secret_sealed, `webhook_secrets/${tn.workspaceId}`), rotated.body.webhook_secret);
    assert.deepEqual(await t.service.webhooks.signingSecrets(tn.workspaceId), [again.body.webhook_secret, rotated.body.webhook_secret]);
  });

  it('rotating before any read creates the secret and answers like a rotation', async () => {
    const tn = await tenant(t);
    const rotated = await t.http.post('/api/v1/webhooks/secret/rotate').set(bearer(tn.apiKey));
    assert.equal(rotated.status, 200);
    assert.equal((await t.http.get('/api/v1/webhooks/secret').set(bearer(tn.apiKey))).body.webhook_secret, rotated.body.webhook_secret);
  });
});
