/**
 * Calls and batches name the agent version they run (issue 35), through the real service, the sandbox
 * carriers and PostgreSQL:
 * - a call naming a version runs it, published or not (`Call.agent_version`, its stored instruction,
 *   its first message, `call.completed`); a call naming none runs the published one;
 * - a call or batch naming none runs the version published at its creation even on an instance whose
 *   kept runtime agent has not heard of the publish yet (its NOTIFY held back): two instances;
 * - a batch fixes its version at creation (`Batch.agent_version`: named, else published then); every
 *   call of it, automatic retries and `retryBatch` included, runs that version after others are
 *   published; JSON and CSV alike;
 * - bad input (0, a word, past the maximum, a version the agent does not have; another workspace's
 *   agent): the error envelope names `agent_version` (or the agent), nothing is stored: no call, no
 *   batch, no reservation, no slot;
 * - migration 046 on a database with batches: open batches get their agent's published version,
 *   finished ones stay null.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { batchCalls, createBatch, sandboxNumbers, waitForBatch } from '../helpers/batches.js';
import { insertWorkspace, migrationDatabase, redoAll, undoFrom } from '../helpers/migrations.js';
import { publishUnheard } from '../helpers/agent-versions.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';

let t: TestService;
let tn: Tenant;
let other: Tenant;
let sandbox: SandboxCarriers;
let receiver: Receiver;
before(async () => {
  t = await startTestService(FAST_CALLS);
  tn = await tenant(t);
  other = await tenant(t, 'Other Co');
  sandbox = t.service.sandbox.carriers!.server;
  receiver = await startReceiver();
});
after(async () => {
  await t.close();
  await receiver.close();
});

const firstMessage = (n: number) => `Hello from version ${n}.`;

/** A phone agent with auto_publish off: version 1 published, version 2 a draft. */
async function twoVersions(): Promise<string> {
  const agentId = await createPhoneAgent(t, tn, 'provider_a', { instruction: 'Version 1.', first_message: firstMessage(1), auto_publish: false });
  const draft = await t.http
    .patch(`/api/v1/agents/${agentId}`)
    .set(bearer(tn.apiKey))
    .send({ instruction: 'Version 2.', first_message: firstMessage(2) });
  assert.equal(draft.status, 200, draft.text);
  assert.deepEqual([draft.body.draft_version, draft.body.published_version], [2, 1]);
  return agentId;
}

/** Writes the agent's next version (published: auto_publish is turned on) with its own first message. */
async function publishNext(agentId: string, n: number): Promise<void> {
  const res = await t.http
    .patch(`/api/v1/agents/${agentId}`)
    .set(bearer(tn.apiKey))
    .send({ instruction: `Version ${n}.`, first_message: firstMessage(n), auto_publish: true });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.published_version, n);
}

/** A number the sandbox answers, hears the agent's first message on, then hangs up. */
function listener(): string {
  const number = sandboxNumber();
  sandbox.setScript(number, [{ waitForAgent: true }, { hangup: true }]);
  return number;
}

const storedCall = (callId: string) => t.service.db.knex('calls').where({ id: callId }).first('instruction', 'agent_version');

/** What a refused request could have left behind in the workspace. */
async function stored(workspaceId: string) {
  const count = async (table: string) => Number((await t.service.db.knex(table).where({ workspace_id: workspaceId }).count({ n: '*' }))[0].n);
  const [{ n: recipients }] = await t.service.db
    .knex('batch_recipients as r')
    .join('batches as b', 'b.id', 'r.batch_id')
    .where('b.workspace_id', workspaceId)
    .count({ n: '*' });
  return {
    calls: await count('calls'),
    batches: await count('batches'),
    recipients: Number(recipients),
    reservations: await count('reservations'),
    leases: await count('session_leases'),
  };
}

function csvUpload(fields: Record<string, string>, csv = `to_number\n${sandboxNumbers('0002', 1, 700)[0]}\n`) {
  const req = t.http.post('/api/v1/batches/csv').set(bearer(tn.apiKey));
  for (const [k, v] of Object.entries(fields)) req.field(k, v);
  return req.attach('file', Buffer.from(csv), { filename: 'recipients.csv', contentType: 'text/csv' });
}

