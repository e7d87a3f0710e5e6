/**
 * Erasure and retention of conversations (issue 36): a finished, recorded call with a webhook, an
 * idempotent create and live events is erased; a walk of the whole schema (every text, JSON and array
 * column of every table, so a table added later is covered) then finds the call's id only in its
 * tombstone and in the rows billing and its batch keep; its recording links answer 404 and its event
 * stream 404 `conversation_erased`. A live call is refused (409) and nothing changes; the workspace's
 * transcript retention erases through its job on a clock moved forward; erasures sent to a second
 * instance while the first finalises the call never leave content beside a tombstone. A transferred
 * call's transfer attempts go with its content. Every answer is checked against the contract.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Knex } from 'knex';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, connect, createAgent, fixture, mintSession, waitFor } from '../helpers/realtime.js';
import { sessionRecord } from '../helpers/recordings.js';
import { FAST_CALLS, createPhoneAgent, getCall, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';
import { TRANSCRIPT_RETENTION_JOB } from '../../src/erasure/service.js';

let offsetMs = 0;
const movedClock = { now: () => new Date(Date.now() + offsetMs) };

let t: TestService;
let tn: Tenant;
let receiver: Receiver;
const HELLO = fixture('audio/caller-hello.ulaw-8k.raw');
const sandboxOf = (s: TestService): SandboxCarriers => s.service.sandbox.carriers!.server;

before(async () => {
  t = await startTestService({ ...FAST_CALLS, RECORDING_FLUSH_MS: '200', TRANSCRIPT_RETENTION_SWEEP_MS: '50' }, { clock: movedClock });
  tn = await tenant(t);
  receiver = await startReceiver();
});

after(async () => {
  await receiver.close();
  await t.close();
});

/** Tables and rows (as text) where `id` appears in any text, JSON or array column of the public schema. */
async function rowsHolding(knex: Knex, id: string): Promise<Array<{ table: string; row: Record<string, unknown> }>> {
  const { rows: columns } = await knex.raw<{ rows: Array<{ table_name: string; column_name: string }> }>(
    `select table_name, column_name from information_schema.columns c
      where table_schema = 'public' and data_type in ('text', 'character varying', 'json', 'jsonb', 'ARRAY')
        and exists (select 1 from information_schema.tables t where t.table_schema = 'public' and t.table_name = c.table_name and t.table_type = 'BASE TABLE')
      order by table_name, column_name`,
  );
  const byTable = new Map<string, string[]>();
  for (const c of columns) byTable.set(c.table_name, [...(byTable.get(c.table_name) ?? []), c.column_name]);
  const found: Array<{ table: string; row: Record<string, unknown> }> = [];
  for (const [table, cols] of byTable) {
    const where = cols.map(() => `??::text like ?`).join(' or ');
    const bindings = cols.flatMap((c) => [c, `%${id}%`]);
    const { rows } = await knex.raw(`select * from ?? where ${where}`, [table, ...bindings]);
    for (const row of rows) found.push({ table, row });
  }
  return found;
}

/**
 * What the walk may find of an erased call: its tombstone, the billing and batch rows that name it, and
 * a do-not-call entry made in it (the person's wish outlives the call's content).
 */
const KEPT = new Set(['calls', 'usage_records', 'batch_recipients', 'do_not_call_entries']);

async function recordedCall(suffix: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  const agentId = await createPhoneAgent(t, tn, 'provider_a', { recording: { enabled: true } });
  const to = sandboxNumber(suffix);
  sandboxOf(t).setScript(to, [{ waitForAgent: true }, { play: HELLO, label: 'hello' }, { hangup: true }]);
  const res = await placeCall(t, tn, { agent_id: agentId, to_number: to, webhook_url: receiver.url, variables: { customer_name: 'Grace' }, ...extra }, headers);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.call_id as string;
}

