/**
 * The Calls API's rules: what placing a call checks before anything is dialed (each refusal a clear
 * error, no call row, no dial), the concurrency slots calls share with web sessions, Idempotency-Key
 * (a retry never dials twice), reading, listing and filtering, hanging up a call before it is dialed,
 * the deliveries of a call's event, and another workspace's calls.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, connect, mintSession, setWorkspace, waitFor, createAgent } from '../helpers/realtime.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { FAST_CALLS, createPhoneAgent, getCall, placeCall, providerConfig, sandboxNumber, waitForCall } from '../helpers/calls.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';

let t: TestService;
let sandbox: SandboxCarriers;
let receiver: Receiver;

before(async () => {
  t = await startTestService(FAST_CALLS);
  sandbox = t.service.sandbox.carriers!.server;
  receiver = await startReceiver();
});

after(async () => {
  await t.close();
  await receiver.close();
});

async function callCount(workspaceId: string): Promise<number> {
  const [{ count }] = await t.service.db.knex('calls').where({ workspace_id: workspaceId }).count<{ count: string }[]>('* as count');
  return Number(count);
}

/** Places a call expected to be refused; checks the envelope and that nothing was stored or dialed. */
async function refused(tn: Tenant, body: Record<string, unknown>, status: number, code: string, param: string | null = null) {
  const callsBefore = await callCount(tn.workspaceId);
  const dialsBefore = sandbox.calls().length;
  const res = await placeCall(t, tn, body);
  assert.equal(res.status, status, JSON.stringify(res.body));
  assert.equal(res.body.error.code, code, JSON.stringify(res.body));
  if (param !== null) assert.equal(res.body.error.param, param);
  assert.ok(res.body.error.request_id);
  assert.equal(await callCount(tn.workspaceId), callsBefore, 'no call stored');
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(sandbox.calls().length, dialsBefore, 'nothing dialed');
}

