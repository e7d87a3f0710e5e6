/**
 * The do-not-call list and opt-out (issue 36): the list as a client keeps it (add, idempotent; list and
 * find; remove; CSV import with a per-row report), a call to a listed number refused with nothing
 * stored or reserved, batches skipping listed recipients at creation (before the caps count them) and
 * at dispatch (a number listed on one instance, skipped by a batch running beside it on another), and
 * the agent's opt-out tool followed end to end through the sandbox: the callee who asks not to be
 * called again, the list, `call.completed`, and the next batch skipping the number.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { batchCalls, createBatch, sandboxNumbers, waitForBatch } from '../helpers/batches.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';
import { OPT_OUT_REQUEST } from '../../src/sandbox/carriers/callee.js';
import { OPT_OUT_FAREWELL } from '../../src/sandbox/voice/model.js';

/** A small cap of waiting recipients, to show listed recipients are skipped before it counts them. */
const MAX_WAITING = 6;
/** A small cap of the list, to reach it (no workspace of the other tests lists more). */
const MAX_ENTRIES = 10;
let t: TestService;
/** A second instance on the same database. */
let t2: TestService;
let receiver: Receiver;

before(async () => {
  const env = { ...FAST_CALLS, BATCH_MAX_WAITING_RECIPIENTS_PER_WORKSPACE: String(MAX_WAITING), DO_NOT_CALL_MAX_ENTRIES: String(MAX_ENTRIES) };
  t = await startTestService(env);
  t2 = await startTestService({ ...env, DATABASE_URL: t.service.db.url });
  receiver = await startReceiver();
});
after(async () => {
  await receiver.close();
  await t2.close();
  await t.close();
});

const sandboxOf = (s: TestService): SandboxCarriers => s.service.sandbox.carriers!.server;
const dialed = (number: string) =>
  [t, t2].some((s) =>
    sandboxOf(s)
      .calls()
      .some((c) => c.to === number),
  );

function add(s: TestService, tn: Tenant, number: string) {
  return s.http.post('/api/v1/do-not-call').set(bearer(tn.apiKey)).send({ number });
}

async function listed(s: TestService, tn: Tenant, query: Record<string, string | number> = {}) {
  const res = await s.http.get('/api/v1/do-not-call').query(query).set(bearer(tn.apiKey));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body as { data: Array<Record<string, any>>; has_more: boolean; next_cursor: string | null };
}

function importCsv(tn: Tenant, csv: string | Buffer, fields: Record<string, string> = {}) {
  const req = t.http.post('/api/v1/do-not-call/csv').set(bearer(tn.apiKey));
  for (const [k, v] of Object.entries(fields)) req.field(k, v);
  return req.attach('file', Buffer.isBuffer(csv) ? csv : Buffer.from(csv), { filename: 'do-not-call.csv', contentType: 'text/csv' });
}

/** What the workspace has stored that a refused call or batch could have left behind. */
async function stored(workspaceId: string) {
  const count = async (table: string) => Number((await t.service.db.knex(table).where({ workspace_id: workspaceId }).count({ n: '*' }))[0].n);
  return {
    calls: await count('calls'),
    batches: await count('batches'),
    reservations: await count('reservations'),
    leases: await count('session_leases'),
    entries: await count('do_not_call_entries'),
  };
}