describe('calls', () => {
  it('a call naming a version runs it, draft or not; a call naming none runs the published one', async () => {
    const agentId = await twoVersions();
    const named = await placeCall(t, tn, { agent_id: agentId, agent_version: 2, to_number: listener(), webhook_url: receiver.url });
    assert.equal(named.status, 201, named.text);
    assert.equal(named.body.agent_version, 2);
    const plain = await placeCall(t, tn, { agent_id: agentId, to_number: listener() });
    assert.equal(plain.status, 201, plain.text);
    assert.equal(plain.body.agent_version, 1);

    const [two, one] = [await waitForCall(t, tn, named.body.call_id), await waitForCall(t, tn, plain.body.call_id)];
    assert.deepEqual([two.status, two.agent_version, two.first_message], ['completed', 2, firstMessage(2)]);
    assert.deepEqual([one.status, one.agent_version, one.first_message], ['completed', 1, firstMessage(1)]);
    assert.deepEqual(await storedCall(two.call_id), { instruction: 'Version 2.', agent_version: 2 });
    assert.deepEqual(await storedCall(one.call_id), { instruction: 'Version 1.', agent_version: 1 });
    assert.ok(JSON.stringify(two.transcript).includes(firstMessage(2)), 'the agent spoke version 2');

    const events = (await receiver.waitFor(1, 10_000)).map((r) => JSON.parse(r.rawBody.toString()));
    const event = events.find((e) => e.conversation_id === two.call_id);
    assert.deepEqual([event?.event, event?.agent_version], ['call.completed', 2]);
  });

  it('bad input: 0, a word, past the maximum, a version the agent lacks, another workspace; nothing stored', async () => {
    const agentId = await twoVersions();
    const before = await stored(tn.workspaceId);
    for (const agent_version of [0, -1, 'two', '2', 1.5, 2147483648, null]) {
      const res = await placeCall(t, tn, { agent_id: agentId, agent_version, to_number: sandboxNumber() });
      assert.equal(res.status, 422, `${JSON.stringify(agent_version)}: ${res.text}`);
      assert.equal(res.body.error.param, 'agent_version', res.text);
    }
    for (const agent_version of [3, 2147483647]) {
      const res = await placeCall(t, tn, { agent_id: agentId, agent_version, to_number: sandboxNumber() });
      assert.equal(res.status, 404, res.text);
      assert.deepEqual([res.body.error.type, res.body.error.code, res.body.error.param], ['not_found_error', 'agent_version_not_found', 'agent_version']);
      assert.ok(res.body.error.message.includes(String(agent_version)), res.body.error.message);
    }
    // The agent is checked before its version: another workspace's is 403, none is 404 agent_not_found.
    const foreign = await t.http.post('/api/v1/calls').set(bearer(other.apiKey)).send({ agent_id: agentId, agent_version: 1, to_number: sandboxNumber() });
    assert.equal(foreign.status, 403, foreign.text);
    const none = await placeCall(t, tn, { agent_id: 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9K', agent_version: 1, to_number: sandboxNumber() });
    assert.equal(none.status, 404, none.text);
    assert.equal(none.body.error.code, 'agent_not_found');
    assert.deepEqual(await stored(tn.workspaceId), before);
    assert.deepEqual(await stored(other.workspaceId), { calls: 0, batches: 0, recipients: 0, reservations: 0, leases: 0 });
  });
});

describe('batches', () => {
  it('a batch keeps the version published at its creation for every call, retries and retryBatch included', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { instruction: 'Version 1.', first_message: firstMessage(1) });
    const [busy] = sandboxNumbers('0002', 1, 710);
    const person = listener();
    // Room for two requests on a loaded machine before the batch is due.
    const at = Date.now() + 5000;
    const res = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Pinned',
      recipients: [{ to_number: busy }, { to_number: person }],
      retry_policy: { max_attempts: 2, delay_seconds: 0, retry_on: ['busy'] },
      scheduled_at: new Date(at).toISOString(),
    });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.agent_version, 1);
    const batchId = res.body.batch_id as string;
    await publishNext(agentId, 2);
    assert.ok(Date.now() < at, 'version 2 was published before the batch was due');

    const done = await waitForBatch(t, tn, batchId);
    assert.equal(done.agent_version, 1);
    assert.deepEqual(
      done.recipients.map((r: { status: string; attempts: number }) => [r.status, r.attempts]),
      [
        ['busy', 2],
        ['completed', 1],
      ],
    );
    await publishNext(agentId, 3);
    const again = await t.http.post(`/api/v1/batches/${batchId}/retry`).set(bearer(tn.apiKey));
    assert.equal(again.status, 200, again.text);
    assert.equal(again.body.agent_version, 1);
    await waitForBatch(t, tn, batchId);

    const calls = await batchCalls(t, tn, batchId);
    assert.equal(calls.length, 5, 'two attempts, one call, then two more attempts');
    for (const c of calls) {
      assert.equal(c.agent_version, 1, c.call_id);
      assert.equal(c.first_message, firstMessage(1), c.call_id);
      assert.equal((await storedCall(c.call_id)).instruction, 'Version 1.');
    }
    const listed = await t.http.get('/api/v1/batches').query({ agent_id: agentId }).set(bearer(tn.apiKey));
    assert.equal(listed.body.data[0].agent_version, 1);
  });

  it('a batch naming a version runs it (JSON and CSV); naming none, the published one', async () => {
    const agentId = await twoVersions();
    const named = await createBatch(t, tn, { agent_id: agentId, agent_version: 2, name: 'Draft', recipients: [{ to_number: listener() }] });
    assert.equal(named.status, 201, named.text);
    assert.equal(named.body.agent_version, 2);
    const csv = await csvUpload({ agent_id: agentId, name: 'Draft by CSV', agent_version: '2' }, `to_number\n${listener()}\n`);
    assert.equal(csv.status, 201, csv.text);
    assert.equal(csv.body.agent_version, 2);
    const plain = await csvUpload({ agent_id: agentId, name: 'Published by CSV' }, `to_number\n${listener()}\n`);
    assert.equal(plain.status, 201, plain.text);
    assert.equal(plain.body.agent_version, 1);

    for (const [batch, version] of [
      [named.body, 2],
      [csv.body, 2],
      [plain.body, 1],
    ] as const) {
      await waitForBatch(t, tn, batch.batch_id);
      const [c] = await batchCalls(t, tn, batch.batch_id);
      assert.deepEqual([c.status, c.agent_version, c.first_message], ['completed', version, firstMessage(version)], batch.name);
    }
  });

  it('bad input: 0, a word, past the maximum, a version the agent lacks (JSON and CSV); nothing stored', async () => {
    const agentId = await twoVersions();
    const before = await stored(tn.workspaceId);
    const recipients = [{ to_number: sandboxNumbers('0002', 1, 720)[0] }];
    for (const agent_version of [0, 'two', 2147483648, 1.5]) {
      const res = await createBatch(t, tn, { agent_id: agentId, agent_version, name: 'Bad', recipients });
      assert.equal(res.status, 422, `${JSON.stringify(agent_version)}: ${res.text}`);
      assert.equal(res.body.error.param, 'agent_version', res.text);
    }
    for (const agent_version of ['0', 'two', '2147483648', '99999999999', '1.5']) {
      const res = await csvUpload({ agent_id: agentId, name: 'Bad', agent_version });
      assert.equal(res.status, 422, `${agent_version}: ${res.text}`);
      assert.equal(res.body.error.param, 'agent_version', res.text);
    }
    const missing = [
      await createBatch(t, tn, { agent_id: agentId, agent_version: 3, name: 'Missing', recipients }),
      await csvUpload({ agent_id: agentId, name: 'Missing', agent_version: '2147483647' }),
    ];
    for (const res of missing) {
      assert.equal(res.status, 404, res.text);
      assert.deepEqual([res.body.error.code, res.body.error.param], ['agent_version_not_found', 'agent_version']);
    }
    const foreign = await t.http.post('/api/v1/batches').set(bearer(other.apiKey)).send({ agent_id: agentId, agent_version: 1, name: 'Foreign', recipients });
    assert.equal(foreign.status, 403, foreign.text);
    assert.deepEqual(await stored(tn.workspaceId), before);
    assert.deepEqual(await stored(other.workspaceId), { calls: 0, batches: 0, recipients: 0, reservations: 0, leases: 0 });
  });
});