describe('placing a call: refusals', () => {
  it('refuses invalid bodies with 422 naming the field', async () => {
    const tn = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    await refused(tn, { agent_id: agentId }, 422, 'missing_field', 'to_number');
    await refused(tn, { agent_id: agentId, to_number: '4155550123' }, 422, 'invalid_value', 'to_number');
    await refused(tn, { agent_id: agentId, to_number: '+1 415 555 0123' }, 422, 'invalid_value', 'to_number');
    await refused(tn, { agent_id: agentId, to_number: '+14155550123', from_number: 'me' }, 422, 'invalid_value', 'from_number');
    await refused(tn, { agent_id: agentId, to_number: '+14155550123', colour: 'red' }, 422, 'unknown_field', 'colour');
    await refused(tn, { agent_id: agentId, to_number: '+14155550123', provider: 'provider_c' }, 422, 'invalid_value', 'provider');
    for (const value of [{ first: 'Ada' }, ['Ada'], null])
      await refused(tn, { agent_id: agentId, to_number: '+14155550123', variables: { name: value } }, 422, 'invalid_type', 'variables.name');
  });

  it('takes JSON scalars as variables: renders them into the placeholders and keeps them as sent', async () => {
    const tn = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_a', {
      first_message: 'Hi {{name}}: {{count}} items, {{ratio}} each, member {{vip}}, big {{big}}, {{missing|nothing else}}.',
    });
    const variables = { name: 'Ada', count: 3, ratio: 2.5, vip: true, big: 1e21 };
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber(), variables });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.first_message, 'Hi Ada: 3 items, 2.5 each, member true, big 1e+21, nothing else.');
    assert.deepEqual(res.body.variables, variables);
    assert.deepEqual((await getCall(t, tn, res.body.call_id)).variables, variables, 'stored with their JSON types');
    await waitForCall(t, tn, res.body.call_id);
  });

  it("a placeholder's value: the call's variable, else the agent's default, else the placeholder's own; none of them is 422 variable_missing, nothing stored (issue 34)", async () => {
    const tn = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_a', {
      instruction: 'You are the receptionist of Acme Dental. Remind {{name}} of the {{visit|appointment}}.',
      first_message: 'Hi {{name|there}}, this is {{clinic|Acme}} about your {{visit|appointment}}.',
      variable_placeholders: { clinic: 'Acme Dental' },
    });
    const missing = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber() });
    assert.equal(missing.status, 422, JSON.stringify(missing.body));
    assert.deepEqual([missing.body.error.code, missing.body.error.param], ['variable_missing', 'variables.name']);
    assert.match(missing.body.error.message, /'name' has no value: the instruction uses \{\{name\}\}/);
    const ownFirst = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber(), variables: { name: 'Ada' }, first_message: 'Hi {{nickname}}!' });
    assert.equal(ownFirst.status, 422);
    assert.deepEqual([ownFirst.body.error.code, ownFirst.body.error.param], ['variable_missing', 'variables.nickname']);
    assert.equal(await callCount(tn.workspaceId), 0, 'nothing stored');

    const placed = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0002'), variables: { name: 'Ada' } });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    assert.equal(placed.body.first_message, 'Hi Ada, this is Acme Dental about your appointment.');
    const row = await t.service.db.knex('calls').where({ id: placed.body.call_id }).first('instruction');
    assert.equal(row.instruction, 'You are the receptionist of Acme Dental. Remind Ada of the appointment.');
    const given = await placeCall(t, tn, {
      agent_id: agentId,
      to_number: sandboxNumber('0002'),
      variables: { name: 'Bo', visit: 'cleaning', clinic: 'Acme Smiles' },
    });
    assert.equal(given.body.first_message, 'Hi Bo, this is Acme Smiles about your cleaning.');
    // Busy numbers: the calls end without a conversation.
    for (const id of [placed.body.call_id, given.body.call_id]) await waitForCall(t, tn, id);
  });

  it('holds each filled text to its own cap: a variable repeated past it is refused naming the variable and the field, one at the cap is placed', async () => {
    const tn = await tenant(t);
    const notes = 'n'.repeat(2000);
    // 25 placeholders of a 2,000-character value fill the instruction to exactly its cap of 50,000.
    const atCap = await createPhoneAgent(t, tn, 'provider_a', { instruction: '{{notes}}'.repeat(25), first_message: 'Hi {{name}}.' });
    const overByOne = await createPhoneAgent(t, tn, 'provider_a', { instruction: `${'{{notes}}'.repeat(25)}.` });
    const overCap = await createPhoneAgent(t, tn, 'provider_a', { instruction: `${'{{notes}}'.repeat(1000)}.` });
    const cases: Array<[string, Record<string, unknown>, string, string]> = [
      [overCap, { variables: { notes } }, 'variables.notes', 'instruction'],
      [overByOne, { variables: { notes } }, 'variables.notes', 'instruction'],
      [atCap, { variables: { notes, name: 'a'.repeat(1997) } }, 'variables.name', 'first_message'],
      [atCap, { variables: { notes, greeting: 'g'.repeat(500) }, first_message: '{{greeting}}'.repeat(5) }, 'variables.greeting', 'first_message'],
    ];
    for (const [agentId, body, param, field] of cases) {
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: '+14155550123', ...body });
      assert.equal(res.status, 422, JSON.stringify(res.body).slice(0, 500));
      assert.equal(res.body.error.code, 'filled_text_too_long');
      assert.equal(res.body.error.param, param);
      assert.match(res.body.error.message, new RegExp(`'${param.split('.')[1]}'.*${field}`));
      assert.ok(res.body.error.request_id);
    }
    const withVoicemail = await createPhoneAgent(t, tn, 'provider_a', { voicemail_config: { enabled: true, message: '{{notes}}{{notes}}' } });
    await refused(
      tn,
      { agent_id: withVoicemail, to_number: '+14155550123', variables: { notes: 'v'.repeat(1001) } },
      422,
      'filled_text_too_long',
      'variables.notes',
    );

    const placed = await placeCall(t, tn, { agent_id: atCap, to_number: sandboxNumber(), variables: { notes, name: 'a'.repeat(1996) } });
    assert.equal(placed.status, 201, JSON.stringify(placed.body).slice(0, 500));
    assert.equal(placed.body.first_message, `Hi ${'a'.repeat(1996)}.`);
    const row = await t.service.db.knex('calls').where({ id: placed.body.call_id }).first('instruction');
    assert.equal(row.instruction, notes.repeat(25));
    assert.equal(await callCount(tn.workspaceId), 1, 'only the call at the cap is stored');
    // Not talked through: the sandbox voice would speak its 2,000-character greeting in real time.
    assert.equal((await t.http.post(`/api/v1/calls/${placed.body.call_id}/hangup`).set(bearer(tn.apiKey))).status, 200);
    await waitForCall(t, tn, placed.body.call_id);
  });

  it('refuses an agent without the provider, with both and none chosen, or without a calling number', async () => {
    const tn = await tenant(t);
    const bare = await createAgent(t, tn);
    await refused(tn, { agent_id: bare, to_number: '+14155550123' }, 422, 'provider_not_configured', 'provider');
    const onlyA = await createPhoneAgent(t, tn, 'provider_a');
    await refused(tn, { agent_id: onlyA, to_number: '+14155550123', provider: 'provider_b' }, 422, 'provider_not_configured', 'provider');
    const both = await createPhoneAgent(t, tn, 'provider_a', providerConfig('provider_b'));
    await refused(tn, { agent_id: both, to_number: '+14155550123' }, 422, 'provider_required', 'provider');
    const noNumber = await createPhoneAgent(t, tn, 'provider_a');
    const patched = await t.http
      .patch(`/api/v1/agents/${noNumber}`)
      .set(bearer(tn.apiKey))
      .send({ provider_a_config: { phone_number: null } });
    assert.equal(patched.status, 200);
    await refused(tn, { agent_id: noNumber, to_number: '+14155550123' }, 422, 'from_number_missing', 'from_number');
    const withFrom = await placeCall(t, tn, { agent_id: noNumber, to_number: sandboxNumber('0002'), from_number: '+14155550111' });
    assert.equal(withFrom.status, 201, JSON.stringify(withFrom.body));
    assert.equal(withFrom.body.from_number, '+14155550111');
    await waitForCall(t, tn, withFrom.body.call_id);
    assert.equal(sandbox.calls().find((c) => c.to === withFrom.body.to_number)?.from, '+14155550111', 'dialed from that number');
  });

  it('refuses a webhook_url that points inside the network in production-like policy, and unknown or foreign agents', async () => {
    const tn = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    await refused(tn, { agent_id: agentId, to_number: '+14155550123', webhook_url: 'ftp://example.com/x' }, 422, 'invalid_value', 'webhook_url');
    await refused(tn, { agent_id: 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9K', to_number: '+14155550123' }, 404, 'agent_not_found', 'agent_id');
    const other = await tenant(t);
    const theirs = await createPhoneAgent(t, other, 'provider_a');
    await refused(tn, { agent_id: theirs, to_number: '+14155550123' }, 403, 'forbidden', 'agent_id');
  });

  it('refuses an inactive subscription, used-up plan minutes and no credit with 402', async () => {
    const tn = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const body = { agent_id: agentId, to_number: '+14155550123' };
    await setWorkspace(t, tn.workspaceId, { subscription_status: 'past_due' });
    await refused(tn, body, 402, 'subscription_inactive');
    await setWorkspace(t, tn.workspaceId, { subscription_status: 'active', credit_balance_cents: 0 });
    await refused(tn, body, 402, 'insufficient_credit');
    await setWorkspace(t, tn.workspaceId, { credit_balance_cents: 1000 });
    await t.service.db.knex('usage_records').insert({
      workspace_id: tn.workspaceId,
      kind: 'phone_call',
      ref_id: `call_used_${tn.workspaceId}`,
      seconds: 600 * 60,
      minutes: 600,
      cents: 0,
      started_at: new Date(),
    });
    await refused(tn, body, 402, 'plan_limit_reached');
  });
});

