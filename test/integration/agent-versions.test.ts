/**
 * Agent versions (issue 35) through the real service and PostgreSQL:
 * - every write makes the next immutable version holding the whole configuration; the agent says its
 *   draft and published versions; list (newest first, paged by version number) and read them;
 * - auto_publish (default on) publishes each write; off, writes are drafts and conversations keep
 *   running the published version until `publish` (the draft or a named version, a rollback);
 * - restore makes a new version from an old one, credentials and numbers as they are now;
 * - ETag / If-Match on PATCH, DELETE, publish and restore: a stale tag is 412 `precondition_failed`
 *   and nothing is stored; none keeps the unconditional write;
 * - bad input: unknown version 404 `agent_version_not_found`, another workspace's agent 403, a
 *   malformed version 422, nothing stored;
 * - two instances on one database: a publish on one is seen by the other's API at once and by its
 *   kept runtime agents by NOTIFY; concurrent writes from both never share a version number.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/realtime.js';
import { isUniqueViolation } from '../../src/lib/db-errors.js';

const AUTH_TOKEN = 'a-token-9f8e7d6c5b4a39281706f5e4d3c2b1a0';
const ROTATED_TOKEN = 'a-token-rotated-0a1b2c3d4e5f60718293a4b5';

let t: TestService;
let tn: Tenant;
let other: Tenant;
before(async () => {
  t = await startTestService();
  tn = await tenant(t);
  other = await tenant(t, 'Other Co');
});
after(() => t.close());

type Method = 'get' | 'post' | 'patch' | 'delete';
async function api(method: Method, path: string, body?: unknown, opts: { key?: string; ifMatch?: string; on?: TestService } = {}) {
  let req = (opts.on ?? t).http[method](path).set({ Authorization: `Bearer ${opts.key ?? tn.apiKey}` });
  if (opts.ifMatch !== undefined) req = req.set('If-Match', opts.ifMatch);
  if (body !== undefined) req = req.send(body as object);
  return req;
}

async function createAgent(body: Record<string, unknown>) {
  const res = await api('post', '/api/v1/agents', body);
  assert.equal(res.status, 201, res.text);
  return res;
}

const versionRows = (agentId: string) => t.service.db.knex('agent_versions').where({ agent_id: agentId }).orderBy('version').select('version', 'published_at');
const agentRow = (agentId: string) => t.service.db.knex('agents').where({ id: agentId }).first();

describe('versions: every write makes one, published by default', () => {
  it('creation makes version 1, published; the agent says its versions and its ETag', async () => {
    const created = await createAgent({ name: 'V', instruction: 'one' });
    const a = created.body;
    assert.equal(a.draft_version, 1);
    assert.equal(a.published_version, 1);
    assert.equal(a.auto_publish, true);
    assert.equal(created.headers.etag, '"1.1"');
    const got = await api('get', `/api/v1/agents/${a.agent_id}`);
    assert.equal(got.headers.etag, '"1.1"');

    const v1 = await api('get', `/api/v1/agents/${a.agent_id}/versions/1`);
    assert.equal(v1.status, 200, v1.text);
    const { draft_version: _d, published_version: _p, auto_publish: _a, ...shown } = a;
    assert.deepEqual(v1.body.agent, shown, 'the version holds the agent as the resource showed it');
    assert.equal(v1.body.object, 'agent_version');
    assert.equal(v1.body.is_published, true);
    assert.ok(v1.body.published_at);
  });

  it('PATCH makes the next version; versions never change; the list is newest first and pages by number', async () => {
    const a = (await createAgent({ name: 'Lister', instruction: 'v1' })).body;
    for (const n of [2, 3, 4]) {
      const res = await api('patch', `/api/v1/agents/${a.agent_id}`, { instruction: `v${n}` });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.draft_version, n);
      assert.equal(res.body.published_version, n);
      assert.equal(res.headers.etag, `"${n}.${n}"`);
    }
    // A PATCH that changes nothing makes no version.
    assert.equal((await api('patch', `/api/v1/agents/${a.agent_id}`, {})).body.draft_version, 4);

    const first = await api('get', `/api/v1/agents/${a.agent_id}/versions?limit=2`);
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(
      first.body.data.map((v: { version: number; agent: { instruction: string } }) => [v.version, v.agent.instruction]),
      [
        [4, 'v4'],
        [3, 'v3'],
      ],
    );
    assert.equal(first.body.has_more, true);
    assert.equal(first.body.next_cursor, '3');
    const second = await api('get', `/api/v1/agents/${a.agent_id}/versions?limit=2&starting_after=3`);
    assert.deepEqual(
      second.body.data.map((v: { version: number; is_published: boolean }) => [v.version, v.is_published]),
      [
        [2, false],
        [1, false],
      ],
    );
    assert.equal(second.body.has_more, false);
    assert.equal((await api('get', `/api/v1/agents/${a.agent_id}/versions/1`)).body.agent.instruction, 'v1');
  });
});

describe('publishing: drafts do not reach conversations until published', () => {
  it('with auto_publish off, a write is a draft; the runtime agent stays on the published version until publish; rollback by number', async () => {
    const a = (await createAgent({ name: 'Careful', instruction: 'live one', auto_publish: false })).body;
    assert.equal(a.published_version, 1, 'creation publishes version 1 either way');
    const draft = await api('patch', `/api/v1/agents/${a.agent_id}`, { instruction: 'draft two' });
    assert.equal(draft.body.draft_version, 2);
    assert.equal(draft.body.published_version, 1);
    assert.equal(draft.body.instruction, 'draft two', 'the resource shows the draft');
    assert.deepEqual(
      (await versionRows(a.agent_id)).map((v) => [v.version, v.published_at !== null]),
      [
        [1, true],
        [2, false],
      ],
    );

    let runtime = await t.service.agents.findForRuntime(tn.workspaceId, a.agent_id);
    assert.equal(runtime?.instruction, 'live one');
    assert.equal(runtime?.version, 1);

    // No body: the draft is published.
    const published = await t.http.post(`/api/v1/agents/${a.agent_id}/publish`).set({ Authorization: `Bearer ${tn.apiKey}` });
    assert.equal(published.status, 200, published.text);
    assert.equal(published.body.published_version, 2);
    assert.equal(published.headers.etag, '"2.2"');
    runtime = await t.service.agents.findForRuntime(tn.workspaceId, a.agent_id);
    assert.equal(runtime?.instruction, 'draft two');
    assert.equal(runtime?.version, 2);

    // Rollback: version 1 again, without a new version.
    const rolled = await api('post', `/api/v1/agents/${a.agent_id}/publish`, { version: 1 });
    assert.equal(rolled.status, 200, rolled.text);
    assert.deepEqual([rolled.body.draft_version, rolled.body.published_version], [2, 1]);
    assert.equal((await t.service.agents.findForRuntime(tn.workspaceId, a.agent_id))?.instruction, 'live one');
    assert.equal((await api('get', `/api/v1/agents/${a.agent_id}/versions/1`)).body.is_published, true);
    assert.equal((await api('get', `/api/v1/agents/${a.agent_id}/versions/2`)).body.is_published, false);

    // Publishing what is published changes nothing.
    const again = await api('post', `/api/v1/agents/${a.agent_id}/publish`, { version: 1 });
    assert.equal(again.headers.etag, '"2.1"');
  });

  it('turning auto_publish on publishes the version that write makes', async () => {
    const a = (await createAgent({ name: 'Switch', auto_publish: false })).body;
    await api('patch', `/api/v1/agents/${a.agent_id}`, { instruction: 'draft' });
    const on = await api('patch', `/api/v1/agents/${a.agent_id}`, { auto_publish: true });
    assert.deepEqual([on.body.draft_version, on.body.published_version, on.body.auto_publish], [3, 3, true]);
    assert.equal((await t.service.agents.findForRuntime(tn.workspaceId, a.agent_id))?.instruction, 'draft');
  });

  it('restore makes a new version from an old one; credentials and numbers stay as they are now', async () => {
    const a = (
      await createAgent({
        name: 'Restore me',
        instruction: 'original',
        provider_a_config: { account_sid: 'AC1', auth_token: AUTH_TOKEN, phone_number: '+14155550170' },
      })
    ).body;
    await api('patch', `/api/v1/agents/${a.agent_id}`, { instruction: 'changed', provider_a_config: { auth_token: ROTATED_TOKEN } });
    const restored = await api('post', `/api/v1/agents/${a.agent_id}/versions/1/restore`);
    assert.equal(restored.status, 200, restored.text);
    assert.equal(restored.body.instruction, 'original');
    assert.deepEqual([restored.body.draft_version, restored.body.published_version], [3, 3]);
    assert.equal(restored.headers.etag, '"3.3"');
    const runtime = await t.service.agents.loadForRuntime(tn.workspaceId, a.agent_id);
    assert.equal(runtime.instruction, 'original');
    assert.equal(runtime.carrierAccounts.provider_a?.config.auth_token, ROTATED_TOKEN, 'a rotated credential does not come back');
    assert.ok(!restored.text.includes(AUTH_TOKEN) && !restored.text.includes(ROTATED_TOKEN));
    const v3 = await api('get', `/api/v1/agents/${a.agent_id}/versions/3`);
    assert.ok(!v3.text.includes(AUTH_TOKEN) && !v3.text.includes(ROTATED_TOKEN), 'versions show no credential');
  });
});

describe('If-Match: optimistic concurrency', () => {
  it('a stale ETag is 412 precondition_failed on PATCH, publish, restore and DELETE, and nothing is stored', async () => {
    const a = (await createAgent({ name: 'Racer', instruction: 'first' })).body;
    const stale = '"1.1"';
    const ok = await api('patch', `/api/v1/agents/${a.agent_id}`, { instruction: 'second' }, { ifMatch: stale });
    assert.equal(ok.status, 200, ok.text);
    const before = await agentRow(a.agent_id);
    const versionsBefore = await versionRows(a.agent_id);

    const attempts: Array<[Method, string, unknown]> = [
      ['patch', `/api/v1/agents/${a.agent_id}`, { instruction: 'lost update' }],
      ['post', `/api/v1/agents/${a.agent_id}/publish`, { version: 1 }],
      ['post', `/api/v1/agents/${a.agent_id}/versions/1/restore`, undefined],
      ['delete', `/api/v1/agents/${a.agent_id}`, undefined],
    ];
    for (const [method, path, body] of attempts) {
      const res = await api(method, path, body, { ifMatch: stale });
      assert.equal(res.status, 412, `${method} ${path}: ${res.text}`);
      assert.equal(res.body.error.code, 'precondition_failed');
      assert.equal(res.body.error.type, 'conflict_error');
      assert.equal(res.body.error.param, 'If-Match');
      assert.match(res.body.error.request_id, /^req_/);
    }
    assert.deepEqual(await agentRow(a.agent_id), before, 'nothing changed');
    assert.deepEqual(await versionRows(a.agent_id), versionsBefore, 'no version made');

    // The current tag, one of a list, and `*` pass; no If-Match writes unconditionally.
    assert.equal((await api('patch', `/api/v1/agents/${a.agent_id}`, { instruction: 'third' }, { ifMatch: `${stale}, "2.2"` })).status, 200);
    assert.equal((await api('patch', `/api/v1/agents/${a.agent_id}`, { instruction: 'fourth' }, { ifMatch: '*' })).status, 200);
    assert.equal((await api('patch', `/api/v1/agents/${a.agent_id}`, { instruction: 'fifth' })).status, 200);
    assert.equal((await api('delete', `/api/v1/agents/${a.agent_id}`, undefined, { ifMatch: '"5.5"' })).status, 200);
    assert.equal(await agentRow(a.agent_id), undefined);
    assert.deepEqual(await versionRows(a.agent_id), [], 'the versions go with the agent');
  });
});

describe('bad input changes nothing', () => {
  it('an unknown version is 404 agent_version_not_found; another workspace 403; a malformed version 422', async () => {
    const a = (await createAgent({ name: 'Strict', auto_publish: false })).body;
    await api('patch', `/api/v1/agents/${a.agent_id}`, { instruction: 'draft' });
    const before = await agentRow(a.agent_id);
    const versionsBefore = await versionRows(a.agent_id);
    for (const [method, path, body] of [
      ['get', `/api/v1/agents/${a.agent_id}/versions/9`, undefined],
      ['post', `/api/v1/agents/${a.agent_id}/versions/9/restore`, undefined],
      ['post', `/api/v1/agents/${a.agent_id}/publish`, { version: 9 }],
    ] as Array<[Method, string, unknown]>) {
      const res = await api(method, path, body);
      assert.equal(res.status, 404, res.text);
      assert.equal(res.body.error.code, 'agent_version_not_found');
    }
    for (const [method, path, body] of [
      ['get', `/api/v1/agents/${a.agent_id}/versions`, undefined],
      ['get', `/api/v1/agents/${a.agent_id}/versions/1`, undefined],
      ['post', `/api/v1/agents/${a.agent_id}/publish`, {}],
      ['post', `/api/v1/agents/${a.agent_id}/versions/1/restore`, undefined],
    ] as Array<[Method, string, unknown]>) {
      const res = await api(method, path, body, { key: other.apiKey });
      assert.equal(res.status, 403, res.text);
    }
    for (const [method, path, body] of [
      ['get', `/api/v1/agents/${a.agent_id}/versions/0`, undefined],
      ['get', `/api/v1/agents/${a.agent_id}/versions/two`, undefined],
      ['get', `/api/v1/agents/${a.agent_id}/versions?starting_after=abc`, undefined],
      ['post', `/api/v1/agents/${a.agent_id}/publish`, { version: 0 }],
      ['post', `/api/v1/agents/${a.agent_id}/publish`, { version: 1, colour: 'red' }],
    ] as Array<[Method, string, unknown]>) {
      const res = await api(method, path, body);
      assert.equal(res.status, 422, `${path}: ${res.text}`);
    }
    const unknownAgent = await api('get', '/api/v1/agents/agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8V/versions');
    assert.equal(unknownAgent.body.error.code, 'agent_not_found');
    assert.deepEqual(await agentRow(a.agent_id), before);
    assert.deepEqual(await versionRows(a.agent_id), versionsBefore);
  });

  it('the database refuses a second version of the same number', async () => {
    const a = (await createAgent({ name: 'Keyed' })).body;
    await assert.rejects(
      t.service.db.knex('agent_versions').insert({
        workspace_id: tn.workspaceId,
        agent_id: a.agent_id,
        version: 1,
        config: '{}',
        links: JSON.stringify({ tool_ids: [], document_ids: [], mcp_server_ids: [] }),
      }),
      (err) => isUniqueViolation(err),
    );
  });
});

describe('two instances on one database', () => {
  let b: TestService;
  before(async () => {
    b = await startTestService({ DATABASE_URL: t.service.db.url });
  });
  after(() => b.close());

  it('a publish on one instance is seen by the other at once (API) and by its kept runtime agent', async () => {
    const a = (await createAgent({ name: 'Shared', instruction: 'one', auto_publish: false })).body;
    await api('patch', `/api/v1/agents/${a.agent_id}`, { instruction: 'two' });
    // B keeps the published version for its conversations.
    assert.equal((await b.service.agents.findForRuntime(tn.workspaceId, a.agent_id))?.instruction, 'one');
    const published = await api('post', `/api/v1/agents/${a.agent_id}/publish`, {});
    assert.equal(published.status, 200, published.text);
    const onB = await api('get', `/api/v1/agents/${a.agent_id}`, undefined, { on: b });
    assert.equal(onB.body.published_version, 2);
    assert.equal(onB.headers.etag, published.headers.etag);
    await waitFor(async () => (await b.service.agents.findForRuntime(tn.workspaceId, a.agent_id))?.version === 2, 30_000, 'B runs version 2');
    assert.equal((await b.service.agents.findForRuntime(tn.workspaceId, a.agent_id))?.instruction, 'two');
  });

  it('concurrent writes through both instances never share a version number', async () => {
    const a = (await createAgent({ name: 'Contended' })).body;
    const writes = 12;
    const results = await Promise.all(
      Array.from({ length: writes }, (_, i) => api('patch', `/api/v1/agents/${a.agent_id}`, { instruction: `write ${i}` }, { on: i % 2 ? b : t })),
    );
    for (const r of results) assert.equal(r.status, 200, r.text);
    const versions = (await versionRows(a.agent_id)).map((v) => v.version);
    assert.deepEqual(
      versions,
      Array.from({ length: writes + 1 }, (_, i) => i + 1),
    );
    assert.deepEqual(new Set(results.map((r) => r.body.draft_version)).size, writes, 'each write answered its own version');
    assert.equal((await agentRow(a.agent_id)).draft_version, writes + 1);
  });
});
