/**
 * The destination policy (issue 21, toll fraud), as a client and the operator see it: the numbers of
 * the issue refused with a clear error and nothing stored or dialed, the policy read by developers
 * and set by the operator, batches that skip refused recipients with their reason, transfer numbers
 * refused when saved and again at transfer time, and the daily cap held by the database with two
 * instances on one database placing calls at once.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ADMIN_TOKEN, startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { batchCalls, createBatch, getBatch, sandboxNumbers, waitForBatch } from '../helpers/batches.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';
import { NUMBER_KINDS } from '../../src/destinations/numbers.js';

let t: TestService;
/** A second instance on the same database (the daily cap tests). */
let t2: TestService;
const sandboxOf = (s: TestService): SandboxCarriers => s.service.sandbox.carriers!.server;
const operator = { Authorization: `Bearer ${ADMIN_TOKEN}` };

before(async () => {
  t = await startTestService(FAST_CALLS);
  t2 = await startTestService({ ...FAST_CALLS, DATABASE_URL: t.service.db.url });
});
after(async () => {
  await t2.close();
  await t.close();
});

async function setPolicy(workspaceId: string, body: Record<string, unknown>) {
  const res = await t.http.patch(`/admin/v1/workspaces/${workspaceId}/destination-policy`).set(operator).send(body);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

async function readPolicy(s: TestService, tn: Tenant) {
  const res = await s.http.get('/api/v1/workspace/destination-policy').set(bearer(tn.apiKey));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

/** What the workspace has stored: its calls, agents and batches. */
async function stored(workspaceId: string) {
  const count = async (table: string) => Number((await t.service.db.knex(table).where({ workspace_id: workspaceId }).count({ n: '*' }))[0].n);
  return { calls: await count('calls'), agents: await count('agents'), batches: await count('batches') };
}

const dialed = (number: string) =>
  [t, t2].some((s) =>
    sandboxOf(s)
      .calls()
      .some((c) => c.to === number),
  );

/** The seconds from now to the next 00:00 UTC. */
function secondsToMidnight(): number {
  const now = new Date();
  return (Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime()) / 1000;
}

describe('the numbers of issue 21 are refused with a clear error; nothing is stored or dialed', () => {
  let tn: Tenant;
  let agentId: string;
  before(async () => {
    tn = await tenant(t);
    agentId = await createPhoneAgent(t, tn, 'provider_a');
  });

  const REFUSED: Array<[string, string, RegExp]> = [
    ['+19005550123', 'destination_type_not_allowed', /premium rate number \(premium_rate\)/],
    ['+881612345678', 'destination_type_not_allowed', /satellite number \(satellite\)/],
    ['+12', 'invalid_phone_number', /'\+12' is not a valid phone number/],
    ['+8823456789012', 'destination_type_not_allowed', /\(international_network\)/],
    ['+80812345678', 'destination_type_not_allowed', /\(shared_cost\)/],
    ['+447012345678', 'destination_type_not_allowed', /\(personal_number\)/],
    ['+14151230001', 'invalid_phone_number', /is not a valid phone number/],
  ];

  it('POST /calls: to_number of a refused kind or no number at all is 422 naming to_number', async () => {
    const before = await stored(tn.workspaceId);
    for (const [number, code, message] of REFUSED) {
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: number });
      assert.equal(res.status, 422, `${number}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, code, number);
      assert.equal(res.body.error.param, 'to_number', number);
      assert.match(res.body.error.message, message);
    }
    assert.deepEqual(await stored(tn.workspaceId), before);
    assert.equal((await readPolicy(t, tn)).calls_placed_today, 0);
    // A call that is allowed goes through the same queue: once it has been dialed, none of the refused ones was.
    const ok = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0002') });
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    await waitForCall(t, tn, ok.body.call_id);
    for (const [number] of REFUSED) assert.ok(!dialed(number), number);
  });

  it('POST /calls: a calling number that is not a number, or of a kind no call may come from, is 422 naming from_number', async () => {
    const before = await stored(tn.workspaceId);
    const cases: Array<[string, string]> = [
      ['+19005550123', 'caller_id_not_allowed'],
      ['+881612345678', 'caller_id_not_allowed'],
      ['+12', 'invalid_phone_number'],
    ];
    for (const [from, code] of cases) {
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber(), from_number: from });
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.equal(res.body.error.code, code, from);
      assert.equal(res.body.error.param, 'from_number');
      assert.match(res.body.error.message, /^from_number: /);
    }
    assert.deepEqual(await stored(tn.workspaceId), before);
  });

  it("an agent's provider phone_number is a caller id: refused when saved, nothing stored", async () => {
    const before = await stored(tn.workspaceId);
    const created = await t.http
      .post('/api/v1/agents')
      .set(bearer(tn.apiKey))
      .send({ name: 'Premium', provider_b_config: { api_key: 'KEY0123', connection_id: '123', public_key: 'cHVi', phone_number: '+19005550123' } });
    assert.equal(created.status, 422, JSON.stringify(created.body));
    assert.equal(created.body.error.code, 'caller_id_not_allowed');
    assert.equal(created.body.error.param, 'provider_b_config.phone_number');
    const updated = await t.http
      .patch(`/api/v1/agents/${agentId}`)
      .set(bearer(tn.apiKey))
      .send({ provider_a_config: { phone_number: '+12' } });
    assert.equal(updated.status, 422, JSON.stringify(updated.body));
    assert.equal(updated.body.error.code, 'invalid_phone_number');
    assert.deepEqual(await stored(tn.workspaceId), before);
    const agent = await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey));
    assert.notEqual(agent.body.telephony.provider_a.phone_number, '+12');
  });
});

describe('the destination policy: read by developers, set by the operator', () => {
  it('a new workspace reads the documented default, and today so far', async () => {
    const tn = await tenant(t);
    const policy = await readPolicy(t, tn);
    assert.deepEqual(
      { ...policy, day_resets_at: undefined, updated_at: undefined },
      {
        allowed_countries: null,
        allowed_number_types: ['fixed_line', 'mobile', 'fixed_line_or_mobile', 'toll_free', 'voip', 'uan', 'fictional'],
        allowed_sip_domains: [],
        daily_call_cap: 1000,
        calls_placed_today: 0,
        day_resets_at: undefined,
        updated_at: undefined,
      },
    );
    const resets = new Date(policy.day_resets_at);
    assert.equal(resets.toISOString().slice(11), '00:00:00.000Z');
    assert.ok(resets.getTime() > Date.now() && resets.getTime() <= Date.now() + 86_400_000);
  });

  it('the operator changes only the fields sent; developers and the operator read the same policy', async () => {
    const tn = await tenant(t);
    const set = await setPolicy(tn.workspaceId, { allowed_countries: ['US', 'CA'], daily_call_cap: 20 });
    assert.deepEqual(set.allowed_countries, ['US', 'CA']);
    assert.equal(set.daily_call_cap, 20);
    assert.equal(set.allowed_number_types.length, 7, 'unchanged');
    const again = await setPolicy(tn.workspaceId, { allowed_number_types: ['mobile', 'premium_rate'] });
    assert.deepEqual(again.allowed_countries, ['US', 'CA'], 'unchanged');
    assert.deepEqual(again.allowed_number_types, ['mobile', 'premium_rate']);
    const operatorRead = await t.http.get(`/admin/v1/workspaces/${tn.workspaceId}/destination-policy`).set(operator);
    assert.equal(operatorRead.status, 200);
    assert.deepEqual(operatorRead.body, again);
    assert.deepEqual(await readPolicy(t2, tn), again, 'the other instance reads the same');
    const cleared = await setPolicy(tn.workspaceId, { allowed_countries: null, daily_call_cap: null, allowed_number_types: [...NUMBER_KINDS] });
    assert.equal(cleared.allowed_countries, null);
    assert.equal(cleared.daily_call_cap, null);
    assert.deepEqual(cleared.allowed_number_types, [...NUMBER_KINDS], 'the database stores every kind the service knows');
  });

  it('refuses bad input with nothing changed: unknown workspace, country, kind or field; developers cannot set it', async () => {
    const tn = await tenant(t);
    const before = await readPolicy(t, tn);
    const patch = (body: unknown, ws = tn.workspaceId) =>
      t.http
        .patch(`/admin/v1/workspaces/${ws}/destination-policy`)
        .set(operator)
        .send(body as object);
    const missing = await patch({ daily_call_cap: 5 }, 'ws_01JD5Z7Q8Y1C2B3A4N5M6K7P8S');
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'workspace_not_found');
    assert.equal((await t.http.get('/admin/v1/workspaces/ws_01JD5Z7Q8Y1C2B3A4N5M6K7P8S/destination-policy').set(operator)).status, 404);
    const country = await patch({ allowed_countries: ['US', 'XX'] });
    assert.equal(country.status, 422);
    assert.equal(country.body.error.param, 'allowed_countries');
    assert.match(country.body.error.message, /'XX'/);
    for (const body of [{ allowed_number_types: ['premium'] }, { allowed_countries: ['us'] }, { daily_call_cap: -1 }, { colour: 'red' }, {}]) {
      const res = await patch(body);
      assert.equal(res.status, 422, JSON.stringify(body));
    }
    const asDeveloper = await t.http.patch(`/admin/v1/workspaces/${tn.workspaceId}/destination-policy`).set(bearer(tn.apiKey)).send({ daily_call_cap: null });
    assert.equal(asDeveloper.status, 401);
    assert.deepEqual(await readPolicy(t, tn), before);
  });

  it('allowed countries: a number of another country is refused, fictional numbers pass; the operator may allow a refused kind', async () => {
    const tn = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_b');
    await setPolicy(tn.workspaceId, { allowed_countries: ['GB'] });
    const us = await placeCall(t, tn, { agent_id: agentId, to_number: '+12125551234' });
    assert.equal(us.status, 422);
    assert.equal(us.body.error.code, 'destination_country_not_allowed');
    assert.match(us.body.error.message, /a number in US; .*allows calls to GB only/);
    const satellite = await placeCall(t, tn, { agent_id: agentId, to_number: '+881612345678' });
    assert.equal(satellite.body.error.code, 'destination_type_not_allowed', 'the kind is checked first');
    assert.equal((await stored(tn.workspaceId)).calls, 0);
    const gb = await placeCall(t, tn, { agent_id: agentId, to_number: '+442079460002' });
    assert.equal(gb.status, 201, JSON.stringify(gb.body));
    const fictional = await placeCall(t, tn, { agent_id: agentId, to_number: '+14155550102' });
    assert.equal(fictional.status, 201, JSON.stringify(fictional.body));

    await setPolicy(tn.workspaceId, { allowed_countries: null, allowed_number_types: ['fixed_line_or_mobile', 'premium_rate'] });
    const premium = await placeCall(t, tn, { agent_id: agentId, to_number: '+19005550002' });
    assert.equal(premium.status, 201, JSON.stringify(premium.body));
    await waitFor(async () => dialed('+19005550002'), 10_000, 'the premium-rate call dialed');
    assert.equal((await readPolicy(t, tn)).calls_placed_today, 3);
  });
});

describe('batches skip refused recipients with their reason', () => {
  let tn: Tenant;
  let agentId: string;
  const later = () => new Date(Date.now() + 3600_000).toISOString();
  before(async () => {
    tn = await tenant(t);
    agentId = await createPhoneAgent(t, tn, 'provider_a');
    await setPolicy(tn.workspaceId, { allowed_countries: ['US'] });
  });

  it('JSON: premium-rate, satellite, not-a-number and other-country recipients are skipped; only the rest are stored', async () => {
    const [a, b] = sandboxNumbers('0002', 2, 610);
    const res = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Mixed',
      scheduled_at: later(),
      recipients: [
        { to_number: a },
        { to_number: '+19005550123' },
        { to_number: '+881612345678' },
        { to_number: '+12' },
        { to_number: '+442079460958' },
        { to_number: b },
      ],
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.total, 2);
    assert.deepEqual(
      res.body.skipped.items.map((s: Record<string, unknown>) => [s.index, s.to_number, s.reason]),
      [
        [1, '+19005550123', 'destination_type_not_allowed'],
        [2, '+881612345678', 'destination_type_not_allowed'],
        [3, '+12', 'invalid_number'],
        [4, '+442079460958', 'destination_country_not_allowed'],
      ],
    );
    assert.match(res.body.skipped.items[0].message, /^Recipient 1: \+19005550123 is a premium rate number/);
    const detail = await getBatch(t, tn, res.body.batch_id);
    assert.deepEqual(
      detail.recipients.map((r: { to_number: string }) => r.to_number),
      [a, b],
    );
  });

  it('CSV: the same rows are skipped with their row, column and reason', async () => {
    const [a] = sandboxNumbers('0002', 1, 620);
    const csv = `to_number,name\n${a},Ada\n+1 900 555 0123,Bob\n+881612345678,Sat\n+12,Short\n+44 20 7946 0958,Gb\n`;
    const req = t.http.post('/api/v1/batches/csv').set(bearer(tn.apiKey)).field('agent_id', agentId).field('name', 'CSV').field('scheduled_at', later());
    const res = await req.attach('file', Buffer.from(csv), { filename: 'r.csv', contentType: 'text/csv' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.total, 1);
    assert.deepEqual(
      res.body.skipped.items.map((s: Record<string, unknown>) => [s.row, s.column, s.reason]),
      [
        [3, 'to_number', 'destination_type_not_allowed'],
        [4, 'to_number', 'destination_type_not_allowed'],
        [5, 'to_number', 'invalid_number'],
        [6, 'to_number', 'destination_country_not_allowed'],
      ],
    );
    assert.match(res.body.skipped.items[0].message, /^Row 3: \+19005550123 is a premium rate number/);
  });

  it('a batch of 10,000 premium-rate numbers creates nothing: 422 no_valid_recipients, each with its reason', async () => {
    const before = await stored(tn.workspaceId);
    const recipients = Array.from({ length: 10_000 }, (_, i) => ({ to_number: `+1900${200 + Math.floor(i / 100)}55${String(i % 100).padStart(2, '0')}` }));
    const res = await createBatch(t, tn, { agent_id: agentId, name: 'Toll fraud', recipients });
    assert.equal(res.status, 422, JSON.stringify(res.body).slice(0, 500));
    assert.equal(res.body.error.code, 'no_valid_recipients');
    assert.match(res.body.detail[0].msg, /the first 49 of 10000 are listed/);
    assert.equal(res.body.detail.length, 50, 'the list-shaped 422 stops at 50 problems');
    assert.deepEqual(
      res.body.detail.slice(1).map((d: { type: string; loc: string[] }) => [d.type, d.loc.join('.')]),
      Array.from({ length: 49 }, (_, i) => ['destination_type_not_allowed', `body.recipients.${i}.to_number`]),
    );
    assert.deepEqual(await stored(tn.workspaceId), before);
  });
});

describe('transfers', () => {
  it('a transfer number the policy refuses is 422 when the agent is created or updated; nothing stored', async () => {
    const tn = await tenant(t);
    const before = await stored(tn.workspaceId);
    const created = await t.http.post('/api/v1/agents').set(bearer(tn.apiKey)).send({ name: 'Transfers', transfer_phone_number: '+19005550123' });
    assert.equal(created.status, 422, JSON.stringify(created.body));
    assert.equal(created.body.error.code, 'destination_type_not_allowed');
    assert.equal(created.body.error.param, 'transfer_phone_number');
    assert.deepEqual(await stored(tn.workspaceId), before);
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { transfer_phone_number: '+14155550199' });
    for (const [number, code] of [
      ['+881612345678', 'destination_type_not_allowed'],
      ['+12', 'invalid_phone_number'],
    ]) {
      const res = await t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send({ transfer_phone_number: number });
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.equal(res.body.error.code, code);
    }
    const agent = await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey));
    assert.equal(agent.body.transfer_phone_number, '+14155550199');
    // Clearing it is always allowed.
    assert.equal((await t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send({ transfer_phone_number: null })).status, 200);
  });

  it('transfer destinations: each number is checked like transfer_phone_number, names are unique and `default` is taken; a refused body stores nothing', async () => {
    const tn = await tenant(t);
    const sales = { name: 'sales', phone_number: '+14155550171', description: 'The caller wants to buy something.' };
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { transfer_phone_number: '+14155550199', transfer_destinations: [sales] });
    const before = await stored(tn.workspaceId);
    for (const [destinations, code, param] of [
      [[sales, { name: 'premium', phone_number: '+19005550123', description: 'x' }], 'destination_type_not_allowed', 'transfer_destinations[1].phone_number'],
      [[{ ...sales, phone_number: '+12' }], 'invalid_phone_number', 'transfer_destinations[0].phone_number'],
      [[sales, { ...sales, phone_number: '+14155550172' }], 'transfer_destination_name_taken', 'transfer_destinations[1].name'],
      [[{ ...sales, name: 'default' }], 'transfer_destination_name_taken', 'transfer_destinations[0].name'],
    ] as const) {
      const res = await t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send({ transfer_destinations: destinations });
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.equal(res.body.error.code, code);
      assert.equal(res.body.error.param, param);
    }
    assert.deepEqual(await stored(tn.workspaceId), before);
    const agent = await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey));
    assert.deepEqual(agent.body.transfer_destinations, [{ ...sales, sip_uri: null }]);
    const cleared = await t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send({ transfer_destinations: null });
    assert.equal(cleared.status, 200);
    assert.deepEqual(cleared.body.transfer_destinations, []);
    assert.equal(cleared.body.transfer_phone_number, '+14155550199');
  });

  it('SIP URI destinations: exactly one target, the host a trunk of the workspace or in allowed_sip_domains; saved and shown, never offered to the model yet', async () => {
    const tn = await tenant(t);
    const sales = { name: 'sales', phone_number: '+14155550171', description: 'The caller wants to buy something.' };
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { transfer_destinations: [sales] });
    const patch = (body: Record<string, unknown>) => t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send(body);
    const desk = (sip_uri: string, extra: Record<string, unknown> = {}) => ({ name: 'desk', sip_uri, description: 'The front desk.', ...extra });

    // The operator's list: stored in lower case without repeats; a malformed host is refused and changes nothing.
    const badList = await t.http
      .patch(`/admin/v1/workspaces/${tn.workspaceId}/destination-policy`)
      .set(operator)
      .send({ allowed_sip_domains: ['pbx..example.com'] });
    assert.equal(badList.status, 422, JSON.stringify(badList.body));
    assert.deepEqual([badList.body.error.code, badList.body.error.param], ['invalid_value', 'allowed_sip_domains.0']);
    assert.deepEqual((await readPolicy(t, tn)).allowed_sip_domains, []);
    const set = await setPolicy(tn.workspaceId, { allowed_sip_domains: ['PBX.Example.com', '*.voice.example.net', '203.0.113.7'] });
    assert.deepEqual(set.allowed_sip_domains, ['pbx.example.com', '*.voice.example.net', '203.0.113.7']);

    for (const [destinations, status, code, param] of [
      [[{ ...sales, sip_uri: 'sip:sales@pbx.example.com' }], 422, 'transfer_target_required', 'transfer_destinations[0]'],
      [[sales, { name: 'desk', description: 'The front desk.' }], 422, 'transfer_target_required', 'transfer_destinations[1]'],
      [[desk('sip:desk@pbx.example.com:70000')], 422, 'invalid_sip_uri', 'transfer_destinations[0].sip_uri'],
      [[desk('sip:desk@pbx..example.com')], 422, 'invalid_sip_uri', 'transfer_destinations[0].sip_uri'],
      [[desk('sip:desk@other.example.com')], 422, 'sip_uri_not_allowed', 'transfer_destinations[0].sip_uri'],
      // `*.d` is d's subdomains, not d itself; an IP address only listed exactly.
      [[desk('sip:desk@voice.example.net')], 422, 'sip_uri_not_allowed', 'transfer_destinations[0].sip_uri'],
      [[desk('sip:desk@203.0.113.8')], 422, 'sip_uri_not_allowed', 'transfer_destinations[0].sip_uri'],
      [[desk('sip:desk@pbx.example.com?Subject=x')], 422, 'invalid_value', 'transfer_destinations.0.sip_uri'],
    ] as const) {
      const res = await patch({ transfer_destinations: destinations });
      assert.equal(res.status, status, JSON.stringify(res.body));
      assert.deepEqual([res.body.error.code, res.body.error.param], [code, param]);
    }
    const kept = await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey));
    assert.deepEqual(kept.body.transfer_destinations, [{ ...sales, sip_uri: null }], 'refused bodies changed nothing; the stored form shows both targets');

    const trunk = await t.http
      .post('/api/v1/sip-trunks')
      .set(bearer(tn.apiKey))
      .send({ name: 'PBX', outbound: { host: 'trunk.example.org', transport: 'udp', caller_id_numbers: ['+14155550100'] } });
    assert.equal(trunk.status, 201, JSON.stringify(trunk.body));
    const saved = await patch({
      transfer_destinations: [
        sales,
        desk('sip:desk@pbx.example.com;transport=tcp'),
        desk('sips:ops@a.voice.example.net:5061', { name: 'ops' }),
        desk('sip:lab@203.0.113.7', { name: 'lab' }),
        desk('sip:night@TRUNK.example.org', { name: 'night' }),
      ],
    });
    assert.equal(saved.status, 200, JSON.stringify(saved.body));
    assert.deepEqual(
      saved.body.transfer_destinations.map((d: Record<string, unknown>) => [d.name, d.phone_number, d.sip_uri]),
      [
        ['sales', '+14155550171', null],
        ['desk', null, 'sip:desk@pbx.example.com;transport=tcp'],
        ['ops', null, 'sips:ops@a.voice.example.net:5061'],
        ['lab', null, 'sip:lab@203.0.113.7'],
        ['night', null, 'sip:night@TRUNK.example.org'],
      ],
    );

    // Only a SIP destination: the model has no transfer tool, so a caller asking to be transferred is not.
    assert.equal((await patch({ transfer_destinations: [desk('sip:desk@pbx.example.com')] })).status, 200);
    const to = sandboxNumber('6106');
    for (const s of [t, t2])
      sandboxOf(s).setScript(to, [{ waitForAgent: true }, { say: 'Please transfer call to a person.' }, { waitForAgent: true }, { hangup: true }]);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const call = await waitForCall(t, tn, res.body.call_id);
    assert.equal(call.status, 'completed');
    assert.deepEqual(
      call.tool_calls.filter((r: Record<string, unknown>) => r.name === 'transfer_call'),
      [],
      JSON.stringify(call.transcript),
    );
    assert.deepEqual(call.transfers, []);
    assert.notEqual(call.end_reason, 'transferred');
  });

  it('the policy is asked again at transfer time: a number it no longer allows is not transferred to', async () => {
    const tn = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { transfer_phone_number: '+442079460958', transfer_criteria: 'The caller asks for a person.' });
    await setPolicy(tn.workspaceId, { allowed_countries: ['US'] });
    const to = sandboxNumber('6104');
    // Either instance's job runner may dial it, through its own sandbox carriers.
    for (const s of [t, t2])
      sandboxOf(s).setScript(to, [
        { waitForAgent: true },
        { say: 'Please transfer call to a person.' },
        { waitForAgent: true },
        { pause: 1000 },
        { hangup: true },
      ]);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const call = await waitForCall(t, tn, res.body.call_id);
    assert.equal(call.tool_calls[0]?.name, 'transfer_call', JSON.stringify(call.transcript));
    assert.equal(call.tool_calls[0]?.ok, false);
    assert.notEqual(call.end_reason, 'transferred');
    const sim = [t, t2].flatMap((s) => sandboxOf(s).calls()).find((c) => c.callSid === call.call_sid)!;
    assert.equal(sim.transferredTo, null, 'the carrier was never asked to transfer');
    // The refused attempt is on the record with the policy's reason, and in the live events; the call never left in_progress for it.
    assert.equal(call.transfers.length, 1, JSON.stringify(call.transfers));
    const [xfr] = call.transfers;
    assert.deepEqual(
      [xfr.destination, xfr.to, xfr.outcome, xfr.refusal_code, xfr.ended_at],
      ['default', '+442079460958', 'refused', 'destination_country_not_allowed', xfr.started_at],
    );
    const events = await t.service.db.knex('conversation_events').where({ conversation_id: call.call_id }).orderBy('seq');
    const data = (e: { data: unknown }) => (typeof e.data === 'string' ? JSON.parse(e.data) : e.data) as Record<string, unknown>;
    assert.deepEqual(
      events.filter((e) => e.type === 'transfer').map((e) => [data(e).transfer_id, data(e).status, data(e).outcome]),
      [[xfr.transfer_id, 'failed', 'refused']],
    );
    assert.ok(!events.some((e) => e.type === 'status' && data(e).status === 'transferring'), 'never transferring');
  });

  it('at most TRANSFER_MAX_ATTEMPTS (3) attempts a call: the fourth is refused to the model with no record', async () => {
    const tn = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { transfer_phone_number: '+442079460958', transfer_criteria: 'The caller asks for a person.' });
    await setPolicy(tn.workspaceId, { allowed_countries: ['US'] });
    const to = sandboxNumber('6105');
    const ask = [{ waitForAgent: true as const }, { say: 'Please transfer call to a person.' }];
    for (const s of [t, t2]) sandboxOf(s).setScript(to, [...ask, ...ask, ...ask, ...ask, { waitForAgent: true }, { pause: 1000 }, { hangup: true }]);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const call = await waitForCall(t, tn, res.body.call_id);
    const tried = call.tool_calls.filter((r: Record<string, any>) => r.name === 'transfer_call');
    assert.equal(tried.length, 4, JSON.stringify(call.transcript));
    assert.match(tried[3].error, /^No more transfers can be tried on this call/);
    assert.deepEqual(
      call.transfers.map((x: Record<string, any>) => [x.outcome, x.refusal_code]),
      Array(3).fill(['refused', 'destination_country_not_allowed']),
    );
    assert.equal(call.status, 'completed');
    assert.notEqual(call.end_reason, 'transferred');
  });
});

describe('the daily cap, kept by the database across two instances', () => {
  async function cappedTenant(cap: number): Promise<{ tn: Tenant; agentId: string }> {
    const tn = await tenant(t);
    const ws = await t.http.patch(`/admin/v1/workspaces/${tn.workspaceId}`).set(operator).send({ concurrent_session_limit: 100 });
    assert.equal(ws.status, 200);
    await setPolicy(tn.workspaceId, { daily_call_cap: cap });
    return { tn, agentId: await createPhoneAgent(t, tn, 'provider_a') };
  }

  it("a new workspace's first calls sent at once to two instances are all placed (its policy row is written once, by whichever comes first)", async () => {
    const tn = await tenant(t);
    assert.equal((await t.http.patch(`/admin/v1/workspaces/${tn.workspaceId}`).set(operator).send({ concurrent_session_limit: 100 })).status, 200);
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    assert.equal(await t.service.db.knex('destination_policies').where({ workspace_id: tn.workspaceId }).first(), undefined);
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => placeCall(i % 2 ? t2 : t, tn, { agent_id: agentId, to_number: sandboxNumber('0004') })),
    );
    assert.deepEqual(
      answers.map((r) => r.status),
      Array(8).fill(201),
      JSON.stringify(answers.map((r) => r.body.error?.code)),
    );
  });

  it('calls sent at once to two instances: exactly the cap is placed, the rest are 429 daily_call_cap_reached until 00:00 UTC', async () => {
    const { tn, agentId } = await cappedTenant(3);
    const numbers = Array.from({ length: 12 }, () => sandboxNumber('0004'));
    const answers = await Promise.all(numbers.map((to, i) => placeCall(i % 2 ? t2 : t, tn, { agent_id: agentId, to_number: to })));
    const placed = answers.filter((r) => r.status === 201);
    const refused = answers.filter((r) => r.status === 429);
    assert.equal(placed.length, 3, JSON.stringify(answers.map((r) => r.status)));
    assert.equal(refused.length, 9);
    for (const r of refused) {
      assert.equal(r.body.error.code, 'daily_call_cap_reached');
      const retryAfter = Number(r.headers['retry-after']);
      assert.ok(retryAfter > 0 && Math.abs(retryAfter - secondsToMidnight()) < 120, `Retry-After ${retryAfter}`);
    }
    assert.equal((await stored(tn.workspaceId)).calls, 3);
    assert.equal((await readPolicy(t2, tn)).calls_placed_today, 3);
  });

  it('property: for any cap and any number of calls split over two instances, the calls placed are min(cap, asked)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 9 }), async (cap, asked) => {
        const { tn, agentId } = await cappedTenant(cap);
        const answers = await Promise.all(
          Array.from({ length: asked }, (_, i) => placeCall(i % 2 ? t2 : t, tn, { agent_id: agentId, to_number: sandboxNumber('0004') })),
        );
        assert.ok(answers.every((r) => r.status === 201 || (r.status === 429 && r.body.error.code === 'daily_call_cap_reached')));
        assert.equal(answers.filter((r) => r.status === 201).length, Math.min(cap, asked));
        assert.equal((await stored(tn.workspaceId)).calls, Math.min(cap, asked));
      }),
      { numRuns: 8 },
    );
  });

  it('a batch at the cap waits for the next day instead of failing its recipients, on either instance', async () => {
    const { tn, agentId } = await cappedTenant(4);
    const res = await createBatch(t, tn, {
      agent_id: agentId,
      name: 'Capped',
      concurrency: 10,
      recipients: sandboxNumbers('0002', 7, 700).map((to_number) => ({ to_number })),
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const batchId = res.body.batch_id;
    await waitFor(async () => (await batchCalls(t, tn, batchId)).length >= 4, 20_000, 'four calls');
    // Every call placed has ended and the batch has had its rounds on both instances: still four.
    await waitForBatch(t, tn, batchId, (b) => b.recipients.filter((r: { status: string }) => r.status === 'busy').length === 4, 20_000);
    await new Promise((r) => setTimeout(r, 1500));
    const detail = await getBatch(t2, tn, batchId);
    assert.equal((await batchCalls(t, tn, batchId)).length, 4);
    assert.equal(detail.status, 'in_progress');
    assert.deepEqual(detail.recipients.map((r: { status: string }) => r.status).sort(), ['busy', 'busy', 'busy', 'busy', 'pending', 'pending', 'pending']);
    assert.equal((await readPolicy(t, tn)).calls_placed_today, 4);
    const direct = await placeCall(t2, tn, { agent_id: agentId, to_number: sandboxNumber('0002') });
    assert.equal(direct.status, 429);
    // A higher cap takes effect at the batch's next round (here: pause and resume).
    await setPolicy(tn.workspaceId, { daily_call_cap: 100 });
    assert.equal((await t.http.post(`/api/v1/batches/${batchId}/pause`).set(bearer(tn.apiKey))).status, 200);
    assert.equal((await t.http.post(`/api/v1/batches/${batchId}/resume`).set(bearer(tn.apiKey))).status, 200);
    const done = await waitForBatch(t, tn, batchId);
    assert.equal(done.status, 'completed');
    assert.equal((await batchCalls(t, tn, batchId)).length, 7);
  });

  it('no code path can pass it: an insert of calls past the cap fails in the database, also when two transactions race', async () => {
    const { tn, agentId } = await cappedTenant(2);
    const knex = t.service.db.knex;
    const row = (id: string) => ({
      id,
      workspace_id: tn.workspaceId,
      agent_id: agentId,
      direction: 'outbound',
      provider: 'provider_a',
      from_number: '+14155550100',
      to_number: '+14155550101',
      status: 'canceled',
      deadline_at: new Date(),
    });
    await knex('calls').insert(row(`call_x${Date.now()}a`));
    const first = await knex.transaction();
    const second = await knex.transaction();
    await first('calls').insert(row(`call_x${Date.now()}b`));
    // The second waits on the day's counter row until the first ends, then sees the cap reached.
    const racing = second('calls')
      .insert(row(`call_x${Date.now()}c`))
      .then(
        () => null,
        (err: { code?: string; constraint?: string }) => err,
      );
    await first.commit();
    const err = await racing;
    await second.rollback();
    assert.equal(err?.code, '23514');
    assert.equal(err?.constraint, 'destination_daily_call_cap');
    await assert.rejects(knex('calls').insert(row(`call_x${Date.now()}d`)), /daily cap of 2/);
    assert.equal((await stored(tn.workspaceId)).calls, 2);
    // Inbound calls are not outbound calls placed: they never count.
    await knex('calls').insert({ ...row(`call_x${Date.now()}e`), direction: 'inbound' });
    assert.equal((await readPolicy(t, tn)).calls_placed_today, 2);
  });
});
