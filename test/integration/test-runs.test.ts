/**
 * Test runs (issue 35, part two) end to end through the real service, its job queue, the sandbox voice
 * service (whose deterministic model makes every verdict exact: src/sandbox/voice/model.ts) and
 * PostgreSQL, in text:
 * - a passing scripted suite: every case `passed` with its exact transcript, tool calls and details;
 * - the same suite failing after an edit that breaks it (a draft naming another role): exactly the
 *   role tests fail, with their details, while a run of the published version still passes;
 * - a run pinned to an old version passes while a new, breaking one is published, and a run naming
 *   none runs the new one;
 * - a mocked HTTP tool answers without its URL ever receiving a request; an unmocked one fails with
 *   the fixed error, and is not called either;
 * - repeats aggregated per test and counted per run;
 * - `test_run.completed` recorded once per run for its own `webhook_url` and the webhook that lists
 *   it (not one registered without `events`), delivered signed;
 * - no call, no web session, no usage; refusals (unknown version, unknown test, no tests, another
 *   workspace) store nothing.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { startHttpPeer, type HttpPeer } from '../helpers/http-peer.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { patient } from '../helpers/patience.js';

let t: TestService;
let tn: Tenant;
let other: Tenant;
/** The URL of the agent's HTTP tool: a test run must never reach it. */
let toolPeer: HttpPeer;
let runHook: Receiver;
let listed: Receiver;
let unlisted: Receiver;
before(async () => {
  t = await startTestService();
  tn = await tenant(t);
  other = await tenant(t, 'Other Co');
  toolPeer = await startHttpPeer((_req, res) => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"slots":["real"]}'));
  runHook = await startReceiver();
  listed = await startReceiver();
  unlisted = await startReceiver();
});
after(async () => {
  await t.close();
  await toolPeer.close();
  await Promise.all([runHook.close(), listed.close(), unlisted.close()]);
});

const api = (key = tn.apiKey) => ({
  get: (path: string) => t.http.get(path).set(bearer(key)),
  post: (path: string, body: object) => t.http.post(path).set(bearer(key)).send(body),
  patch: (path: string, body: object) => t.http.patch(path).set(bearer(key)).send(body),
});

const MAYA = 'You are Maya from Bright Smile Dental.';
const SAM = 'You are Sam from Acme Plumbing.';

/** An agent (auto_publish off) with an HTTP tool `check_availability` attached; version 2 (the tool attached) published. */
async function agentWithTool(): Promise<string> {
  const agent = await api().post('/api/v1/agents', {
    name: 'Receptionist',
    instruction: MAYA,
    first_message: 'Hi {{patient_name}}, this is Maya.',
    variable_placeholders: { patient_name: 'there' },
    can_end_conversation: true,
    auto_publish: false,
  });
  assert.equal(agent.status, 201, agent.text);
  const tool = await api().post('/api/v1/tools', {
    name: 'check_availability',
    description: 'Free appointment slots on a day.',
    url: `${toolPeer.url}/availability`,
    parameters: { type: 'object', properties: { day: { type: 'string' } }, required: ['day'] },
  });
  assert.equal(tool.status, 201, tool.text);
  const attached = await t.http.put(`/api/v1/agents/${agent.body.agent_id}/tools/${tool.body.tool_id}`).set(bearer(tn.apiKey));
  assert.equal(attached.status, 200, attached.text);
  // Attaching is a write (the draft, version 2, links the tool); version 1 had no tool.
  const published = await api().post(`/api/v1/agents/${agent.body.agent_id}/publish`, { version: 2 });
  assert.equal(published.status, 200, published.text);
  return agent.body.agent_id as string;
}

