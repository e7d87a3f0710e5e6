/**
 * Agent tests (issue 35, part two), through the real service and PostgreSQL: create, read, list,
 * change and delete an agent's scripted tests; every refusal (a field that does not belong to an
 * expectation's type, a mock of a phone built-in, a mock with both result and error, a schema that is
 * not a JSON Schema or that RE2 cannot run, an unknown field, a taken name, the per-agent limit,
 * another workspace's agent or test) answers the error envelope naming the field and stores nothing;
 * deleting a test keeps the cases of runs that ran it.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { AgentTestService } from '../../src/agent-tests/service.js';
import { AgentTestStore } from '../../src/agent-tests/store.js';
import { ApiError } from '../../src/errors/api-error.js';

let t: TestService;
let tn: Tenant;
let other: Tenant;
before(async () => {
  t = await startTestService();
  tn = await tenant(t);
  other = await tenant(t, 'Other Co');
});
after(() => t.close());

async function createAgent(key: string, name = 'Receptionist'): Promise<string> {
  const res = await t.http.post('/api/v1/agents').set(bearer(key)).send({ name, instruction: 'You are Maya from Bright Smile Dental.' });
  assert.equal(res.status, 201, res.text);
  return res.body.agent_id as string;
}

const VALID = {
  name: 'Books a cleaning',
  description: 'Looks up a slot.',
  variables: { patient_name: 'Ada' },
  expect_first_message: [{ type: 'reply_contains', phrase: 'Maya' }],
  turns: [
    {
      user: 'Please check availability for Tuesday.',
      expect: [
        {
          type: 'tool_called',
          tool: 'check_availability',
          arguments: { type: 'object', required: ['day'], properties: { day: { type: 'string', pattern: '^Tue' } } },
        },
        { type: 'reply_contains', phrase: '10:00' },
      ],
    },
    { user: 'Thank you, goodbye.', expect: [{ type: 'ended' }] },
  ],
  tool_mocks: [{ tool: 'check_availability', when: { type: 'object', required: ['day'] }, result: { slots: ['10:00'] } }],
};

const testRows = (agentId: string) =>
  t.service.db.knex('agent_tests').where({ agent_id: agentId }).orderBy('id').select('id', 'name', 'definition', 'updated_at');

describe('agent tests: create, read, list, change, delete', () => {
  it('stores a scripted test normalised (every expectation and mock with all its fields) and shows it back', async () => {
    const agentId = await createAgent(tn.apiKey);
    const created = await t.http.post(`/api/v1/agents/${agentId}/tests`).set(bearer(tn.apiKey)).send(VALID);
    assert.equal(created.status, 201, created.text);
    const test = created.body;
    assert.match(test.test_id, /^tst_[0-9A-Z]{26}$/);
    assert.deepEqual(
      { ...test, test_id: undefined, created_at: undefined, updated_at: undefined },
      {
        object: 'agent_test',
        test_id: undefined,
        agent_id: agentId,
        type: 'scripted',
        name: 'Books a cleaning',
        description: 'Looks up a slot.',
        variables: { patient_name: 'Ada' },
        expect_first_message: [{ type: 'reply_contains', phrase: 'Maya', tool: null, arguments: null, destination: null }],
        turns: [
          {
            user: 'Please check availability for Tuesday.',
            expect: [
              {
                type: 'tool_called',
                phrase: null,
                tool: 'check_availability',
                arguments: { type: 'object', required: ['day'], properties: { day: { type: 'string', pattern: '^Tue' } } },
                destination: null,
              },
              { type: 'reply_contains', phrase: '10:00', tool: null, arguments: null, destination: null },
            ],
          },
          { user: 'Thank you, goodbye.', expect: [{ type: 'ended', phrase: null, tool: null, arguments: null, destination: null }] },
        ],
        tool_mocks: [{ tool: 'check_availability', when: { type: 'object', required: ['day'] }, result: { slots: ['10:00'] }, error: null }],
        created_at: undefined,
        updated_at: undefined,
      },
    );
    const got = await t.http.get(`/api/v1/agents/${agentId}/tests/${test.test_id}`).set(bearer(tn.apiKey));
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, test);

    const second = await t.http
      .post(`/api/v1/agents/${agentId}/tests`)
      .set(bearer(tn.apiKey))
      .send({ name: 'Says hello', turns: [{ user: 'Hello' }] });
    assert.equal(second.status, 201, second.text);
    assert.deepEqual(second.body.tool_mocks, []);
    assert.deepEqual(second.body.turns, [{ user: 'Hello', expect: [] }]);
    const list = await t.http.get(`/api/v1/agents/${agentId}/tests?limit=1`).set(bearer(tn.apiKey));
    assert.equal(list.status, 200);
    assert.deepEqual(list.body, { object: 'list', data: [second.body], has_more: true, next_cursor: second.body.test_id });
    const next = await t.http.get(`/api/v1/agents/${agentId}/tests?limit=1&starting_after=${second.body.test_id}`).set(bearer(tn.apiKey));
    assert.deepEqual(next.body.data, [test]);

    const changed = await t.http
      .patch(`/api/v1/agents/${agentId}/tests/${test.test_id}`)
      .set(bearer(tn.apiKey))
      .send({ name: 'Books a cleaning on Tuesday', tool_mocks: [{ tool: 'check_availability', error: 'Calendar down.' }] });
    assert.equal(changed.status, 200, changed.text);
    assert.equal(changed.body.name, 'Books a cleaning on Tuesday');
    assert.deepEqual(changed.body.tool_mocks, [{ tool: 'check_availability', when: null, result: null, error: 'Calendar down.' }]);
    assert.deepEqual(changed.body.turns, test.turns);

    const deleted = await t.http.delete(`/api/v1/agents/${agentId}/tests/${test.test_id}`).set(bearer(tn.apiKey));
    assert.equal(deleted.status, 200);
    assert.deepEqual(deleted.body, { status: 'deleted', test_id: test.test_id });
    const gone = await t.http.get(`/api/v1/agents/${agentId}/tests/${test.test_id}`).set(bearer(tn.apiKey));
    assert.equal(gone.status, 404);
    assert.equal(gone.body.error.code, 'agent_test_not_found');
  });

  it('refuses bad input with the field named and stores nothing', async () => {
    const agentId = await createAgent(tn.apiKey);
    const kept = await t.http.post(`/api/v1/agents/${agentId}/tests`).set(bearer(tn.apiKey)).send(VALID);
    assert.equal(kept.status, 201);
    const before = await testRows(agentId);
    const cases: Array<[string, object, number, string, string | null]> = [
      [
        'a phrase on a tool expectation',
        { ...VALID, name: 'x', turns: [VALID.turns[0], { user: 'Hi', expect: [{ type: 'reply_contains' }] }] },
        422,
        'invalid_value',
        'turns[1].expect[0].phrase',
      ],
      [
        'a tool on an ended expectation',
        { ...VALID, name: 'x', turns: [VALID.turns[0], { user: 'Hi', expect: [{ type: 'ended', tool: 'x' }] }] },
        422,
        'invalid_value',
        'turns[1].expect[0].tool',
      ],
      ['a mock of transfer_call', { ...VALID, name: 'x', tool_mocks: [{ tool: 'transfer_call', result: 1 }] }, 422, 'invalid_value', 'tool_mocks[0].tool'],
      [
        'a mock with result and error',
        { ...VALID, name: 'x', tool_mocks: [{ tool: 'a', result: 1, error: 'no' }] },
        422,
        'invalid_value',
        'tool_mocks[0].error',
      ],
      [
        'a mock result over 16 KiB',
        { ...VALID, name: 'x', tool_mocks: [{ tool: 'a', result: 'x'.repeat(17_000) }] },
        422,
        'invalid_value',
        'tool_mocks[0].result',
      ],
      [
        'an arguments schema that is not a JSON Schema',
        { ...VALID, name: 'x', turns: [{ user: 'Hi', expect: [{ type: 'tool_called', tool: 'a', arguments: { type: 'nope' } }] }] },
        422,
        'invalid_test_schema',
        'turns[0].expect[0].arguments.type',
      ],
      [
        'a when schema with a look-ahead RE2 cannot run',
        { ...VALID, name: 'x', tool_mocks: [{ tool: 'a', when: { type: 'string', pattern: '(?=a)a' } }] },
        422,
        'invalid_test_schema',
        'tool_mocks[0].when',
      ],
      [
        'a schema nested past the budget',
        { ...VALID, name: 'x', tool_mocks: [{ tool: 'a', when: JSON.parse('{"not":'.repeat(20) + '{}' + '}'.repeat(20)) }] },
        422,
        'invalid_test_schema',
        // Level 17 is the first past the budget's 16.
        `tool_mocks[0].when${'.not'.repeat(16)}`,
      ],
      ['an unknown field', { ...VALID, name: 'x', colour: 'red' }, 422, 'unknown_field', 'colour'],
      ['no turns', { ...VALID, name: 'x', turns: [] }, 422, 'invalid_value', 'turns'],
      ['a taken name', VALID, 409, 'test_name_taken', 'name'],
    ];
    for (const [what, body, status, code, param] of cases) {
      const res = await t.http.post(`/api/v1/agents/${agentId}/tests`).set(bearer(tn.apiKey)).send(body);
      assert.equal(res.status, status, `${what}: ${res.text}`);
      assert.equal(res.body.error.code, code, what);
      assert.equal(res.body.error.param, param, what);
      assert.ok(res.body.error.message.length > 0, what);
      // The same body as a change of the stored test (its own name is no clash with itself).
      if (what === 'a taken name') continue;
      const patch = await t.http.patch(`/api/v1/agents/${agentId}/tests/${kept.body.test_id}`).set(bearer(tn.apiKey)).send(body);
      assert.equal(patch.body.error?.code, code, `update: ${what}: ${patch.text}`);
    }
    assert.deepEqual(await testRows(agentId), before);
  });

  it('refuses another workspace and a missing agent, changing nothing', async () => {
    const agentId = await createAgent(tn.apiKey);
    const test = (await t.http.post(`/api/v1/agents/${agentId}/tests`).set(bearer(tn.apiKey)).send(VALID)).body;
    const before = await testRows(agentId);
    const calls = [
      t.http.get(`/api/v1/agents/${agentId}/tests`),
      t.http.post(`/api/v1/agents/${agentId}/tests`).send({ ...VALID, name: 'Theirs' }),
      t.http.get(`/api/v1/agents/${agentId}/tests/${test.test_id}`),
      t.http.patch(`/api/v1/agents/${agentId}/tests/${test.test_id}`).send({ name: 'Theirs' }),
      t.http.delete(`/api/v1/agents/${agentId}/tests/${test.test_id}`),
    ];
    for (const req of calls) {
      const res = await req.set(bearer(other.apiKey));
      assert.equal(res.status, 403, res.text);
      assert.equal(res.body.error.code, 'forbidden');
    }
    // Their own agent does not reach a test of ours by its id.
    const theirs = await createAgent(other.apiKey);
    const cross = await t.http.get(`/api/v1/agents/${theirs}/tests/${test.test_id}`).set(bearer(other.apiKey));
    assert.equal(cross.status, 404);
    assert.equal(cross.body.error.code, 'agent_test_not_found');
    const none = await t.http.post('/api/v1/agents/agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8R/tests').set(bearer(tn.apiKey)).send(VALID);
    assert.equal(none.status, 404);
    assert.equal(none.body.error.code, 'agent_not_found');
    assert.deepEqual(await testRows(agentId), before);
  });

  it('holds an agent to its limit of tests, counted with the agent held', async () => {
    const agentId = await createAgent(tn.apiKey);
    const service = new AgentTestService(new AgentTestStore(t.service.db.knex), t.service.agents, { maxTestsPerAgent: 2 });
    const body = (name: string) => ({ name, turns: [{ user: 'Hello' }] });
    // Three at once: exactly two are stored.
    const results = await Promise.allSettled(['a', 'b', 'c'].map((n) => service.create(tn.workspaceId, agentId, body(n))));
    const refused = results.filter((r) => r.status === 'rejected');
    assert.equal(refused.length, 1);
    const err = (refused[0] as PromiseRejectedResult).reason;
    assert.ok(err instanceof ApiError);
    assert.equal(err.status, 422);
    assert.equal(err.code, 'test_limit_reached');
    assert.equal((await testRows(agentId)).length, 2);
  });
});