describe('erasing a call', () => {
  it('leaves only the tombstone: the schema walk, the record, the recording links and the event stream', async () => {
    const callId = await recordedCall('7101', {}, { 'Idempotency-Key': `erase-${Date.now()}` });
    const call = await waitForCall(t, tn, callId);
    assert.equal(call.status, 'completed');
    assert.ok(call.transcript.length > 0, 'something was said');
    assert.ok(call.recording, 'it was recorded');
    await receiver.waitFor(1, 15_000);
    const knex = t.service.db.knex;
    await waitFor(async () => (await knex('webhook_deliveries').where({ call_id: callId, state: 'done' })).length > 0, 10_000, 'the delivery');
    const before = (await rowsHolding(knex, callId)).map((r) => r.table);
    for (const table of ['calls', 'conversation_events', 'webhook_events', 'webhook_deliveries', 'recordings', 'idempotency_keys']) {
      assert.ok(before.includes(table), `before erasure ${table} holds the call (the walk finds what it should)`);
    }

    const del = await t.http.delete(`/api/v1/calls/${callId}`).set(bearer(tn.apiKey));
    assert.equal(del.status, 200, JSON.stringify(del.body));
    assert.ok(del.body.erased_at);
    assert.deepEqual(del.body.transcript, []);
    assert.deepEqual(del.body.tool_calls, []);
    assert.deepEqual(del.body.variables, {});
    assert.equal(del.body.message_count, 0);
    assert.equal(del.body.summary, null);
    assert.equal(del.body.sentiment, null);
    assert.equal(del.body.first_message, null);
    assert.equal(del.body.recording, null);
    assert.equal(del.body.recording_url, null);
    // What billing and usage need stays.
    assert.equal(del.body.status, call.status);
    assert.equal(del.body.duration, call.duration);
    assert.equal(del.body.agent_id, call.agent_id);
    assert.equal(del.body.ended_at, call.ended_at);

    const left = await rowsHolding(knex, callId);
    const strays = left.filter((r) => !KEPT.has(r.table));
    assert.deepEqual(strays, [], 'nothing but the tombstone holds the call');
    const tomb = left.filter((r) => r.table === 'calls');
    assert.equal(tomb.length, 1);
    assert.deepEqual(tomb[0].row.transcript, []);
    assert.equal(tomb[0].row.instruction, '');
    assert.equal(tomb[0].row.analysis_results, null);
    assert.equal((await knex('usage_records').where({ ref_id: callId })).length, 1, 'its usage is kept');

    assert.deepEqual(await getCall(t, tn, callId), del.body, 'a later read is the tombstone');
    const dl = await t.http.get(`/api/v1/calls/${callId}/recording`).set(bearer(tn.apiKey));
    assert.equal(dl.status, 404);
    assert.equal(dl.body.error.code, 'recording_not_found');
    assert.equal(dl.body.error.reason, 'deleted');
    const link = new URL(call.recording_url);
    const byLink = await t.http.get(`${link.pathname}${link.search}`);
    assert.equal(byLink.status, 404, 'the signed link of an erased call');
    assert.equal(byLink.body.error.reason, 'deleted');
    const stream = await t.http.get(`/api/v1/calls/${callId}/events`).set(bearer(tn.apiKey));
    assert.equal(stream.status, 404);
    assert.equal(stream.body.error.code, 'conversation_erased');
    assert.deepEqual(
      (await rowsHolding(knex, callId)).filter((r) => !KEPT.has(r.table)),
      [],
      'reading it wrote nothing back',
    );

    const again = await t.http.delete(`/api/v1/calls/${callId}`).set(bearer(tn.apiKey));
    assert.equal(again.status, 200);
    assert.deepEqual(again.body, del.body, 'erasing again answers the same tombstone');
  });

  it("takes the transfer attempts (the reason is the agent's words) with the content", async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { transfer_phone_number: '+14155550199', transfer_criteria: 'The caller asks for a person.' });
    const to = sandboxNumber('7103');
    sandboxOf(t).setScript(to, [{ waitForAgent: true }, { say: 'Please transfer call to a person.' }, { pause: 5000 }]);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const call = await waitForCall(t, tn, res.body.call_id);
    assert.equal(call.transfers.length, 1, JSON.stringify(call.transfers));
    const knex = t.service.db.knex;
    assert.ok(
      (await rowsHolding(knex, call.call_id)).some((r) => r.table === 'call_transfers'),
      'the walk finds the attempt',
    );
    const del = await t.http.delete(`/api/v1/calls/${call.call_id}`).set(bearer(tn.apiKey));
    assert.equal(del.status, 200, JSON.stringify(del.body));
    assert.deepEqual(del.body.transfers, []);
    assert.deepEqual((await getCall(t, tn, call.call_id)).transfers, []);
    assert.deepEqual(await knex('call_transfers').where({ call_id: call.call_id }), []);
  });

  it('a live call is refused with 409 conversation_live and keeps everything; unknown and foreign calls are 404 and 403', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_b');
    const to = sandboxNumber('7102');
    sandboxOf(t).setScript(to, [{ waitForAgent: true }, { play: HELLO, label: 'hello' }, { pause: 3000 }, { hangup: true }]);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    const live = await waitForCall(t, tn, res.body.call_id, (c) => c.status === 'in_progress');
    const del = await t.http.delete(`/api/v1/calls/${live.call_id}`).set(bearer(tn.apiKey));
    assert.equal(del.status, 409);
    assert.equal(del.body.error.code, 'conversation_live');
    const done = await waitForCall(t, tn, live.call_id);
    assert.equal(done.erased_at, null);
    assert.ok(done.transcript.length > 0, 'its transcript was kept');
    const unknown = await t.http.delete('/api/v1/calls/call_01JD5Z9K3M4N5P6Q7R8S9T0V1W').set(bearer(tn.apiKey));
    assert.equal(unknown.status, 404);
    const other = await tenant(t);
    const foreign = await t.http.delete(`/api/v1/calls/${live.call_id}`).set(bearer(other.apiKey));
    assert.equal(foreign.status, 403);
    assert.equal((await getCall(t, tn, live.call_id)).erased_at, null);
  });
});