describe('concurrency slots', () => {
  it('calls and web sessions share the workspace limit: at the limit a call gets 429 and nothing is dialed', async () => {
    const tn = await tenant(t);
    await setWorkspace(t, tn.workspaceId, { concurrent_session_limit: 2 });
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const to = sandboxNumber('7001');
    sandbox.setScript(to, [{ waitForAgent: true }, { say: 'Hold on.' }, { pause: 20_000 }]);
    const first = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    assert.equal(first.status, 201);
    const session = connect((await mintSession(t, tn, agentId, 'text')).ws_url);
    await session.next('session_started');
    const before = await callCount(tn.workspaceId);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('7002') });
    assert.equal(res.status, 429, JSON.stringify(res.body));
    assert.equal(res.body.error.code, 'concurrency_limit_reached');
    assert.ok(Number(res.headers['retry-after']) >= 1);
    assert.equal(await callCount(tn.workspaceId), before);
    await session.close();
    // The session's slot is given back once the server has seen the close: then a call fits.
    await waitFor(async () => (await t.service.db.knex('session_leases').where({ workspace_id: tn.workspaceId })).length === 1, 5000, "the session's slot");
    const next = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0002') });
    assert.equal(next.status, 201, JSON.stringify(next.body));
    await waitForCall(t, tn, next.body.call_id);
    // A call's slot is released when it ends.
    assert.equal((await t.http.post(`/api/v1/calls/${first.body.call_id}/hangup`).set(bearer(tn.apiKey))).status, 200);
    await waitForCall(t, tn, first.body.call_id);
    const leases = await t.service.db.knex('session_leases').where({ workspace_id: tn.workspaceId });
    assert.deepEqual(leases, []);
  });
});

