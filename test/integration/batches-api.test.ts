/**
 * The Batches API's answers and refusals: what a batch reports at creation (queued and skipped
 * recipients, resolved settings, `scheduled_at` always a time), every refusal in the list-shaped 422
 * with nothing stored, the CSV upload with its row and file problems, idempotent re-POSTs, the agent
 * delete guard, and another workspace's batches.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, setWorkspace } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, providerConfig } from '../helpers/calls.js';
import { batchCalls, createBatch, getBatch, sandboxNumbers, waitForBatch } from '../helpers/batches.js';
import { makeAjv, openapiDocument } from '../../src/contract/documents.js';

let t: TestService;
let tn: Tenant;
let other: Tenant;
let agentId: string;

before(async () => {
  t = await startTestService(FAST_CALLS);
  tn = await tenant(t);
  other = await tenant(t, 'Other Co');
  agentId = await createPhoneAgent(t, tn, 'provider_a');
});

after(async () => {
  await t.close();
});

/** The workspace's stored batches and recipients, to show a refusal stored nothing. */
async function stored(workspaceId: string): Promise<{ batches: number; recipients: number }> {
  const [{ count: batches }] = await t.service.db.knex('batches').where({ workspace_id: workspaceId }).count<{ count: string }[]>('* as count');
  const [{ count: recipients }] = await t.service.db
    .knex('batch_recipients as r')
    .join('batches as b', 'b.id', 'r.batch_id')
    .where('b.workspace_id', workspaceId)
    .count<{ count: string }[]>('* as count');
  return { batches: Number(batches), recipients: Number(recipients) };
}

function csvUpload(tenantKey: string, csv: string, fields: Record<string, string>, headers: Record<string, string> = {}) {
  const req = t.http.post('/api/v1/batches/csv').set(bearer(tenantKey)).set(headers);
  for (const [k, v] of Object.entries(fields)) req.field(k, v);
  return req.attach('file', Buffer.from(csv), { filename: 'recipients.csv', contentType: 'text/csv' });
}