describe('two instances on one database: a publish counts at once for new calls and batches', () => {
  let b: TestService;
  before(async () => {
    b = await startTestService({ ...FAST_CALLS, DATABASE_URL: t.service.db.url });
  });
  after(() => b.close());

  it("a call and a batch created on B right after a publish on A run the new version, though B's kept agent is the old one", async () => {
    const agentId = await twoVersions();
    // B keeps version 1 and does not hear of the publish (its NOTIFY held back, as if not yet arrived).
    const release = await publishUnheard(t, b, tn, agentId);
    try {
      const call = await placeCall(b, tn, { agent_id: agentId, to_number: listener() });
      assert.equal(call.status, 201, call.text);
      assert.equal(call.body.agent_version, 2);
      assert.deepEqual(await storedCall(call.body.call_id), { instruction: 'Version 2.', agent_version: 2 });
      const batch = await createBatch(b, tn, { agent_id: agentId, name: 'On B', recipients: [{ to_number: listener() }] });
      assert.equal(batch.status, 201, batch.text);
      assert.equal(batch.body.agent_version, 2);

      const done = await waitForCall(b, tn, call.body.call_id);
      assert.deepEqual([done.status, done.agent_version, done.first_message], ['completed', 2, firstMessage(2)]);
      await waitForBatch(b, tn, batch.body.batch_id);
      const [batchCall] = await batchCalls(b, tn, batch.body.batch_id);
      assert.deepEqual([batchCall.agent_version, batchCall.first_message], [2, firstMessage(2)]);
    } finally {
      release();
    }
  });
});