/** The suite: two tests about the role, one about the tool (mocked), one about ending. */
const SUITE = [
  {
    name: 'Introduces itself as Maya',
    variables: { patient_name: 'Ada' },
    expect_first_message: [{ type: 'reply_contains', phrase: 'hi ada,  this is MAYA' }],
    turns: [{ user: 'Who am I talking to?', expect: [{ type: 'reply_contains', phrase: 'As Maya from Bright Smile Dental' }] }],
  },
  {
    name: 'Checks availability',
    turns: [
      {
        user: 'Please check availability for Tuesday.',
        expect: [
          { type: 'tool_called', tool: 'check_availability', arguments: { type: 'object', required: ['day'], properties: { day: { const: 'Tuesday' } } } },
          { type: 'reply_contains', phrase: '10:00' },
          { type: 'tool_not_called', tool: 'search_knowledge' },
        ],
      },
    ],
    tool_mocks: [
      { tool: 'check_availability', when: { type: 'object', properties: { day: { const: 'Monday' } } }, result: { slots: ['08:00'] } },
      { tool: 'check_availability', result: { slots: ['10:00', '14:30'] } },
    ],
  },
  {
    name: 'Ends on goodbye',
    turns: [{ user: 'Thank you, goodbye.', expect: [{ type: 'reply_contains', phrase: 'Goodbye!' }, { type: 'ended' }] }],
  },
  {
    name: 'Never says Sam',
    expect_first_message: [{ type: 'reply_excludes', phrase: 'Sam' }],
    turns: [{ user: 'Hello there.', expect: [{ type: 'reply_excludes', phrase: 'Sam' }] }],
  },
];

async function addSuite(agentId: string, tests = SUITE): Promise<string[]> {
  const ids: string[] = [];
  for (const test of tests) {
    const res = await api().post(`/api/v1/agents/${agentId}/tests`, test);
    assert.equal(res.status, 201, res.text);
    ids.push(res.body.test_id);
  }
  return ids;
}

/** Creates a run and waits for it to complete; its cases in run order. */
async function run(body: Record<string, unknown>): Promise<{ run: any; cases: any[] }> {
  const created = await api().post('/api/v1/test-runs', body);
  assert.equal(created.status, 201, created.text);
  assert.equal(created.body.status, 'queued');
  assert.equal(created.body.passed, null);
  const deadline = Date.now() + patient(30_000);
  let got = created;
  while (got.body.status !== 'completed') {
    assert.ok(Date.now() < deadline, `run ${created.body.run_id} did not complete: ${JSON.stringify(got.body.counts)}`);
    await new Promise((r) => setTimeout(r, 50));
    got = await api().get(`/api/v1/test-runs/${created.body.run_id}`);
    assert.equal(got.status, 200, got.text);
  }
  const cases = await api().get(`/api/v1/test-runs/${created.body.run_id}/cases?limit=100`);
  assert.equal(cases.status, 200, cases.text);
  return { run: got.body, cases: cases.body.data };
}

const details = (c: any) => c.expectations.map((e: any) => `${e.passed ? 'PASS' : 'FAIL'} ${e.detail}`);
const said = (c: any) => c.transcript.map((e: any) => `${e.role}: ${e.text}`);