describe('erasing a web session', () => {
  it('a live session is refused; once finished only its tombstone is left', async () => {
    const agentId = await createAgent(t, tn, { instruction: 'You are the receptionist of Acme Dental.', first_message: 'Hi! Ask me anything.' });
    const c = connect((await mintSession(t, tn, agentId, 'text', 'visitor-erase')).ws_url);
    const sessionId = String((await c.next('session_started')).session_id);
    await c.next('text');
    await c.next('turn_complete');
    c.sendFrame('text/plain', Buffer.from('What are your opening hours on Saturday?').toString('base64'));
    await c.next('text');
    await c.next('turn_complete');
    const live = await t.http.delete(`/api/v1/realtime/conversations/${sessionId}`).set(bearer(tn.apiKey));
    assert.equal(live.status, 409);
    assert.equal(live.body.error.code, 'conversation_live');
    await c.close();
    const record = await sessionRecord(t, tn, sessionId);
    assert.equal(record.erased_at, null);
    assert.ok(record.transcript.length > 0);
    const del = await t.http.delete(`/api/v1/realtime/conversations/${sessionId}`).set(bearer(tn.apiKey));
    assert.equal(del.status, 200, JSON.stringify(del.body));
    assert.ok(del.body.erased_at);
    assert.deepEqual([del.body.transcript, del.body.summary, del.body.first_message, del.body.message_count], [[], null, null, 0]);
    assert.deepEqual([del.body.user_id, del.body.duration, del.body.status], [record.user_id, record.duration, record.status]);
    assert.deepEqual(
      (await rowsHolding(t.service.db.knex, sessionId)).filter((r) => !KEPT.has(r.table) && r.table !== 'realtime_conversations'),
      [],
    );
    const stream = await t.http.get(`/api/v1/realtime/conversations/${sessionId}/events`).set(bearer(tn.apiKey));
    assert.equal(stream.status, 404);
    assert.equal(stream.body.error.code, 'conversation_erased');
    const unknown = await t.http.delete('/api/v1/realtime/conversations/conv_01JD5ZB3M4N5P6Q7R8S9T0V1W2').set(bearer(tn.apiKey));
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, 'conversation_not_found');
  });
});