describe('createBatch', () => {
  it('queues the valid recipients, explains each skipped one, and reports its settings', async () => {
    const [a, b] = sandboxNumbers('0002', 2, 300);
    const res = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'November reminders',
      recipients: [
        { to_number: a, variables: { name: 'Grace', visits: 2, vip: false } },
        { to_number: `${a.slice(0, 2)} (${a.slice(2, 5)}) ${a.slice(5, 8)}-${a.slice(8)}` },
        { to_number: '555-CALL-NOW' },
        { to_number: b, first_message: 'Hi {{name|there}}!', timezone: 'Europe/Paris' },
      ],
      concurrency: 3,
      retry_policy: { retry_on: ['busy'] },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const batch = res.body;
    assert.match(batch.batch_id, /^bat_[0-9A-Z]{26}$/);
    assert.equal(batch.status, 'queued');
    assert.equal(batch.total, 2);
    assert.equal(batch.provider, 'provider_a', "the agent's only provider");
    assert.equal(batch.scheduled_at, batch.created_at, 'an immediate batch reports its creation time');
    assert.equal(batch.concurrency, 3);
    assert.deepEqual(batch.retry_policy, { max_attempts: 3, delay_seconds: 900, retry_on: ['busy'] }, 'defaults fill what was not sent');
    assert.equal(batch.calling_window, null);
    assert.deepEqual(
      batch.skipped.items.map((s: Record<string, unknown>) => [s.index, s.reason, s.column, s.row]),
      [
        [1, 'duplicate', 'to_number', null],
        [2, 'invalid_number', 'to_number', null],
      ],
    );
    assert.equal(batch.skipped.count, 2);
    const detail = await getBatch(t, tn, batch.batch_id);
    assert.deepEqual(
      detail.recipients.map((r: Record<string, unknown>) => [r.to_number, r.first_message, r.timezone, r.variables]),
      [
        [a, null, null, { name: 'Grace', visits: 2, vip: false }],
        [b, 'Hi {{name|there}}!', 'Europe/Paris', {}],
      ],
    );
    await t.http.post(`/api/v1/batches/${batch.batch_id}/cancel`).set(bearer(tn.apiKey));
  });

  it('refuses an invalid body with every problem listed, and stores nothing', async () => {
    const before = await stored(tn.workspaceId);
    const res = await createBatch(t, tn, { agent_id: agentId, recipients: [{ to_number: 42 }], concurrency: 0, colour: 'red' });
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.ok(Array.isArray(res.body.detail) && res.body.detail.length >= 3, JSON.stringify(res.body));
    const locs = res.body.detail.map((d: { loc: string[] }) => d.loc.join('.'));
    assert.ok(
      locs.some((l: string) => l.includes('name')),
      `missing name: ${locs}`,
    );
    assert.ok(
      locs.some((l: string) => l.includes('concurrency')),
      `concurrency: ${locs}`,
    );
    assert.ok(res.body.error.request_id, 'the envelope rides along');
    assert.deepEqual(await stored(tn.workspaceId), before);
  });

  it('refuses the rules a schema cannot say, each as a detail type, and stores nothing', async () => {
    const before = await stored(tn.workspaceId);
    const base = { agent_id: agentId, name: 'x', recipients: [{ to_number: '+14155550100' }] };
    const cases: Array<[Record<string, unknown>, string, number]> = [
      [{ ...base, recipients: [{ to_number: 'nope' }, { to_number: '12' }] }, 'no_valid_recipients', 422],
      [{ ...base, scheduled_at: new Date(Date.now() + 31 * 86400_000).toISOString() }, 'scheduled_too_far', 422],
      [{ ...base, calling_window: { start: '18:00', end: '09:00', timezone: 'Mars/Olympus' } }, 'invalid_calling_window', 422],
      [{ ...base, recipients: [{ to_number: '+14155550100', timezone: 'Nowhere/Land' }] }, 'invalid_timezone', 422],
      [{ ...base, webhook_url: 'https://user:pass@example.com/hook' }, 'url_not_allowed', 422],
      [{ ...base, provider: 'provider_b' }, 'provider_not_configured', 422],
      [{ ...base, agent_id: 'agt_00000000000000000000000000' }, 'agent_not_found', 404],
    ];
    for (const [body, type, status] of cases) {
      const res = await createBatch(t, tn, body);
      assert.equal(res.status, status, `${type}: ${JSON.stringify(res.body)}`);
      if (status === 422)
        assert.ok(
          res.body.detail.some((d: { type: string }) => d.type === type),
          `${type}: ${JSON.stringify(res.body.detail)}`,
        );
      else assert.equal(res.body.error.code, type);
    }
    const window = await createBatch(t, tn, { ...base, calling_window: { start: '18:00', end: '09:00', timezone: 'Mars/Olympus' } });
    assert.deepEqual(window.body.detail.map((d: { loc: string[] }) => d.loc.at(-1)).sort(), ['end', 'timezone']);
    const none = await createBatch(t, tn, { ...base, recipients: [{ to_number: 'nope' }, { to_number: 'nope' }] });
    assert.equal(none.body.detail.length, 3, 'the refusal, then each skipped recipient');
    assert.deepEqual(await stored(tn.workspaceId), before);
  });

  it("refuses recipients whose variables would fill the agent's texts past their caps, naming each, and stores nothing", async () => {
    const agent = await createPhoneAgent(t, tn, 'provider_a', { instruction: '{{notes}}'.repeat(25), first_message: 'Hi {{name}}.' });
    const notes = 'n'.repeat(2000);
    const before = await stored(tn.workspaceId);
    const [a, b, c] = sandboxNumbers('5200', 3, 500);
    const res = await createBatch(t, tn, {
      agent_id: agent,
      name: 'Bomb',
      recipients: [
        { to_number: a, variables: { notes, name: 'Ada' } },
        { to_number: b, variables: { notes: 'n', name: 'a'.repeat(1997) } },
        { to_number: c, variables: { notes: 'n', bomb: 'b'.repeat(2000) }, first_message: '{{bomb}}'.repeat(200) },
      ],
    });
    assert.equal(res.status, 422, JSON.stringify(res.body).slice(0, 500));
    assert.equal(res.body.error.code, 'filled_text_too_long');
    assert.equal(res.body.error.param, 'recipients.1.variables.name');
    assert.match(res.body.error.message, /'name'.*first_message/);
    assert.deepEqual(
      res.body.detail.map((d: { loc: string[]; type: string }) => [d.type, d.loc]),
      [
        ['filled_text_too_long', ['body', 'recipients', '1', 'variables', 'name']],
        ['filled_text_too_long', ['body', 'recipients', '2', 'variables', 'bomb']],
      ],
    );
    assert.deepEqual(await stored(tn.workspaceId), before);

    const atCap = await createBatch(t, tn, {
      agent_id: agent,
      name: 'At the cap',
      recipients: [{ to_number: a, variables: { notes, name: 'a'.repeat(1996) } }],
    });
    assert.equal(atCap.status, 201, JSON.stringify(atCap.body).slice(0, 500));
    await t.http.post(`/api/v1/batches/${atCap.body.batch_id}/cancel`).set(bearer(tn.apiKey));
  });

  it('needs a provider when the agent has both, and is 402 while billing refuses', async () => {
    const both = await createPhoneAgent(t, tn, 'provider_a', providerConfig('provider_b'));
    const res = await createBatch(t, tn, { agent_id: both, name: 'x', recipients: [{ to_number: '+14155550100' }] });
    assert.equal(res.status, 422);
    assert.equal(res.body.detail[0].type, 'provider_required');
    const ws = await tenant(t, 'Billing');
    const agent = await createPhoneAgent(t, ws, 'provider_a');
    await setWorkspace(t, ws.workspaceId, { subscription_status: 'past_due' });
    const refused = await createBatch(t, ws, { agent_id: agent, name: 'x', recipients: [{ to_number: '+14155550100' }] });
    assert.equal(refused.status, 402);
    assert.equal(refused.body.error.code, 'subscription_inactive');
    assert.deepEqual(await stored(ws.workspaceId), { batches: 0, recipients: 0 });
  });

  it('a scheduled batch reports its time and waits; the same Idempotency-Key gives one batch', async () => {
    const at = new Date(Date.now() + 3600_000).toISOString();
    const body = { agent_id: agentId, name: 'Later', recipients: sandboxNumbers('5000', 3, 400).map((to_number) => ({ to_number })), scheduled_at: at };
    const key = { 'Idempotency-Key': `batch-${Date.now()}` };
    const first = await createBatch(t, tn, body, key);
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assert.equal(first.body.status, 'scheduled');
    assert.equal(first.body.scheduled_at, at);
    const again = await createBatch(t, tn, body, key);
    assert.equal(again.status, 201);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.body.batch_id, first.body.batch_id);
    const list = await t.http.get('/api/v1/batches').query({ status: 'scheduled' }).set(bearer(tn.apiKey));
    assert.equal(list.body.data.filter((b: { name: string }) => b.name === 'Later').length, 1, 'one batch');
    const detail = await getBatch(t, tn, first.body.batch_id);
    assert.ok(detail.recipients.every((r: Record<string, unknown>) => r.status === 'scheduled' && r.next_attempt_at === at));
    assert.deepEqual(await batchCalls(t, tn, first.body.batch_id), [], 'nobody is called early');
    const reused = await createBatch(t, tn, { ...body, name: 'Other' }, key);
    assert.equal(reused.status, 422);
    assert.equal(reused.body.detail[0].type, 'idempotency_key_reused');

    // The agent cannot be deleted while its batch is scheduled; canceled, it can.
    const del = await t.http.delete(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey));
    assert.equal(del.status, 409);
    assert.equal(del.body.error.code, 'agent_has_active_batches');
    const canceled = await t.http.post(`/api/v1/batches/${first.body.batch_id}/cancel`).set(bearer(tn.apiKey));
    assert.equal(canceled.status, 200);
    assert.equal(canceled.body.status, 'canceled');
    assert.ok(canceled.body.recipients.every((r: Record<string, unknown>) => r.status === 'canceled'));
    const done = await waitForBatch(t, tn, first.body.batch_id);
    assert.ok(done.completed_at, 'reported at once: nothing was live');
    const twice = await t.http.post(`/api/v1/batches/${first.body.batch_id}/cancel`).set(bearer(tn.apiKey));
    assert.equal(twice.status, 409);
    assert.equal(twice.body.error.code, 'batch_already_terminal');
    const paused = await t.http.post(`/api/v1/batches/${first.body.batch_id}/pause`).set(bearer(tn.apiKey));
    assert.equal(paused.status, 409);
    assert.equal(paused.body.error.code, 'batch_already_terminal');
    // Billing is judged before the batch: on an inactive subscription a finished batch is not retried.
    await setWorkspace(t, tn.workspaceId, { subscription_status: 'past_due' });
    try {
      const retried = await t.http.post(`/api/v1/batches/${first.body.batch_id}/retry`).set(bearer(tn.apiKey));
      assert.equal(retried.status, 402, retried.text);
      assert.equal(retried.body.error.code, 'subscription_inactive');
    } finally {
      await setWorkspace(t, tn.workspaceId, { subscription_status: 'active' });
    }
    assert.deepEqual(await getBatch(t, tn, first.body.batch_id), done, 'the refusals changed nothing');
  });
});