describe('the list: add, find, remove', () => {
  let tn: Tenant;
  before(async () => {
    tn = await tenant(t);
  });

  it('adds a number once: the same number again, however written, answers 200 with the same entry', async () => {
    const first = await add(t, tn, '+14155550123');
    assert.equal(first.status, 201, JSON.stringify(first.body));
    assert.match(first.body.entry_id, /^dnc_/);
    assert.deepEqual(
      { ...first.body, entry_id: undefined, created_at: undefined },
      {
        entry_id: undefined,
        number: '+14155550123',
        source: 'api',
        call_id: null,
        created_at: undefined,
      },
    );
    const again = await add(t2, tn, '+1 (415) 555-0123');
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.deepEqual(again.body, first.body);
    const found = await listed(t, tn, { number: '+1.415.555.0123' });
    assert.deepEqual(found.data, [first.body]);
  });

  it('adding at once from two instances keeps one entry', async () => {
    const number = '+14155550124';
    const answers = await Promise.all([add(t, tn, number), add(t2, tn, number), add(t, tn, number), add(t2, tn, number)]);
    assert.deepEqual(answers.map((a) => a.status).sort(), [200, 200, 200, 201]);
    assert.equal(new Set(answers.map((a) => a.body.entry_id)).size, 1);
    assert.equal((await listed(t, tn, { number })).data.length, 1);
  });

  it('refuses what is not a phone number with 422 naming number; nothing is stored', async () => {
    const before = await stored(tn.workspaceId);
    for (const [number, message] of [
      ['4155550123', /is not an E\.164 number/],
      ['+12', /is not an E\.164 number|not a phone number/],
      ['+14151230001', /not a phone number any country uses/],
      ['call me maybe', /is not an E\.164 number/],
    ] as const) {
      const res = await add(t, tn, number);
      assert.equal(res.status, 422, `${number}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'invalid_phone_number', number);
      assert.equal(res.body.error.param, 'number');
      assert.match(res.body.error.message, message);
    }
    const long = await add(t, tn, `+1${'5'.repeat(40)}`);
    assert.equal(long.status, 422);
    const badFilter = await t.http.get('/api/v1/do-not-call').query({ number: 'nope' }).set(bearer(tn.apiKey));
    assert.equal(badFilter.status, 422);
    assert.equal(badFilter.body.error.param, 'number');
    assert.deepEqual(await stored(tn.workspaceId), before);
  });

  it('lists newest first, a page at a time; removes an entry once; another workspace neither sees nor removes it', async () => {
    const other = await tenant(t);
    const numbers = sandboxNumbers('0100', 3, 500);
    const ids: string[] = [];
    for (const n of numbers) ids.push((await add(t, tn, n)).body.entry_id);
    const page1 = await listed(t, tn, { limit: 2 });
    assert.deepEqual(
      page1.data.map((e) => e.entry_id),
      [ids[2], ids[1]],
    );
    assert.equal(page1.has_more, true);
    const page2 = await listed(t, tn, { limit: 2, starting_after: page1.next_cursor! });
    assert.equal(page2.data[0].entry_id, ids[0]);
    assert.deepEqual((await listed(t, other)).data, []);

    const foreign = await t.http.delete(`/api/v1/do-not-call/${ids[0]}`).set(bearer(other.apiKey));
    assert.equal(foreign.status, 404, JSON.stringify(foreign.body));
    assert.equal(foreign.body.error.code, 'do_not_call_entry_not_found');
    const removed = await t2.http.delete(`/api/v1/do-not-call/${ids[0]}`).set(bearer(tn.apiKey));
    assert.equal(removed.status, 200, JSON.stringify(removed.body));
    assert.deepEqual(removed.body, { status: 'deleted', entry_id: ids[0] });
    const again = await t.http.delete(`/api/v1/do-not-call/${ids[0]}`).set(bearer(tn.apiKey));
    assert.equal(again.status, 404);
    assert.deepEqual((await listed(t, tn, { number: numbers[0] })).data, []);
  });
});

describe('CSV import', () => {
  let tn: Tenant;
  before(async () => {
    tn = await tenant(t);
  });

  it('lists every readable row and reports the others by line; the same file again adds nothing', async () => {
    assert.equal((await add(t, tn, '+14155550150')).status, 201);
    const csv = [
      'Name,NUMBER',
      'Grace,+14155550151',
      'Alan,+1 (415) 555-0152',
      'Ada,+14155550150',
      'Grace again,+14155550151',
      'Nobody,',
      'Bad,not a number',
      'Short',
      '"Quoted, name",+14155550153',
    ].join('\n');
    const res = await importCsv(tn, csv);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body, {
      rows: 8,
      added: 3,
      already_listed: 2,
      skipped: {
        count: 3,
        items: [
          { row: 6, number: null, reason: 'invalid_number', message: 'Row 6: no number.' },
          {
            row: 7,
            number: 'not a number',
            reason: 'invalid_number',
            message: "Row 7: 'not a number' is not an E.164 number (a + then the country code and number).",
          },
          { row: 8, number: null, reason: 'invalid_row', message: 'Row 8 has 1 fields; the header has 2.' },
        ],
      },
    });
    const entries = (await listed(t, tn, { limit: 100 })).data;
    assert.deepEqual(entries.map((e) => e.number).sort(), ['+14155550150', '+14155550151', '+14155550152', '+14155550153']);
    assert.deepEqual(
      entries.filter((e) => e.number !== '+14155550150').map((e) => e.source),
      ['csv', 'csv', 'csv'],
    );
    const again = await importCsv(tn, csv);
    assert.equal(again.status, 200);
    assert.equal(again.body.added, 0);
    assert.equal(again.body.already_listed, 5);
    assert.equal((await listed(t, tn, { limit: 100 })).data.length, 4);
  });

  it('refuses a file it cannot read as a whole with 422 naming the file; nothing is listed', async () => {
    const before = await stored(tn.workspaceId);
    const cases: Array<[string | Buffer, string]> = [
      ['phone\n+14155550160\n', 'csv_missing_column'],
      ['\n\n', 'csv_empty'],
      [`number${',x'.repeat(25)}\n+14155550160\n`, 'csv_too_many_columns'],
      ['number\n"+14155550160\n', 'csv_malformed'],
      [Buffer.from([0x6e, 0x75, 0x6d, 0x62, 0x65, 0x72, 0x0a, 0xff, 0xfe]), 'csv_invalid_encoding'],
      [`number\n${'+14155550160\n'.repeat(100_001)}`, 'csv_too_many_rows'],
    ];
    for (const [csv, code] of cases) {
      const res = await importCsv(tn, csv);
      assert.equal(res.status, 422, `${code}: ${JSON.stringify(res.body).slice(0, 300)}`);
      assert.equal(res.body.detail[0].type, code, JSON.stringify(res.body).slice(0, 300));
      assert.deepEqual(res.body.detail[0].loc, ['file']);
    }
    const field = await importCsv(tn, 'number\n+14155550160\n', { colour: 'red' });
    assert.equal(field.status, 422, JSON.stringify(field.body));
    const noFile = await t.http.post('/api/v1/do-not-call/csv').set(bearer(tn.apiKey)).field('x', 'y');
    assert.equal(noFile.status, 422);
    const big = await importCsv(tn, `number,note\n${`+14155550160,${'x'.repeat(200)}\n`.repeat(11_000)}`);
    assert.equal(big.status, 413, big.text.slice(0, 300));
    assert.equal(big.body.error.code, 'payload_too_large');
    assert.deepEqual(await stored(tn.workspaceId), before);
  });
});

describe("the list's cap", () => {
  const numbers = (from: number, n: number) => Array.from({ length: n }, (_, i) => `+1415555${String(from + i).padStart(4, '0')}`);
  const counted = async (tn: Tenant) =>
    Number((await t.service.db.knex('do_not_call_counts').where({ workspace_id: tn.workspaceId }).first('entries'))?.entries ?? 0);

  it('holds at most DO_NOT_CALL_MAX_ENTRIES numbers: a new one past it is 422 do_not_call_list_full and nothing is listed; one already listed is still 200', async () => {
    const tn = await tenant(t);
    const first = await importCsv(tn, `number\n${numbers(100, MAX_ENTRIES - 1).join('\n')}\n`);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(first.body.added, MAX_ENTRIES - 1);
    assert.equal((await add(t, tn, numbers(200, 1)[0])).status, 201);
    const before = await stored(tn.workspaceId);
    assert.equal(before.entries, MAX_ENTRIES);

    const full = await add(t2, tn, numbers(300, 1)[0]);
    assert.equal(full.status, 422, JSON.stringify(full.body));
    assert.deepEqual([full.body.error.code, full.body.error.param], ['do_not_call_list_full', 'number']);
    assert.match(full.body.error.message, /holds 10 numbers, as many as it may \(10\)/);
    assert.equal((await add(t, tn, numbers(100, 1)[0])).status, 200);

    const overflowing = await importCsv(tn, `number\n${[...numbers(100, 2), ...numbers(400, 3)].join('\n')}\n`);
    assert.equal(overflowing.status, 422, JSON.stringify(overflowing.body));
    assert.deepEqual([overflowing.body.error.code, overflowing.body.error.param], ['do_not_call_list_full', 'file']);
    assert.match(overflowing.body.error.message, /3 new numbers would take .* to 13, past its cap of 10; nothing was listed/);
    const again = await importCsv(tn, `number\n${numbers(100, 3).join('\n')}\n`);
    assert.deepEqual([again.status, again.body.added, again.body.already_listed], [200, 0, 3]);
    assert.deepEqual(await stored(tn.workspaceId), before);
    assert.equal(await counted(tn), MAX_ENTRIES);

    // Room again after a removal.
    const entry = (await listed(t, tn, { number: numbers(200, 1)[0] })).data[0];
    assert.equal((await t.http.delete(`/api/v1/do-not-call/${entry.entry_id}`).set(bearer(tn.apiKey))).status, 200);
    assert.equal(await counted(tn), MAX_ENTRIES - 1);
    assert.equal((await add(t2, tn, numbers(300, 1)[0])).status, 201);
    assert.equal(await counted(tn), MAX_ENTRIES);
  });

  it('adds racing on two instances for the last places: exactly as many succeed as there is room for', async () => {
    const tn = await tenant(t);
    assert.equal((await importCsv(tn, `number\n${numbers(500, MAX_ENTRIES - 3).join('\n')}\n`)).status, 200);
    const racing = numbers(600, 8);
    const answers = await Promise.all(racing.map((n, i) => add(i % 2 ? t2 : t, tn, n)));
    assert.deepEqual(answers.map((a) => a.status).sort(), [201, 201, 201, 422, 422, 422, 422, 422], JSON.stringify(answers.map((a) => a.body)));
    assert.equal((await stored(tn.workspaceId)).entries, MAX_ENTRIES);
    assert.equal(await counted(tn), MAX_ENTRIES);
  });
});

describe('calls and batches', () => {
  let tn: Tenant;
  let agentId: string;
  before(async () => {
    tn = await tenant(t);
    agentId = await createPhoneAgent(t, tn, 'provider_a');
  });

  it('a call to a listed number is 422 number_on_do_not_call_list: nothing stored, nothing reserved, nothing dialed', async () => {
    const number = sandboxNumber('0002');
    assert.equal((await add(t2, tn, number)).status, 201);
    const before = await stored(tn.workspaceId);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: number });
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(res.body.error.code, 'number_on_do_not_call_list');
    assert.equal(res.body.error.param, 'to_number');
    assert.deepEqual(await stored(tn.workspaceId), before);
    // Off the list, it is called again.
    const entry = (await listed(t, tn, { number })).data[0];
    assert.equal((await t.http.delete(`/api/v1/do-not-call/${entry.entry_id}`).set(bearer(tn.apiKey))).status, 200);
    const ok = await placeCall(t, tn, { agent_id: agentId, to_number: number });
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    await waitForCall(t, tn, ok.body.call_id);
    assert.ok(dialed(number));
  });

  it('a number listed after the call was accepted and before it was dialed is never dialed: canceled, end_reason do_not_call, nothing billed', async () => {
    // The window between the request's check and the dial job: the check is skipped on this instance,
    // as if the number were listed a moment after it ran; the dial job's claim sees the list.
    const number = sandboxNumber('0002');
    assert.equal((await add(t2, tn, number)).status, 201);
    const calls = t.service.calls.service;
    const check = calls.doNotCall;
    calls.doNotCall = null;
    let res;
    try {
      res = await placeCall(t, tn, { agent_id: agentId, to_number: number, webhook_url: receiver.url });
    } finally {
      calls.doNotCall = check;
    }
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const call = await waitForCall(t, tn, res.body.call_id);
    assert.deepEqual([call.status, call.end_reason, call.duration, call.answered_at], ['canceled', 'do_not_call', 0, null]);
    assert.ok(!dialed(number), 'the listed number was dialed');
    const row = await t.service.db.knex('calls').where({ id: call.call_id }).first();
    assert.equal(row.dial_attempted_at, null);
    assert.deepEqual(await t.service.db.knex('reservations').where({ id: call.call_id }), []);
  });

  it('a batch skips listed recipients with reason do_not_call before the caps count them', async () => {
    const numbers = sandboxNumbers('0002', MAX_WAITING + 2, 700);
    for (const n of numbers.slice(0, 2)) assert.equal((await add(t, tn, n)).status, 201);
    const res = await createBatch(t2, tn, {
      agent_id: agentId,
      name: 'Listed recipients',
      recipients: numbers.map((to_number) => ({ to_number })),
    });
    // MAX_WAITING + 2 recipients, the cap MAX_WAITING: it passes because the listed two are not counted.
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.total, MAX_WAITING);
    assert.deepEqual(
      res.body.skipped.items.map((s: Record<string, unknown>) => [s.index, s.reason, s.to_number]),
      [
        [0, 'do_not_call', numbers[0]],
        [1, 'do_not_call', numbers[1]],
      ],
    );
    assert.match(res.body.skipped.items[0].message, /^Recipient 0: \+1555\d{7} is on the workspace's do-not-call list\.$/);
    const done = await waitForBatch(t, tn, res.body.batch_id);
    assert.equal(done.status, 'completed');
    for (const n of numbers.slice(0, 2)) assert.ok(!dialed(n), n);

    const allListed = await createBatch(t, tn, { agent_id: agentId, name: 'All listed', recipients: [{ to_number: numbers[0] }] });
    assert.equal(allListed.status, 422, JSON.stringify(allListed.body));
    assert.equal(allListed.body.detail[0].type, 'no_valid_recipients');
    assert.equal(allListed.body.detail[1].type, 'do_not_call');
  });

  it('a number listed on one instance while a batch runs is skipped by the dispatch on the other', async () => {
    // One call at a time: the first recipient stays on the line while its neighbour's number is listed
    // elsewhere, and is hung up after that (whichever instance's sandbox carrier dials it).
    const [talking, later, last] = [sandboxNumber(), sandboxNumber('0002'), sandboxNumber('0002')];
    for (const s of [t, t2]) sandboxOf(s).setScript(talking, [{ waitForAgent: true }, { pause: 600_000 }]);
    const res = await createBatch(t2, tn, {
      agent_id: agentId,
      name: 'Listed while running',
      concurrency: 1,
      recipients: [{ to_number: talking }, { to_number: later }, { to_number: last }],
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const batchId = res.body.batch_id;
    const running = await waitForBatch(t2, tn, batchId, (b) => b.recipients[0].status === 'in_progress');
    assert.equal(running.recipients[1].status, 'pending');
    const listing = await add(t, tn, later);
    assert.equal(listing.status, 201, JSON.stringify(listing.body));
    const hangup = await t.http.post(`/api/v1/calls/${running.recipients[0].call_id}/hangup`).set(bearer(tn.apiKey));
    assert.equal(hangup.status, 200, JSON.stringify(hangup.body));
    const done = await waitForBatch(t2, tn, batchId);
    assert.equal(done.status, 'completed');
    const [first, second, third] = done.recipients;
    assert.equal(first.attempts, 1);
    assert.deepEqual([second.status, second.last_error, second.attempts, second.call_id], ['canceled', 'do_not_call', 0, null]);
    assert.equal(third.attempts, 1);
    assert.ok(!dialed(later), 'the listed number was dialed');
    assert.deepEqual((await batchCalls(t, tn, batchId)).map((c) => c.to_number).sort(), [talking, last].sort());
  });
});

describe('the opt-out tool, end to end in the sandbox', () => {
  let tn: Tenant;
  let agentId: string;
  before(async () => {
    tn = await tenant(t);
    agentId = await createPhoneAgent(t, tn, 'provider_b', { opt_out: { enabled: true } });
  });

  it('an agent shows its setting; off unless set, null turns it off', async () => {
    const shown = await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey));
    assert.deepEqual(shown.body.opt_out, { enabled: true });
    const plain = await createPhoneAgent(t, tn, 'provider_a');
    const res = await t.http.get(`/api/v1/agents/${plain}`).set(bearer(tn.apiKey));
    assert.deepEqual(res.body.opt_out, { enabled: false });
    const patched = await t.http
      .patch(`/api/v1/agents/${plain}`)
      .set(bearer(tn.apiKey))
      .send({ opt_out: { enabled: true } });
    assert.deepEqual(patched.body.opt_out, { enabled: true });
    const reset = await t.http.patch(`/api/v1/agents/${plain}`).set(bearer(tn.apiKey)).send({ opt_out: null });
    assert.deepEqual(reset.body.opt_out, { enabled: false });
    const bad = await t.http
      .patch(`/api/v1/agents/${plain}`)
      .set(bearer(tn.apiKey))
      .send({ opt_out: { enabled: true, extra: 1 } });
    assert.equal(bad.status, 422);
  });

  it('the callee asks not to be called again: the agent lists the number, confirms, says goodbye and hangs up; call.completed says so; the next batch skips it', async () => {
    const number = sandboxNumber('0007');
    // The list is full: a person's wish is listed all the same.
    const fill = Array.from({ length: MAX_ENTRIES }, (_, i) => `+1415555${String(800 + i).padStart(4, '0')}`);
    assert.equal((await importCsv(tn, `number\n${fill.join('\n')}\n`)).body.added, MAX_ENTRIES);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: number, webhook_url: receiver.url });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const callId = res.body.call_id;
    const call = await waitForCall(t, tn, callId);
    assert.equal(call.status, 'completed', JSON.stringify(call));
    assert.equal(call.end_reason, 'agent_hangup');
    const said = call.transcript.map((e: { role: string; text: string }) => [e.role, e.text.trim()]);
    const asked = said.findIndex(([role, text]: string[]) => role === 'user' && text === OPT_OUT_REQUEST);
    assert.ok(asked > 0, JSON.stringify(said));
    assert.deepEqual(said[asked + 1], ['model', OPT_OUT_FAREWELL]);
    assert.equal(said.length, asked + 2, 'nothing was said after the goodbye');
    assert.deepEqual(
      call.tool_calls.map((c: Record<string, unknown>) => [c.name, c.source, c.ok]),
      [['opt_out', 'builtin', true]],
    );
    assert.equal(call.opt_out.number, number);

    const entries = (await listed(t2, tn, { number })).data;
    assert.deepEqual(
      entries.map((e) => [e.source, e.call_id]),
      [['opt_out', callId]],
    );
    assert.equal((await stored(tn.workspaceId)).entries, MAX_ENTRIES + 1);
    assert.equal(call.opt_out.listed_at >= entries[0].created_at.slice(0, 19), true);

    const events = await t.service.db.knex('webhook_events').where({ call_id: callId, kind: 'call.completed' });
    assert.equal(events.length, 1);
    assert.deepEqual(JSON.parse(events[0].body).opt_out, call.opt_out);

    // The next campaign: the number is skipped, the others called.
    const next = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Next week',
      recipients: [{ to_number: number }, { to_number: sandboxNumber('0002') }],
    });
    assert.equal(next.status, 201, JSON.stringify(next.body));
    assert.deepEqual(
      next.body.skipped.items.map((s: Record<string, unknown>) => [s.to_number, s.reason]),
      [[number, 'do_not_call']],
    );
    await waitForBatch(t, tn, next.body.batch_id);
    assert.equal(
      sandboxOf(t)
        .calls()
        .filter((c) => c.to === number).length +
        sandboxOf(t2)
          .calls()
          .filter((c) => c.to === number).length,
      1,
    );
    const direct = await placeCall(t, tn, { agent_id: agentId, to_number: number });
    assert.equal(direct.body.error?.code, 'number_on_do_not_call_list');
  });

  it('without the setting the same callee is not listed: the tool is not offered', async () => {
    const plain = await createPhoneAgent(t, tn, 'provider_a');
    const number = sandboxNumber('0007');
    const res = await placeCall(t, tn, { agent_id: plain, to_number: number });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const call = await waitForCall(t, tn, res.body.call_id);
    assert.equal(call.opt_out, null);
    assert.deepEqual(call.tool_calls, []);
    assert.deepEqual((await listed(t, tn, { number })).data, []);
  });
});