describe('transcript retention', () => {
  it('settings: null by default, a value set, a bad value refused without change', async () => {
    const read = await t.http.get('/api/v1/workspace/recording-settings').set(bearer(tn.apiKey));
    assert.equal(read.body.transcript_retention_days, null);
    for (const bad of [{ transcript_retention_days: 0 }, { transcript_retention_days: 4000 }, { transcript_retention_days: 'week' }]) {
      const res = await t.http.patch('/api/v1/workspace/recording-settings').set(bearer(tn.apiKey)).send(bad);
      assert.equal(res.status, 422, JSON.stringify(bad));
    }
    assert.equal((await t.http.get('/api/v1/workspace/recording-settings').set(bearer(tn.apiKey))).body.transcript_retention_days, null);
  });

  it('the job erases a finished call past the workspace retention, and only then', async () => {
    const callId = await recordedCall('7103');
    await waitForCall(t, tn, callId);
    const set = await t.http.patch('/api/v1/workspace/recording-settings').set(bearer(tn.apiKey)).send({ transcript_retention_days: 2 });
    assert.equal(set.status, 200);
    assert.equal(set.body.transcript_retention_days, 2);
    assert.equal(set.body.retention_days_default, true, 'the recordings rule is left as it was');
    await t.service.jobs.add(TRANSCRIPT_RETENTION_JOB, {}, { runAt: new Date() });
    await t.service.erasure.sweep();
    assert.equal((await getCall(t, tn, callId)).erased_at, null, 'not yet past its retention');
    offsetMs += 3 * 86_400_000;
    try {
      // Asked again on each look: a run that began before the clock moved schedules its next run by the
      // moved clock (three days on), replacing an earlier ask.
      const erased = await waitFor(
        async () => {
          const c = await getCall(t, tn, callId);
          if (c.erased_at) return c;
          await t.service.jobs.add(TRANSCRIPT_RETENTION_JOB, {}, { runAt: new Date() });
          return null;
        },
        20_000,
        'the retention job',
      );
      assert.deepEqual(erased.transcript, []);
      assert.deepEqual(
        (await rowsHolding(t.service.db.knex, callId)).filter((r) => !KEPT.has(r.table)),
        [],
      );
    } finally {
      offsetMs -= 3 * 86_400_000;
      await t.http.patch('/api/v1/workspace/recording-settings').set(bearer(tn.apiKey)).send({ transcript_retention_days: null });
    }
  });
});

describe('an erasure racing the finalisation on another instance', () => {
  /** A second instance on the same database. */
  let t2: TestService;
  before(async () => {
    t2 = await startTestService({ ...FAST_CALLS, DATABASE_URL: t.service.db.url });
  });
  after(async () => {
    await t2.close();
  });

  it('never leaves content beside a tombstone: refused while live (analysis included), erased whole once terminal', async () => {
    const callId = await recordedCall('7104');
    const answers: number[] = [];
    // Erasures sent back to back to the second instance while the first runs the call, ends it,
    // analyses it and writes its terminal transaction.
    for (;;) {
      const res = await t2.http.delete(`/api/v1/calls/${callId}`).set(bearer(tn.apiKey));
      answers.push(res.status);
      if (res.status === 200) break;
      assert.equal(res.status, 409, JSON.stringify(res.body));
      assert.equal(res.body.error.code, 'conversation_live');
      const stored = await t.service.db.knex('calls').where({ id: callId }).first('erased_at');
      assert.equal(stored.erased_at, null, 'a refusal changes nothing');
    }
    assert.ok(answers.length > 1, 'the call was live when the erasures began');
    const call = await getCall(t, tn, callId);
    assert.ok(call.erased_at);
    assert.ok(['completed', 'failed', 'no_answer', 'busy', 'voicemail', 'canceled'].includes(call.status), 'erased only once terminal');
    assert.deepEqual(call.transcript, []);
    assert.equal(call.summary, null);
    // The finalisation committed before the erasure and nothing writes after it: only the tombstone is left.
    assert.deepEqual(
      (await rowsHolding(t.service.db.knex, callId)).filter((r) => !KEPT.has(r.table)),
      [],
    );
    assert.deepEqual(await getCall(t2, tn, callId), call, 'both instances read the same tombstone');
  });
});