describe('createBatchFromCsv', () => {
  it('reads the columns, skips bad rows naming row and column, and runs on the same engine', async () => {
    const [a, b, c] = sandboxNumbers('0002', 3, 500);
    const csv = [
      'To_Number,name,first_message',
      `${a},Grace,`,
      `"${b}","Alan, Jr.","Hi Alan,\nit's Acme."`,
      `${c},only two`,
      ',Nobody,',
      'not-a-number,Bad,',
      `${a},Again,`,
      `${c},Charles,${'x'.repeat(2001)}`,
    ].join('\r\n');
    const res = await csvUpload(tn.apiKey, csv, { agent_id: agentId, name: 'From CSV', concurrency: '2', retry_on: 'busy', retry_max_attempts: '1' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.total, 2);
    assert.deepEqual(res.body.retry_policy, { max_attempts: 1, delay_seconds: 900, retry_on: ['busy'] });
    assert.deepEqual(
      res.body.skipped.items.map((s: Record<string, unknown>) => [s.index, s.row, s.column, s.reason]),
      [
        [2, 5, null, 'invalid_row'],
        [3, 6, 'to_number', 'invalid_value'],
        [4, 7, 'to_number', 'invalid_number'],
        [5, 8, 'to_number', 'duplicate'],
        [6, 9, 'first_message', 'invalid_value'],
      ],
    );
    const detail = await getBatch(t, tn, res.body.batch_id);
    assert.deepEqual(
      detail.recipients.map((r: Record<string, unknown>) => [r.to_number, r.variables, r.first_message]),
      [
        [a, { name: 'Grace' }, null],
        [b, { name: 'Alan, Jr.' }, "Hi Alan,\nit's Acme."],
      ],
    );
    const done = await waitForBatch(t, tn, res.body.batch_id);
    assert.equal(done.status, 'completed');
    assert.equal(done.failed_count, 2, 'both busy, no retry left');
  });

  it('refuses recipients and CSV rows that leave a placeholder without a value, naming each, and stores nothing (issue 34)', async () => {
    const agent = await createPhoneAgent(t, tn, 'provider_a', {
      instruction: 'You are the receptionist of Acme Dental. The patient is {{name}}.',
      first_message: 'Hi {{name}}, about your {{visit|appointment}} on {{day}}.',
      variable_placeholders: { day: 'Monday' },
    });
    const before = await stored(tn.workspaceId);
    const [a, b, c] = sandboxNumbers('5400', 3, 700);
    const res = await createBatch(t, tn, {
      agent_id: agent,
      name: 'Nameless',
      recipients: [
        { to_number: a, variables: { name: 'Ada' } },
        { to_number: b, variables: { visit: 'cleaning' } },
        { to_number: c, variables: { Name: 'Bo' } },
      ],
    });
    assert.equal(res.status, 422, JSON.stringify(res.body).slice(0, 500));
    assert.equal(res.body.error.code, 'variable_missing');
    assert.equal(res.body.error.param, 'recipients.1.variables.name');
    assert.match(res.body.error.message, /^Recipient 1: Variable 'name' has no value: the instruction uses \{\{name\}\}/);
    assert.deepEqual(
      res.body.detail.map((d: { loc: string[]; type: string }) => [d.type, d.loc]),
      [
        ['variable_missing', ['body', 'recipients', '1', 'variables', 'name']],
        ['variable_missing', ['body', 'recipients', '2', 'variables', 'name']],
      ],
    );
    // A recipient's own first message replaces the agent's, placeholders and all.
    const own = await createBatch(t, tn, {
      agent_id: agent,
      name: 'Own first message',
      recipients: [{ to_number: a, variables: { name: 'Ada' }, first_message: 'Hello {{who}}!' }],
    });
    assert.equal(own.status, 422);
    assert.deepEqual([own.body.error.code, own.body.error.param], ['variable_missing', 'recipients.0.variables.who']);

    const csv = `to_number,name,visit\n${a},Ada,\n${b},,cleaning\n${c},Bo,check-up\n`;
    const file = await csvUpload(tn.apiKey, csv, { agent_id: agent, name: 'Nameless file' });
    assert.equal(file.status, 422, JSON.stringify(file.body).slice(0, 500));
    assert.equal(file.body.error.code, 'variable_missing');
    assert.equal(file.body.error.param, 'file');
    assert.match(file.body.error.message, /^Row 3: Variable 'name'/);
    assert.deepEqual(
      file.body.detail.map((d: { loc: string[]; type: string }) => [d.type, d.loc]),
      [['variable_missing', ['file', '3', 'name']]],
    );
    assert.deepEqual(await stored(tn.workspaceId), before);

    const fine = await csvUpload(tn.apiKey, `to_number,name,visit\n${a},Ada,\n${c},Bo,check-up\n`, { agent_id: agent, name: 'Named file' });
    assert.equal(fine.status, 201, JSON.stringify(fine.body).slice(0, 500));
    await t.http.post(`/api/v1/batches/${fine.body.batch_id}/cancel`).set(bearer(tn.apiKey));
  });

  it("conversation columns override the agent's settings per row, as a JSON recipient's conversation does over the batch's (issue 34)", async () => {
    const agent = await createPhoneAgent(t, tn, 'provider_a', { conversation: { interruptions: 'never', max_duration_seconds: 300 } });
    const own = { turn_detection: null, interruptions: 'never', idle: null, max_duration_seconds: 300 };
    const [a, b, c] = sandboxNumbers('0002', 3, 900);
    const csv = [
      'to_number,conversation.max_duration_seconds,conversation.interruptions,conversation.idle.idle_ms,conversation.idle.reminders',
      `${a},120,,5000,Still there?|Hello?`,
      `${b},,,,`,
      `${c},,null,,`,
    ].join('\n');
    const res = await csvUpload(tn.apiKey, csv, { agent_id: agent, name: 'Per-row settings' });
    assert.equal(res.status, 201, JSON.stringify(res.body).slice(0, 500));
    const detail = await getBatch(t, tn, res.body.batch_id);
    assert.deepEqual(
      detail.recipients.map((r: Record<string, unknown>) => r.conversation),
      [{ max_duration_seconds: 120, idle: { idle_ms: 5000, reminders: ['Still there?', 'Hello?'] } }, null, { interruptions: null }],
    );
    await waitForBatch(t, tn, res.body.batch_id);
    const ran = async (batchId: string) =>
      new Map((await batchCalls(t, tn, batchId)).map((call) => [call.to_number as string, call.conversation as Record<string, unknown>]));
    const fromFile = await ran(res.body.batch_id);
    assert.deepEqual(fromFile.get(a), {
      ...own,
      max_duration_seconds: 120,
      idle: { idle_ms: 5000, reminders: ['Still there?', 'Hello?'], max_reminders: 2, goodbye_message: null },
    });
    assert.deepEqual(fromFile.get(b), own);
    assert.deepEqual(fromFile.get(c), { ...own, interruptions: 'always' });

    const json = await createBatch(t, tn, {
      agent_id: agent,
      name: 'Per-recipient settings',
      conversation: { max_duration_seconds: 60, interruptions: 'always' },
      recipients: [{ to_number: a, conversation: { max_duration_seconds: 90 } }, { to_number: b }],
    });
    assert.equal(json.status, 201, JSON.stringify(json.body).slice(0, 500));
    await waitForBatch(t, tn, json.body.batch_id);
    const fromJson = await ran(json.body.batch_id);
    assert.deepEqual(fromJson.get(a), { ...own, interruptions: 'always', max_duration_seconds: 90 }, "the recipient's field over the batch's");
    assert.deepEqual(fromJson.get(b), { ...own, interruptions: 'always', max_duration_seconds: 60 });
  });

  it('refuses rows and recipients whose conversation override is bad, naming row and column or recipient and field, and stores nothing', async () => {
    const before = await stored(tn.workspaceId);
    const [a, b, c, d] = sandboxNumbers('0002', 4, 950);
    const csv = [
      'to_number,conversation.max_duration_seconds,conversation.interruptions,conversation.idle.max_reminders,conversation.idle.idle_ms',
      `${a},60,never,,`,
      `${b},5,sometimes,,`,
      `${c},,,1,2000`,
      `${d},ten,,,`,
    ].join('\n');
    const file = await csvUpload(tn.apiKey, csv, { agent_id: agentId, name: 'Bad settings' });
    assert.equal(file.status, 422, JSON.stringify(file.body).slice(0, 500));
    assert.equal(file.body.error.code, 'invalid_value');
    assert.match(file.body.error.param, /^file\.3\.conversation\.(max_duration_seconds|interruptions)$/);
    assert.match(file.body.error.message, /^Row 3: 'conversation\./);
    assert.deepEqual(file.body.detail.map((x: { loc: string[] }) => x.loc.join('|')).sort(), [
      'file|3|conversation.interruptions',
      'file|3|conversation.max_duration_seconds',
      'file|4|conversation.idle.reminders',
      'file|5|conversation.max_duration_seconds',
    ]);
    assert.equal(file.body.detail.find((x: { loc: string[] }) => x.loc[1] === '5').type, 'integer_type');

    const semantic = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Bad recipient settings',
      recipients: [{ to_number: a }, { to_number: b, conversation: { idle: { idle_ms: 2000, max_reminders: 1 } } }],
    });
    assert.equal(semantic.status, 422, JSON.stringify(semantic.body));
    assert.deepEqual([semantic.body.error.code, semantic.body.error.param], ['invalid_value', 'recipients.1.conversation.idle.reminders']);
    const schema = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Bad recipient settings',
      recipients: [{ to_number: a, conversation: { max_duration_seconds: 5 } }],
    });
    assert.equal(schema.status, 422, JSON.stringify(schema.body));
    assert.deepEqual(schema.body.detail[0].loc, ['body', 'recipients', '0', 'conversation', 'max_duration_seconds']);
    assert.deepEqual(await stored(tn.workspaceId), before);
  });

  it("refuses a file whose rows would fill the agent's texts past their caps, naming row and column, and stores nothing", async () => {
    const agent = await createPhoneAgent(t, tn, 'provider_a', { instruction: `Notes: ${'{{notes}}'.repeat(1000)}`, first_message: 'Hi {{name}}.' });
    const before = await stored(tn.workspaceId);
    const [a, b, c] = sandboxNumbers('5300', 3, 600);
    const csv = `to_number,notes,name,first_message\n${a},short,Ada,\n${b},${'n'.repeat(2000)},Bo,\n${c},x,${'C'.repeat(10)},${'{{name}}'.repeat(250)}\n`;
    const res = await csvUpload(tn.apiKey, csv, { agent_id: agent, name: 'Bomb' });
    assert.equal(res.status, 422, JSON.stringify(res.body).slice(0, 500));
    assert.equal(res.body.error.code, 'filled_text_too_long');
    assert.equal(res.body.error.param, 'file');
    assert.match(res.body.error.message, /^Row 3: .*'notes'.*instruction/);
    assert.deepEqual(
      res.body.detail.map((d: { loc: string[]; type: string }) => [d.type, d.loc]),
      [
        ['filled_text_too_long', ['file', '3', 'notes']],
        ['filled_text_too_long', ['file', '4', 'name']],
      ],
    );
    assert.deepEqual(await stored(tn.workspaceId), before);
  });

  it('refuses a file with no valid row or an unreadable header, naming them, and stores nothing', async () => {
    const before = await stored(tn.workspaceId);
    const noValid = await csvUpload(tn.apiKey, 'to_number,name\nnope,A\n,B\n', { agent_id: agentId, name: 'x' });
    assert.equal(noValid.status, 422, JSON.stringify(noValid.body));
    assert.equal(noValid.body.detail[0].type, 'no_valid_recipients');
    assert.deepEqual(
      noValid.body.detail.slice(1).map((d: { loc: string[] }) => d.loc),
      [
        ['file', '2', 'to_number'],
        ['file', '3', 'to_number'],
      ],
    );
    const header = await csvUpload(tn.apiKey, 'phone,bad-name\n+14155550100,x\n', { agent_id: agentId, name: 'x' });
    assert.equal(header.status, 422);
    assert.deepEqual(header.body.detail.map((d: { type: string }) => d.type).sort(), ['csv_invalid_column', 'csv_missing_column']);
    const field = await csvUpload(tn.apiKey, 'to_number\n+14155550100\n', { agent_id: agentId, name: 'x', concurrency: 'lots', colour: 'red' });
    assert.equal(field.status, 422);
    assert.deepEqual(field.body.detail.map((d: { loc: string[] }) => d.loc.at(-1)).sort(), ['colour', 'concurrency']);
    const window = await csvUpload(tn.apiKey, 'to_number\n+14155550100\n', { agent_id: agentId, name: 'x', calling_window_start: '09:00' });
    assert.equal(window.status, 422);
    const noFile = await t.http.post('/api/v1/batches/csv').set(bearer(tn.apiKey)).field('agent_id', agentId).field('name', 'x');
    assert.equal(noFile.status, 422);
    assert.equal(noFile.body.detail[0].loc.at(-1), 'file');
    assert.deepEqual(await stored(tn.workspaceId), before);
  });
  it('a file over 8 MB is 413 naming the file, and a workspace whose subscription is inactive is 402; nothing is stored', async () => {
    const before = await stored(tn.workspaceId);
    const rows = `+14155550100,${'x'.repeat(1000)}\n`.repeat(9000);
    const big = await csvUpload(tn.apiKey, `to_number,note\n${rows}`, { agent_id: agentId, name: 'x' });
    assert.equal(big.status, 413, big.text.slice(0, 300));
    assert.equal(big.body.error.code, 'payload_too_large');
    assert.equal(big.body.error.param, 'file');
    assert.deepEqual(await stored(tn.workspaceId), before);
    const ws = await tenant(t, 'CSV billing');
    const agent = await createPhoneAgent(t, ws, 'provider_a');
    await setWorkspace(t, ws.workspaceId, { subscription_status: 'past_due' });
    const refused = await csvUpload(ws.apiKey, 'to_number\n+14155550100\n', { agent_id: agent, name: 'x' });
    assert.equal(refused.status, 402, refused.text);
    assert.equal(refused.body.error.code, 'subscription_inactive');
    assert.deepEqual(await stored(ws.workspaceId), { batches: 0, recipients: 0 });
  });

  it('a header with four million empty columns, a row with a million fields or one huge record: a small 422 naming the limit, nothing stored', async () => {
    const before = await stored(tn.workspaceId);
    const huge = await csvUpload(tn.apiKey, `to_number${','.repeat(4_000_000)}\n+14155550100\n`, { agent_id: agentId, name: 'x' });
    assert.equal(huge.status, 422);
    assert.equal(huge.body.error.code, 'csv_too_many_columns');
    assert.ok(huge.text.length < 4096, `a small answer (${huge.text.length} bytes)`);
    assert.ok(huge.body.detail.length <= 50);
    assert.match(huge.body.error.message, /102/);
    const names = Array.from({ length: 99 }, (_, i) => `v${i}`);
    const wideRow = await csvUpload(tn.apiKey, `to_number,${names.join(',')}\n+14155550100${','.repeat(1_000_000)}\n`, { agent_id: agentId, name: 'x' });
    assert.equal(wideRow.status, 422);
    assert.equal(wideRow.body.error.code, 'csv_too_many_columns');
    assert.match(wideRow.body.error.message, /line 2/);
    const bigRecord = await csvUpload(tn.apiKey, `to_number,note\n+14155550100,${'x'.repeat(3_000_000)}\n`, { agent_id: agentId, name: 'x' });
    assert.equal(bigRecord.status, 422);
    assert.equal(bigRecord.body.error.code, 'csv_record_too_large');
    assert.ok(bigRecord.text.length < 4096, `a small answer (${bigRecord.text.length} bytes)`);
    const manyBad = await csvUpload(tn.apiKey, `to_number,${Array.from({ length: 100 }, () => 'bad-name').join(',')}\n+14155550100\n`, {
      agent_id: agentId,
      name: 'x',
    });
    assert.equal(manyBad.status, 422);
    assert.equal(manyBad.body.detail.length, 50, 'the first 50 problems');
    assert.deepEqual(await stored(tn.workspaceId), before);
    const health = await t.http.get('/healthz');
    assert.equal(health.status, 200);
  });

  it('takes for the list and time zone fields exactly what the served document states', async () => {
    // The served document's own schema of the form: a client validating with it must refuse what the service refuses.
    const doc = openapiDocument() as { components: { schemas: Record<string, unknown> } };
    const ajv = makeAjv();
    ajv.addSchema(doc, 'openapi.json');
    const documented = (field: string, value: string) =>
      ajv.validate({ $ref: `openapi.json#/components/schemas/BatchCsvUploadForm/properties/${field}` }, value);
    const window = { calling_window_start: '09:00', calling_window_end: '17:00', calling_window_timezone: 'UTC' };
    const cases: Array<[string, string, boolean]> = [
      ['retry_on', 'busy,no_answer', true],
      ['retry_on', ' busy , failed,', true],
      ['retry_on', 'busy,sometimes', false],
      ['retry_on', 'BUSY', false],
      ['calling_window_days', 'mon,tue, fri', true],
      ['calling_window_days', 'mon,funday', false],
      ['calling_window_timezone', 'America/Argentina/Buenos_Aires', true],
      ['calling_window_timezone', 'Etc/GMT+5', true],
      ['calling_window_timezone', 'not a zone', false],
      ['calling_window_timezone', '../etc/passwd', false],
    ];
    const before = await stored(tn.workspaceId);
    let created = 0;
    for (const [field, value, accepted] of cases) {
      assert.equal(documented(field, value), accepted, `the document ${accepted ? 'accepts' : 'refuses'} ${field}=${JSON.stringify(value)}`);
      const fields = { agent_id: agentId, name: 'Form values', ...(field.startsWith('calling_window_') ? window : {}), [field]: value };
      const res = await csvUpload(tn.apiKey, 'to_number\n+14155550100\n', fields);
      assert.equal(res.status, accepted ? 201 : 422, `${field}=${JSON.stringify(value)}: ${JSON.stringify(res.body)}`);
      if (accepted) {
        created += 1;
        await t.http.post(`/api/v1/batches/${res.body.batch_id}/cancel`).set(bearer(tn.apiKey));
      } else assert.equal(res.body.detail[0].loc.at(-1), field);
    }
    assert.equal((await stored(tn.workspaceId)).batches, before.batches + created, 'refused forms stored nothing');
  });

  it('honours Idempotency-Key with the file part of the request: the same file replays, another file is refused', async () => {
    const later = new Date(Date.now() + 3600_000).toISOString();
    const key = { 'Idempotency-Key': `csv-${Date.now()}` };
    const fields = { agent_id: agentId, name: 'Idempotent CSV', scheduled_at: later };
    const first = await csvUpload(tn.apiKey, 'to_number\n+14155550171\n', fields, key);
    assert.equal(first.status, 201, JSON.stringify(first.body));
    const again = await csvUpload(tn.apiKey, 'to_number\n+14155550171\n', fields, key);
    assert.equal(again.status, 201);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.body.batch_id, first.body.batch_id);
    const other = await csvUpload(tn.apiKey, 'to_number\n+14155550172\n', fields, key);
    assert.equal(other.status, 422, JSON.stringify(other.body));
    assert.equal(other.body.detail[0].type, 'idempotency_key_reused');
    await t.http.post(`/api/v1/batches/${first.body.batch_id}/cancel`).set(bearer(tn.apiKey));
  });
});