describe('migration 046 on a database with batches', () => {
  const database = migrationDatabase();
  const WS = 'ws_01JD5Z7Q8Y1C2B3A4N5M6K7P8S';
  const AGENT = 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9K';
  const batch = (id: string, status: string, completed: boolean) => ({
    id,
    workspace_id: WS,
    agent_id: AGENT,
    name: id,
    provider: 'provider_a',
    status,
    total: 1,
    concurrency: 1,
    retry_max_attempts: 1,
    retry_delay_s: 0,
    scheduled_at: new Date(),
    completed_at: completed ? new Date() : null,
  });

  it('open batches get their agent published version, finished ones stay null; undone cleanly', async () => {
    const knex = database.knex();
    await undoFrom(knex, '046');
    assert.equal(await knex.schema.hasColumn('batches', 'agent_version'), false);
    await insertWorkspace(knex, WS);
    await knex('agents').insert({ id: AGENT, workspace_id: WS, name: 'Before', draft_version: 4, published_version: 3 });
    await knex('batches').insert([batch('bat_open', 'in_progress', false), batch('bat_paused', 'paused', false), batch('bat_done', 'completed', true)]);

    await redoAll(knex);
    const rows = await knex('batches').where({ workspace_id: WS }).orderBy('id').select('id', 'agent_version');
    assert.deepEqual(rows, [
      { id: 'bat_done', agent_version: null },
      { id: 'bat_open', agent_version: 3 },
      { id: 'bat_paused', agent_version: 3 },
    ]);
    await assert.rejects(knex('batches').where({ id: 'bat_done' }).update({ agent_version: 0 }), /batches_agent_version_positive/);

    await undoFrom(knex, '046');
    assert.equal(await knex.schema.hasColumn('batches', 'agent_version'), false);
    await redoAll(knex);
  });
});