describe('test runs', () => {
  let agentId: string;
  let testIds: string[];
  before(async () => {
    agentId = await agentWithTool();
    testIds = await addSuite(agentId);
  });

  it('passes a suite that holds, with exact transcripts, mocked tool calls and details, never reaching the tool', async () => {
    const { run: r, cases } = await run({ agent_id: agentId });
    assert.equal(r.agent_version, 2);
    assert.equal(r.passed, true);
    assert.deepEqual(r.counts, { cases: 4, pending: 0, running: 0, passed: 4, failed: 0, errored: 0 });
    assert.deepEqual(
      r.tests.map((x: any) => [x.test_id, x.name, x.status, x.passes, x.failures, x.errors, x.repeats]),
      SUITE.map((s, i) => [testIds[i], s.name, 'passed', 1, 0, 0, 1]),
    );
    assert.deepEqual(
      cases.map((c: any) => [c.test_name, c.repeat, c.status, c.ended_by, c.error]),
      [
        ['Introduces itself as Maya', 1, 'passed', 'script_end', null],
        ['Checks availability', 1, 'passed', 'script_end', null],
        ['Ends on goodbye', 1, 'passed', 'agent', null],
        ['Never says Sam', 1, 'passed', 'script_end', null],
      ],
    );
    assert.deepEqual(said(cases[0]), [
      'model: Hi Ada, this is Maya.',
      'user: Who am I talking to?',
      'model: As Maya from Bright Smile Dental, I heard: "Who am I talking to?".',
    ]);
    assert.deepEqual(details(cases[0]), [
      'PASS First message: the reply contained "hi ada,  this is MAYA".',
      'PASS Turn 1: the reply contained "As Maya from Bright Smile Dental".',
    ]);
    assert.deepEqual(said(cases[1]), [
      'model: Hi there, this is Maya.',
      'user: Please check availability for Tuesday.',
      'model: check_availability returned: {"slots":["10:00","14:30"]}',
    ]);
    assert.equal(cases[1].tool_calls.length, 1);
    const call = cases[1].tool_calls[0];
    assert.deepEqual(
      { ...call, duration_ms: undefined, started_at: undefined },
      {
        name: 'check_availability',
        source: 'http',
        arguments: { day: 'Tuesday' },
        result: { slots: ['10:00', '14:30'] },
        ok: true,
        error: null,
        duration_ms: undefined,
        started_at: undefined,
        mocked: true,
        turn: 1,
      },
    );
    assert.deepEqual(details(cases[1]), [
      'PASS Turn 1: `check_availability` was called with {"day":"Tuesday"}.',
      'PASS Turn 1: the reply contained "10:00".',
      'PASS Turn 1: `search_knowledge` was not called.',
    ]);
    assert.deepEqual(said(cases[2]), [
      'model: Hi there, this is Maya.',
      'user: Thank you, goodbye.',
      'model: Goodbye! Thank you for talking with Maya from Bright Smile Dental.',
    ]);
    assert.equal(toolPeer.requests.length, 0);
  });

  it('fails exactly the role tests on a draft that breaks them, while the published version still passes', async () => {
    const edit = await api().patch(`/api/v1/agents/${agentId}`, { instruction: SAM, first_message: 'Hi {{patient_name}}, this is Sam.' });
    assert.equal(edit.status, 200, edit.text);
    assert.deepEqual([edit.body.draft_version, edit.body.published_version], [3, 2]);

    const { run: draft, cases } = await run({ agent_id: agentId, agent_version: 3 });
    assert.equal(draft.agent_version, 3);
    assert.equal(draft.passed, false);
    assert.deepEqual(draft.counts, { cases: 4, pending: 0, running: 0, passed: 2, failed: 2, errored: 0 });
    assert.deepEqual(
      draft.tests.map((x: any) => [x.name, x.status]),
      [
        ['Introduces itself as Maya', 'failed'],
        ['Checks availability', 'passed'],
        ['Ends on goodbye', 'passed'],
        ['Never says Sam', 'failed'],
      ],
    );
    assert.deepEqual(details(cases[0]), [
      'FAIL First message: the reply did not contain "hi ada,  this is MAYA"; it was "Hi Ada, this is Sam.".',
      'FAIL Turn 1: the reply did not contain "As Maya from Bright Smile Dental"; it was "As Sam from Acme Plumbing, I heard: "Who am I talking to?".".',
    ]);
    assert.deepEqual(details(cases[3]), [
      'FAIL First message: the reply contained "Sam": "Hi there, this is Sam.".',
      'FAIL Turn 1: the reply contained "Sam": "As Sam from Acme Plumbing, I heard: "Hello there.".".',
    ]);

    const { run: published } = await run({ agent_id: agentId });
    assert.equal(published.agent_version, 2);
    assert.equal(published.passed, true);
  });

  it('runs a suite pinned to an old version while a new one is published; a run naming none runs the new one', async () => {
    const pub = await api().post(`/api/v1/agents/${agentId}/publish`, { version: 3 });
    assert.equal(pub.status, 200, pub.text);
    assert.equal(pub.body.published_version, 3);

    const pinned = await run({ agent_id: agentId, agent_version: 2 });
    assert.equal(pinned.run.agent_version, 2);
    assert.equal(pinned.run.passed, true);
    assert.equal(said(pinned.cases[0])[0], 'model: Hi Ada, this is Maya.');

    const latest = await run({ agent_id: agentId });
    assert.equal(latest.run.agent_version, 3);
    assert.equal(latest.run.passed, false);
    assert.equal(said(latest.cases[0])[0], 'model: Hi Ada, this is Sam.');
  });

  it('aggregates repeats per test and counts them per run, in the order the tests were named', async () => {
    // Version 3 is published: the tool test passes, the role test fails, every repeat alike.
    const { run: r, cases } = await run({ agent_id: agentId, test_ids: [testIds[1], testIds[0]], repeats: 3, concurrency: 2 });
    assert.equal(r.repeats, 3);
    assert.equal(r.concurrency, 2);
    assert.equal(r.passed, false);
    assert.deepEqual(r.counts, { cases: 6, pending: 0, running: 0, passed: 3, failed: 3, errored: 0 });
    assert.deepEqual(r.tests, [
      { test_id: testIds[1], name: 'Checks availability', status: 'passed', passes: 3, failures: 0, errors: 0, repeats: 3 },
      { test_id: testIds[0], name: 'Introduces itself as Maya', status: 'failed', passes: 0, failures: 3, errors: 0, repeats: 3 },
    ]);
    assert.deepEqual(
      cases.map((c: any) => [c.test_name, c.repeat, c.status]),
      [
        ['Checks availability', 1, 'passed'],
        ['Checks availability', 2, 'passed'],
        ['Checks availability', 3, 'passed'],
        ['Introduces itself as Maya', 1, 'failed'],
        ['Introduces itself as Maya', 2, 'failed'],
        ['Introduces itself as Maya', 3, 'failed'],
      ],
    );
    // Pages of cases follow run order.
    const page = await api().get(`/api/v1/test-runs/${r.run_id}/cases?limit=4`);
    assert.deepEqual(
      page.body.data.map((c: any) => c.case_id),
      cases.slice(0, 4).map((c: any) => c.case_id),
    );
    assert.equal(page.body.has_more, true);
    const rest = await api().get(`/api/v1/test-runs/${r.run_id}/cases?limit=4&starting_after=${page.body.next_cursor}`);
    assert.deepEqual(
      rest.body.data.map((c: any) => c.case_id),
      cases.slice(4).map((c: any) => c.case_id),
    );
    // Never more than `concurrency` cases at once: each case's conversation lies inside the run's slot it held.
    const edges = cases.flatMap((c: any) => [
      [Date.parse(c.started_at), 1],
      [Date.parse(c.ended_at), -1],
    ]);
    edges.sort((a: number[], b: number[]) => a[0] - b[0] || a[1] - b[1]);
    let open = 0;
    let most = 0;
    for (const [, d] of edges) most = Math.max(most, (open += d));
    assert.ok(most <= 2, `at most 2 cases at once, saw ${most}`);
    assert.equal(toolPeer.requests.length, 0);
  });

  it('answers an unmocked tool with the fixed error and never calls it; turns after the end are not said', async () => {
    const [id] = await addSuite(agentId, [
      {
        name: 'Unmocked tool, then goodbye',
        turns: [
          {
            user: 'Please check availability for Friday.',
            expect: [
              { type: 'tool_called', tool: 'check_availability' },
              { type: 'reply_contains', phrase: "No mock for 'check_availability' in this test" },
            ],
          },
          { user: 'Goodbye.', expect: [{ type: 'ended' }] },
          { user: 'Hello?', expect: [{ type: 'reply_contains', phrase: 'anything' }] },
        ],
      } as (typeof SUITE)[number],
    ]);
    const { run: r, cases } = await run({ agent_id: agentId, test_ids: [id] });
    assert.equal(r.passed, false);
    const [c] = cases;
    assert.equal(c.ended_by, 'agent');
    assert.deepEqual(
      c.tool_calls.map((x: any) => [x.name, x.source, x.ok, x.error, x.mocked, x.turn]),
      [['check_availability', 'http', false, "No mock for 'check_availability' in this test; test runs never call tools.", false, 1]],
    );
    assert.deepEqual(details(c), [
      'PASS Turn 1: `check_availability` was called with {"day":"Friday"}.',
      'PASS Turn 1: the reply contained "No mock for \'check_availability\' in this test".',
      'PASS Turn 2: the conversation ended.',
      'FAIL Turn 3: not said; the conversation had ended at turn 2.',
    ]);
    assert.equal(said(c).at(-1), 'model: Goodbye! Thank you for talking with Sam from Acme Plumbing.');
    assert.equal(toolPeer.requests.length, 0);
  });

  it('transfers without dialing and opts out without listing the number, each ending the conversation', async () => {
    const agent = await api().post('/api/v1/agents', {
      name: 'Front desk',
      instruction: MAYA,
      can_end_conversation: true,
      opt_out: { enabled: true },
      transfer_destinations: [{ name: 'billing', phone_number: '+14155550171', description: 'Questions about invoices.' }],
    });
    assert.equal(agent.status, 201, agent.text);
    const id = agent.body.agent_id as string;
    await addSuite(id, [
      {
        name: 'Transfers to billing',
        turns: [
          {
            user: 'Please transfer call to billing.',
            expect: [
              { type: 'transferred', destination: 'billing' },
              { type: 'ended' },
              { type: 'tool_called', tool: 'transfer_call', arguments: { required: ['destination'] } },
            ],
          },
          { user: 'Hello?' },
        ],
      },
      {
        name: 'Opts out',
        turns: [
          {
            user: "Don't call me again.",
            expect: [{ type: 'ended' }, { type: 'transferred' }, { type: 'reply_contains', phrase: 'you will not be called again' }],
          },
        ],
      },
    ] as unknown as typeof SUITE);
    const { run: r, cases } = await run({ agent_id: id });
    assert.deepEqual(
      cases.map((c: any) => [c.test_name, c.status, c.ended_by]),
      [
        ['Transfers to billing', 'passed', 'transfer'],
        ['Opts out', 'failed', 'agent'],
      ],
    );
    assert.equal(r.passed, false);
    assert.deepEqual(
      cases[0].tool_calls.map((x: any) => [x.name, x.source, x.ok, x.result, x.mocked]),
      [['transfer_call', 'builtin', true, 'The call is being transferred.', false]],
    );
    assert.deepEqual(said(cases[0]), ['user: Please transfer call to billing.', 'model: transfer_call returned: The call is being transferred.']);
    assert.deepEqual(details(cases[1]), [
      'PASS Turn 1: the conversation ended.',
      'FAIL Turn 1: the call was not transferred.',
      'PASS Turn 1: the reply contained "you will not be called again".',
    ]);
    const knex = t.service.db.knex;
    const count = async (table: string) => Number((await knex(table).where({ workspace_id: tn.workspaceId }).count({ n: '*' }))[0].n);
    assert.deepEqual([await count('calls'), await count('do_not_call_entries')], [0, 0]);
  });

  it("records test_run.completed once for the run's webhook_url and a webhook listing it, signed; uses no call, session or usage", async () => {
    const hook = await api().post('/api/v1/webhooks', { url: listed.url, events: ['test_run.completed'] });
    assert.equal(hook.status, 201, hook.text);
    const plain = await api().post('/api/v1/webhooks', { url: unlisted.url });
    assert.equal(plain.status, 201, plain.text);
    const { run: r } = await run({ agent_id: agentId, agent_version: 2, test_ids: testIds, webhook_url: runHook.url });
    assert.equal(r.webhook_url, runHook.url);
    const knex = t.service.db.knex;
    const events = await knex('webhook_events')
      .where({ workspace_id: tn.workspaceId, kind: 'test_run.completed' })
      .whereRaw("body::jsonb->>'run_id' = ?", [r.run_id]);
    assert.equal(events.length, 1);
    const deliveries = await knex('webhook_deliveries').where({ event_id: events[0].id }).select('target_url');
    assert.deepEqual(deliveries.map((d: { target_url: string }) => d.target_url).sort(), [listed.url, runHook.url].sort());
    const [got] = await runHook.waitFor(1);
    const body = JSON.parse(got.rawBody.toString('utf8'));
    assert.deepEqual(body, {
      event: 'test_run.completed',
      run_id: r.run_id,
      agent_id: agentId,
      agent_version: 2,
      status: 'completed',
      passed: true,
      counts: r.counts,
      tests: r.tests,
      created_at: r.created_at,
      completed_at: r.completed_at,
    });
    const secret = (await api().get('/api/v1/webhooks/secret')).body.webhook_secret as string;
    assert.equal(got.headers['x-webhook-signature'], createHmac('sha256', secret).update(got.rawBody).digest('hex'));
    await listed.waitFor(1);
    const count = async (table: string) => Number((await knex(table).where({ workspace_id: tn.workspaceId }).count({ n: '*' }))[0].n);
    assert.deepEqual([await count('calls'), await count('realtime_conversations'), await count('usage_records')], [0, 0, 0]);
  });

  it('refuses an unknown version, an unknown test, an agent without tests and another workspace, storing nothing', async () => {
    const runs = async () => Number((await t.service.db.knex('test_runs').where({ workspace_id: tn.workspaceId }).count({ n: '*' }))[0].n);
    const before = await runs();
    const refusals: Array<[object, number, string, string | null, string?]> = [
      [{ agent_id: agentId, agent_version: 99 }, 404, 'agent_version_not_found', 'agent_version'],
      [{ agent_id: agentId, test_ids: [testIds[0], 'tst_01JD5Z7Q8Y1C2B3A4N5M6K7P9A'] }, 404, 'agent_test_not_found', 'test_ids[1]'],
      [{ agent_id: 'agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8R' }, 404, 'agent_not_found', 'agent_id'],
      [{ agent_id: agentId, repeats: 11 }, 422, 'invalid_value', 'repeats'],
      [{ agent_id: agentId, concurrency: 0 }, 422, 'invalid_value', 'concurrency'],
      [{ agent_id: agentId, webhook_url: 'ftp://example.com/x' }, 422, 'invalid_value', 'webhook_url'],
      [{ agent_id: agentId }, 403, 'forbidden', null, other.apiKey],
    ];
    for (const [body, status, code, param, key] of refusals) {
      const res = await api(key).post('/api/v1/test-runs', body);
      assert.equal(res.status, status, res.text);
      assert.equal(res.body.error.code, code, res.text);
      assert.equal(res.body.error.param, param, res.text);
    }
    const empty = await api().post('/api/v1/agents', { name: 'No tests' });
    const none = await api().post('/api/v1/test-runs', { agent_id: empty.body.agent_id });
    assert.equal(none.status, 422);
    assert.equal(none.body.error.code, 'no_tests');
    assert.equal(await runs(), before);

    const mine = (await api().get(`/api/v1/test-runs?agent_id=${agentId}&limit=1`)).body.data[0];
    for (const path of [`/api/v1/test-runs/${mine.run_id}`, `/api/v1/test-runs/${mine.run_id}/cases`]) {
      const res = await api(other.apiKey).get(path);
      assert.equal(res.status, 403, res.text);
    }
    const theirs = await api(other.apiKey).get('/api/v1/test-runs');
    assert.deepEqual(theirs.body.data, []);
    const missing = await api().get('/api/v1/test-runs/trun_01JD5Z7Q8Y1C2B3A4N5M6K7P9B');
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'test_run_not_found');
  });

  it("keeps a deleted test's verdicts in the runs that ran it, without its id", async () => {
    const [id] = await addSuite(agentId, [{ name: 'Short-lived', turns: [{ user: 'Hello.' }] } as unknown as (typeof SUITE)[number]]);
    const { run: r } = await run({ agent_id: agentId, test_ids: [id] });
    const gone = await t.http.delete(`/api/v1/agents/${agentId}/tests/${id}`).set(bearer(tn.apiKey));
    assert.equal(gone.status, 200, gone.text);
    const after = await api().get(`/api/v1/test-runs/${r.run_id}`);
    assert.deepEqual(after.body.tests, [{ ...r.tests[0], test_id: null }]);
    const cases = await api().get(`/api/v1/test-runs/${r.run_id}/cases`);
    assert.deepEqual(
      cases.body.data.map((c: any) => [c.test_id, c.test_name, c.status]),
      [[null, 'Short-lived', 'passed']],
    );
  });

  it('creates a run once for one Idempotency-Key', async () => {
    const send = () =>
      api()
        .post('/api/v1/test-runs', { agent_id: agentId, test_ids: [testIds[1]] })
        .set('Idempotency-Key', `run-${agentId}`);
    const first = await send();
    assert.equal(first.status, 201, first.text);
    const again = await send();
    assert.equal(again.status, 201, again.text);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.body.run_id, first.body.run_id);
    assert.equal(Number((await t.service.db.knex('test_runs').where({ id: first.body.run_id }).count({ n: '*' }))[0].n), 1);
  });

  it('refuses a run of more than 1,000 cases, storing nothing', async () => {
    const big = (await api().post('/api/v1/agents', { name: 'Many tests' })).body.agent_id as string;
    for (let i = 0; i < 101; i++) {
      const res = await api().post(`/api/v1/agents/${big}/tests`, { name: `Test ${i}`, turns: [{ user: 'Hello' }] });
      assert.equal(res.status, 201, res.text);
    }
    const refused = await api().post('/api/v1/test-runs', { agent_id: big, repeats: 10 });
    assert.equal(refused.status, 422, refused.text);
    assert.equal(refused.body.error.code, 'test_run_too_large');
    assert.equal(refused.body.error.param, 'repeats');
    assert.equal(refused.body.error.message, '101 tests times 10 repeats is 1010 cases; a run has at most 1000.');
    assert.equal(Number((await t.service.db.knex('test_runs').where({ agent_id: big }).count({ n: '*' }))[0].n), 0);
  });

  it('holds a workspace to TEST_RUNS_ACTIVE_PER_WORKSPACE runs queued or running, then runs the queued ones', async () => {
    // With the job queue stopped (every runner busy elsewhere), runs stay queued.
    await t.service.jobs.stop();
    const queued: string[] = [];
    try {
      for (let i = 0; i < 5; i++) {
        const res = await api().post('/api/v1/test-runs', { agent_id: agentId, test_ids: [testIds[1]] });
        assert.equal(res.status, 201, res.text);
        queued.push(res.body.run_id);
      }
      const refused = await api().post('/api/v1/test-runs', { agent_id: agentId, test_ids: [testIds[1]] });
      assert.equal(refused.status, 429, refused.text);
      assert.equal(refused.body.error.code, 'too_many_test_runs');
      assert.equal(refused.headers['retry-after'], '10');
      const active = await t.service.db.knex('test_runs').where({ workspace_id: tn.workspaceId }).whereIn('status', ['queued', 'running']).pluck('id');
      assert.deepEqual(active.sort(), [...queued].sort());
    } finally {
      await t.service.jobs.start();
    }
    for (const id of queued) {
      const deadline = Date.now() + patient(30_000);
      let r = await api().get(`/api/v1/test-runs/${id}`);
      while (r.body.status !== 'completed') {
        assert.ok(Date.now() < deadline, `run ${id} did not complete`);
        await new Promise((res) => setTimeout(res, 50));
        r = await api().get(`/api/v1/test-runs/${id}`);
      }
      assert.equal(r.body.passed, true);
    }
  });
});