describe("another workspace's batch", () => {
  it('is 403 on every batch operation and absent from the list; its agent is 403 to create with', async () => {
    const res = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Mine',
      recipients: [{ to_number: '+14155550199' }],
      scheduled_at: new Date(Date.now() + 3600_000).toISOString(),
    });
    const id = res.body.batch_id as string;
    for (const [method, path] of [
      ['get', `/api/v1/batches/${id}`],
      ['post', `/api/v1/batches/${id}/cancel`],
      ['post', `/api/v1/batches/${id}/pause`],
      ['post', `/api/v1/batches/${id}/resume`],
      ['post', `/api/v1/batches/${id}/retry`],
      ['get', `/api/v1/batches/${id}/webhook-deliveries`],
    ] as const) {
      const r = await t.http[method](path).set(bearer(other.apiKey));
      assert.equal(r.status, 403, `${method} ${path}: ${JSON.stringify(r.body)}`);
    }
    const list = await t.http.get('/api/v1/batches').set(bearer(other.apiKey));
    assert.deepEqual(list.body.data, []);
    const theirs = await createBatch(t, other, { agent_id: agentId, name: 'x', recipients: [{ to_number: '+14155550100' }] });
    assert.equal(theirs.status, 403);
    const missing = await t.http.get('/api/v1/batches/bat_00000000000000000000000000').set(bearer(tn.apiKey));
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'batch_not_found');
    assert.equal((await getBatch(t, tn, id)).status, 'scheduled', 'unchanged');
    await t.http.post(`/api/v1/batches/${id}/cancel`).set(bearer(tn.apiKey));
  });
});