describe('Idempotency-Key', () => {
  it('a retry answers the first call and never dials twice; another body with the key is refused', async () => {
    const tn = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_b');
    const to = sandboxNumber('0002');
    const key = `retry-${Date.now()}`;
    const first = await placeCall(t, tn, { agent_id: agentId, to_number: to }, { 'Idempotency-Key': key });
    const again = await placeCall(t, tn, { agent_id: agentId, to_number: to }, { 'Idempotency-Key': key });
    assert.equal(first.status, 201);
    assert.equal(again.status, 201);
    assert.equal(again.body.call_id, first.body.call_id);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    await waitForCall(t, tn, first.body.call_id);
    assert.equal(sandbox.calls().filter((c) => c.to === to).length, 1, 'dialed once');
    assert.equal(await callCount(tn.workspaceId), 1);
    const other = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0002') }, { 'Idempotency-Key': key });
    assert.equal(other.status, 422);
    assert.equal(other.body.error.code, 'idempotency_key_reused');
  });
});

describe('reading calls', () => {
  it('lists newest first with filters and cursor pages; a foreign or unknown id gives 403 or 404', async () => {
    const tn = await tenant(t);
    const a = await createPhoneAgent(t, tn, 'provider_a');
    const b = await createPhoneAgent(t, tn, 'provider_b');
    const ids: string[] = [];
    for (const [agent, suffix] of [
      [a, '0002'],
      [b, '0004'],
      [a, '0004'],
    ] as const) {
      const res = await placeCall(t, tn, { agent_id: agent, to_number: sandboxNumber(suffix) });
      ids.push(res.body.call_id);
      await waitForCall(t, tn, res.body.call_id);
    }
    const list = async (q = '') => {
      const res = await t.http.get(`/api/v1/calls${q}`).set(bearer(tn.apiKey));
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return res.body;
    };
    assert.deepEqual(
      (await list()).data.map((c: { call_id: string }) => c.call_id),
      [...ids].reverse(),
    );
    assert.deepEqual(
      (await list(`?agent_id=${a}`)).data.map((c: { call_id: string }) => c.call_id),
      [ids[2], ids[0]],
    );
    assert.deepEqual(
      (await list('?status=busy')).data.map((c: { call_id: string }) => c.call_id),
      [ids[0]],
    );
    assert.deepEqual((await list('?direction=inbound')).data, []);
    assert.equal((await list('?direction=outbound')).data.length, 3);
    const created = (await getCall(t, tn, ids[1])).created_at;
    assert.deepEqual(
      (await list(`?created_after=${encodeURIComponent(created)}`)).data.map((c: { call_id: string }) => c.call_id),
      [ids[2], ids[1]],
    );
    assert.deepEqual(
      (await list(`?created_before=${encodeURIComponent(created)}`)).data.map((c: { call_id: string }) => c.call_id),
      [ids[0]],
    );
    const page = await list('?limit=2');
    assert.equal(page.has_more, true);
    assert.deepEqual(
      (await list(`?limit=2&starting_after=${page.next_cursor}`)).data.map((c: { call_id: string }) => c.call_id),
      [ids[0]],
    );
    assert.equal((await t.http.get('/api/v1/calls?status=talking').set(bearer(tn.apiKey))).status, 422);
    assert.equal((await t.http.get('/api/v1/calls?created_after=yesterday').set(bearer(tn.apiKey))).status, 422);

    const other = await tenant(t);
    const foreign = await t.http.get(`/api/v1/calls/${ids[0]}`).set(bearer(other.apiKey));
    assert.equal(foreign.status, 403);
    assert.equal(foreign.body.error.code, 'forbidden');
    assert.equal((await t.http.post(`/api/v1/calls/${ids[0]}/hangup`).set(bearer(other.apiKey))).status, 403);
    assert.equal((await t.http.get(`/api/v1/calls/${ids[0]}/webhook-deliveries`).set(bearer(other.apiKey))).status, 403);
    assert.deepEqual((await t.http.get('/api/v1/calls').set(bearer(other.apiKey))).body.data, []);
    const missing = await t.http.get('/api/v1/calls/call_01JD5Z9K3M4N5P6Q7R8S9T0V1W').set(bearer(tn.apiKey));
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'call_not_found');
    assert.equal((await t.http.get('/api/v1/calls/not-a-call').set(bearer(tn.apiKey))).status, 422);
  });

  it("lists a call's webhook deliveries once it is terminal", async () => {
    const tn = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0002'), webhook_url: receiver.url });
    await waitForCall(t, tn, res.body.call_id);
    const deliveries = await waitFor(
      async () => {
        const d = await t.http.get(`/api/v1/calls/${res.body.call_id}/webhook-deliveries`).set(bearer(tn.apiKey));
        assert.equal(d.status, 200);
        return d.body.data.length === 1 && d.body.data[0].status ? d.body : null;
      },
      5000,
      'delivery',
    );
    assert.equal(deliveries.data[0].target_url, receiver.url);
    assert.equal(deliveries.data[0].webhook_id, null);
    assert.equal(deliveries.data[0].call_id, res.body.call_id);
  });
});

describe('hanging up before the dial', () => {
  it('a queued call not yet handed to the carrier is canceled, sends call.completed, and is never dialed', async () => {
    const tn = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    // Holding the job queue back keeps the call queued.
    await t.service.jobs.stop();
    try {
      const to = sandboxNumber('7003');
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: to, webhook_url: receiver.url });
      assert.equal(res.status, 201);
      const hung = await t.http.post(`/api/v1/calls/${res.body.call_id}/hangup`).set(bearer(tn.apiKey));
      assert.equal(hung.status, 200, JSON.stringify(hung.body));
      assert.equal(hung.body.status, 'canceled');
      assert.equal(hung.body.end_reason, 'canceled');
      assert.ok(hung.body.ended_at);
      await t.service.jobs.start();
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(sandbox.calls().filter((c) => c.to === to).length, 0, 'never dialed');
      await waitFor(async () => receiver.requests.some((r) => JSON.parse(r.rawBody.toString()).conversation_id === res.body.call_id), 5000, 'call.completed');
    } finally {
      await t.service.jobs.start().catch(() => undefined);
    }
  });
});
