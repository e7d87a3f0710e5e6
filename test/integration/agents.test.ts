import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { conflict } from '../../src/errors/api-error.js';

let t: TestService;
let tn: Tenant;
let other: Tenant;
before(async () => {
  t = await startTestService();
  tn = await tenant(t);
  other = await tenant(t, 'Other Co');
});
after(() => t.close());

const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
const AUTH_TOKEN = 'a-token-9f8e7d6c5b4a39281706f5e4d3c2b1a0';
const ROTATED_TOKEN = 'a-token-rotated-0a1b2c3d4e5f60718293a4b5';
const API_KEY = 'KEY0193ProviderBSecretApiKey77';
const PUBLIC_KEY = 'pkXyZBase64PublicKeyForProviderB32bytes=';
const SECRETS = [AUTH_TOKEN, ROTATED_TOKEN, API_KEY, PUBLIC_KEY];
/** Every response body this file sees, to prove no secret ever comes back. */
const seen: string[] = [];

async function api(method: 'get' | 'post' | 'patch' | 'delete', path: string, body?: unknown, key = tn.apiKey) {
  let req = t.http[method](path).set(bearer(key));
  if (body !== undefined) req = req.send(body as object);
  const res = await req;
  seen.push(res.text);
  return res;
}

async function createAgent(body: Record<string, unknown> = { name: 'Receptionist' }, key = tn.apiKey) {
  const res = await api('post', '/api/v1/agents', body, key);
  assert.equal(res.status, 201, res.text);
  return res.body;
}

const row = (id: string) => t.service.db.knex('agents').where({ id }).first();
/** Turns inbound on for the agent's number at `provider` behind the API's back (no carrier to ask). */
const enableInboundInDatabase = (id: string, provider: string) =>
  t.service.db
    .knex('agents')
    .where({ id })
    .update({ carrier_accounts: t.service.db.knex.raw(`jsonb_set(carrier_accounts, array[?::text, 'inbound_enabled'], 'true')`, [provider]) });

describe('agents: create, read, list, delete', () => {
  it('creates with only a name; every other field takes its default', async () => {
    const a = await createAgent({ name: 'Minimal' });
    assert.match(a.agent_id, /^agt_[0-9A-Z]{26}$/);
    assert.deepEqual(
      { ...a, agent_id: undefined, created_at: undefined },
      {
        agent_id: undefined,
        created_at: undefined,
        name: 'Minimal',
        description: '',
        instruction: '',
        first_message: '',
        model: null,
        voice_id: null,
        analysis_model: null,
        language: null,
        language_code: null,
        accent: null,
        can_end_conversation: false,
        transfer_phone_number: null,
        transfer_criteria: null,
        transfer_destinations: [],
        inbound_setup: null,
        recording: { enabled: false },
        recording_disclosure: null,
        opt_out: { enabled: false },
        variable_placeholders: {},
        voicemail_config: null,
        telephony: {
          provider_a: { configured: false, phone_number: null, inbound_enabled: false },
          provider_b: { configured: false, phone_number: null, inbound_enabled: false },
          sip: null,
        },
        realtime: { enable_webcam: true, enable_screen_share: true },
        analysis: null,
        redaction: null,
        conversation: null,
        draft_version: 1,
        published_version: 1,
        auto_publish: true,
      },
    );
    assert.ok(Date.parse(a.created_at) > Date.now() - 60_000);
  });

  it('creates with every field; null takes the default; voicemail_config defaults per field', async () => {
    const a = await createAgent({
      name: 'Appointment reminder',
      description: null,
      instruction: 'Confirm {{patient_name}}',
      first_message: 'Hi {{patient_name}}',
      voice_id: 'Aoede',
      language: 'English',
      language_code: 'en-US',
      accent: 'American',
      can_end_conversation: true,
      transfer_phone_number: '+14155550123',
      transfer_criteria: 'asks for a person',
      variable_placeholders: { patient_name: 'there' },
      voicemail_config: { enabled: true, message: 'Call us back' },
      provider_a_config: { account_sid: 'AC0123', auth_token: AUTH_TOKEN, phone_number: '+14155550100' },
      realtime: { enable_screen_share: false },
    });
    assert.equal(a.description, '');
    assert.equal(a.can_end_conversation, true);
    assert.deepEqual(a.voicemail_config, { enabled: true, message: 'Call us back', detection_timeout_seconds: null, retry_on_voicemail: true });
    assert.deepEqual(a.telephony.provider_a, { configured: true, phone_number: '+14155550100', inbound_enabled: false });
    assert.deepEqual(a.realtime, { enable_webcam: true, enable_screen_share: false });
    assert.deepEqual(a.variable_placeholders, { patient_name: 'there' });

    const got = await api('get', `/api/v1/agents/${a.agent_id}`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.body, a);
  });

  it('lists newest first with cursor pagination, only the own workspace', async () => {
    const mine = await tenant(t);
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await createAgent({ name: `A${i}` }, mine.apiKey)).agent_id);
    await createAgent({ name: 'foreign' }, other.apiKey);
    const p1 = await api('get', '/api/v1/agents?limit=2', undefined, mine.apiKey);
    assert.equal(p1.status, 200);
    assert.deepEqual(
      p1.body.data.map((x: { agent_id: string }) => x.agent_id),
      [ids[2], ids[1]],
    );
    assert.equal(p1.body.has_more, true);
    const p2 = await api('get', `/api/v1/agents?limit=2&starting_after=${p1.body.next_cursor}`, undefined, mine.apiKey);
    assert.deepEqual(
      p2.body.data.map((x: { agent_id: string }) => x.agent_id),
      [ids[0]],
    );
    assert.equal(p2.body.has_more, false);
    assert.equal(p2.body.next_cursor, null);
  });

  it('answers 403 for another workspace agent and 404 for none, on every agent operation', async () => {
    const foreign = await createAgent({ name: 'Theirs' }, other.apiKey);
    const before = await row(foreign.agent_id);
    for (const [method, body] of [
      ['get', undefined],
      ['patch', { name: 'Mine now' }],
      ['delete', undefined],
    ] as const) {
      const res = await api(method, `/api/v1/agents/${foreign.agent_id}`, body);
      assert.equal(res.status, 403, res.text);
      assert.equal(res.body.error.code, 'forbidden');
      const missing = await api(method, '/api/v1/agents/agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8V', body);
      assert.equal(missing.status, 404);
      assert.equal(missing.body.error.code, 'agent_not_found');
    }
    assert.deepEqual(await row(foreign.agent_id), before);
  });

  it('deletes an agent: 200 {status, agent_id}, then 404', async () => {
    const a = await createAgent({ name: 'Short lived' });
    const res = await api('delete', `/api/v1/agents/${a.agent_id}`);
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'deleted', agent_id: a.agent_id });
    assert.equal(await row(a.agent_id), undefined);
    assert.equal((await api('get', `/api/v1/agents/${a.agent_id}`)).status, 404);
  });

  it('lets a later domain refuse deletion (409 agent_has_active_batches) and keeps the agent', async () => {
    const a = await createAgent({ name: 'Busy' });
    t.service.agents.addDeleteGuard(async (_ws, agentId) => {
      if (agentId === a.agent_id)
        throw conflict('agent_has_active_batches', 'The agent has a scheduled or running batch; cancel it before deleting the agent.');
    });
    const res = await api('delete', `/api/v1/agents/${a.agent_id}`);
    assert.equal(res.status, 409, res.text);
    assert.equal(res.body.error.code, 'agent_has_active_batches');
    assert.ok(await row(a.agent_id));
  });

  it('refuses a create without a name, with unknown fields or bad values, and stores nothing', async () => {
    const fresh = await tenant(t);
    const cases: Array<[unknown, string, string | null]> = [
      [{}, 'missing_field', 'name'],
      [{ name: '' }, 'invalid_value', 'name'],
      [{ name: 'x', colour: 'red' }, 'unknown_field', 'colour'],
      [{ name: 'x', provider_a_config: { colour: 'red' } }, 'unknown_field', 'provider_a_config.colour'],
      [{ name: 'x', provider_b_config: { api_key: API_KEY, colour: 'red' } }, 'unknown_field', 'provider_b_config.colour'],
      [{ name: 'x', realtime: { enable_webcam: true, colour: 'red' } }, 'unknown_field', 'realtime.colour'],
      [{ name: 'x', voicemail_config: { enabled: true, colour: 'red' } }, 'unknown_field', 'voicemail_config.colour'],
      [{ name: 'x', can_end_conversation: 'yes' }, 'invalid_type', 'can_end_conversation'],
      [{ name: 'x', transfer_phone_number: '555-1234' }, 'invalid_value', 'transfer_phone_number'],
      [{ name: 'x', variable_placeholders: { 'bad name': 'v' } }, 'invalid_value', 'variable_placeholders'],
      [{ name: 'x', transfer_destinations: [{ name: 'Sales', phone_number: '+14155550171', description: 'd' }] }, 'invalid_value', 'transfer_destinations'],
      [{ name: 'x', transfer_destinations: [{ name: 'sales', phone_number: '+14155550171' }] }, 'missing_field', 'transfer_destinations'],
    ];
    for (const [body, code, param] of cases) {
      const res = await api('post', '/api/v1/agents', body, fresh.apiKey);
      assert.equal(res.status, 422, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.body.error.code, code, JSON.stringify(body));
      if (param) assert.ok(String(res.body.error.param).startsWith(param), `${JSON.stringify(body)}: param ${res.body.error.param}`);
    }
    assert.equal((await t.service.db.knex('agents').where({ workspace_id: fresh.workspaceId })).length, 0);
  });
});

describe('agents: PATCH rules', () => {
  it('rule 1: only the fields present change; an empty body changes nothing', async () => {
    const a = await createAgent({ name: 'Patch me', instruction: 'Be kind', voice_id: 'Puck', can_end_conversation: true });
    const res = await api('patch', `/api/v1/agents/${a.agent_id}`, { first_message: 'Hello!' });
    assert.equal(res.status, 200);
    // Each write makes the next version, published at once (auto_publish, the default).
    assert.deepEqual(res.body, { ...a, first_message: 'Hello!', draft_version: 2, published_version: 2 });
    const same = await api('patch', `/api/v1/agents/${a.agent_id}`, {});
    assert.deepEqual(same.body, res.body);
  });

  it('rule 2: provider configs merge field by field; sending only auth_token rotates it and keeps the number', async () => {
    const a = await createAgent({ name: 'Merge', provider_a_config: { account_sid: 'AC1', auth_token: AUTH_TOKEN, phone_number: '+14155550100' } });
    const stored = await row(a.agent_id);
    assert.ok(!JSON.stringify(stored).includes(AUTH_TOKEN), 'the token is not stored in plaintext');
    assert.match(stored.carrier_accounts.provider_a.config.auth_token, /^v2\./);
    assert.equal(t.service.secrets.open(stored.carrier_accounts.provider_a.config.auth_token, `agents/${a.agent_id}/provider_a/auth_token`), AUTH_TOKEN);

    const res = await api('patch', `/api/v1/agents/${a.agent_id}`, { provider_a_config: { auth_token: ROTATED_TOKEN } });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.telephony.provider_a, { configured: true, phone_number: '+14155550100', inbound_enabled: false });
    const runtime = await t.service.agents.loadForRuntime(tn.workspaceId, a.agent_id);
    assert.equal(runtime.carrierAccounts.provider_a?.config.auth_token, ROTATED_TOKEN);
    assert.equal(runtime.carrierAccounts.provider_a?.config.account_sid, 'AC1');
    assert.equal(runtime.carrierAccounts.provider_a?.phoneNumber, '+14155550100');

    // A field sent as null is cleared: configured turns false, the rest stays.
    const cleared = await api('patch', `/api/v1/agents/${a.agent_id}`, { provider_a_config: { account_sid: null } });
    assert.deepEqual(cleared.body.telephony.provider_a, { configured: false, phone_number: '+14155550100', inbound_enabled: false });
    assert.equal((await t.service.agents.loadForRuntime(tn.workspaceId, a.agent_id)).carrierAccounts.provider_a?.config.auth_token, ROTATED_TOKEN);
  });

  it('provider_b is configured only with api_key, connection_id, phone_number and public_key', async () => {
    const a = await createAgent({ name: 'B', provider_b_config: { api_key: API_KEY, connection_id: 'conn1', phone_number: '+14155550101' } });
    assert.equal(a.telephony.provider_b.configured, false);
    const res = await api('patch', `/api/v1/agents/${a.agent_id}`, { provider_b_config: { public_key: PUBLIC_KEY } });
    assert.deepEqual(res.body.telephony.provider_b, { configured: true, phone_number: '+14155550101', inbound_enabled: false });
    const stored = await row(a.agent_id);
    assert.ok(!JSON.stringify(stored).includes(API_KEY) && !JSON.stringify(stored).includes(PUBLIC_KEY));
    const runtime = await t.service.agents.loadForRuntime(tn.workspaceId, a.agent_id);
    assert.equal(runtime.carrierAccounts.provider_b?.config.api_key, API_KEY);
    assert.equal(runtime.carrierAccounts.provider_b?.config.public_key, PUBLIC_KEY);
  });

  it('rule 3: a provider config sent as null clears it entirely, inbound off', async () => {
    const a = await createAgent({ name: 'Clear', provider_a_config: { account_sid: 'AC1', auth_token: AUTH_TOKEN, phone_number: '+14155550102' } });
    await enableInboundInDatabase(a.agent_id, 'provider_a');
    assert.equal((await api('get', `/api/v1/agents/${a.agent_id}`)).body.telephony.provider_a.inbound_enabled, true);
    const res = await api('patch', `/api/v1/agents/${a.agent_id}`, { provider_a_config: null });
    assert.deepEqual(res.body.telephony.provider_a, { configured: false, phone_number: null, inbound_enabled: false });
    const stored = await row(a.agent_id);
    assert.equal(stored.carrier_accounts.provider_a, undefined, 'nothing of the account is left');
    assert.equal((await t.service.agents.loadForRuntime(tn.workspaceId, a.agent_id)).carrierAccounts.provider_a, undefined);
  });

  it('changing the phone number turns inbound off; rotating a credential keeps it on', async () => {
    const a = await createAgent({ name: 'Inbound', provider_a_config: { account_sid: 'AC1', auth_token: AUTH_TOKEN, phone_number: '+14155550103' } });
    await enableInboundInDatabase(a.agent_id, 'provider_a');
    const rotated = await api('patch', `/api/v1/agents/${a.agent_id}`, { provider_a_config: { auth_token: ROTATED_TOKEN, phone_number: '+14155550103' } });
    assert.equal(rotated.body.telephony.provider_a.inbound_enabled, true, 'the same number keeps inbound');
    const moved = await api('patch', `/api/v1/agents/${a.agent_id}`, { provider_a_config: { phone_number: '+14155550104' } });
    assert.deepEqual(moved.body.telephony.provider_a, { configured: true, phone_number: '+14155550104', inbound_enabled: false });
  });

  it('rule 5: what null does to every other field', async () => {
    const a = await createAgent({
      name: 'Nulls',
      description: 'd',
      instruction: 'i',
      first_message: 'f',
      model: 'gemini-2.0-flash-live-001',
      voice_id: 'Kore',
      analysis_model: 'gemini-2.5-pro',
      language: 'l',
      language_code: 'en-GB',
      accent: 'a',
      can_end_conversation: true,
      transfer_phone_number: '+14155550123',
      transfer_criteria: 't',
      variable_placeholders: { x: 'y' },
      voicemail_config: { enabled: true },
      realtime: { enable_webcam: false, enable_screen_share: false },
    });
    const res = await api('patch', `/api/v1/agents/${a.agent_id}`, {
      description: null,
      instruction: null,
      first_message: null,
      model: null,
      voice_id: null,
      analysis_model: null,
      language: null,
      language_code: null,
      accent: null,
      can_end_conversation: null,
      transfer_phone_number: null,
      transfer_criteria: null,
      variable_placeholders: null,
      voicemail_config: null,
      realtime: null,
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, {
      ...a,
      description: '',
      instruction: '',
      first_message: '',
      model: null,
      voice_id: null,
      analysis_model: null,
      language: null,
      language_code: null,
      accent: null,
      can_end_conversation: false,
      transfer_phone_number: null,
      transfer_criteria: null,
      variable_placeholders: {},
      voicemail_config: null,
      realtime: { enable_webcam: true, enable_screen_share: true },
      draft_version: 2,
      published_version: 2,
    });
  });

  it('realtime flags: left out unchanged, null back to enabled; voicemail and placeholders replace whole', async () => {
    const a = await createAgent({
      name: 'RT',
      realtime: { enable_webcam: false, enable_screen_share: false },
      variable_placeholders: { a: '1', b: '2' },
      voicemail_config: { enabled: true, message: 'm', detection_timeout_seconds: 10, retry_on_voicemail: false },
    });
    const r1 = await api('patch', `/api/v1/agents/${a.agent_id}`, { realtime: { enable_screen_share: null } });
    assert.deepEqual(r1.body.realtime, { enable_webcam: false, enable_screen_share: true });
    const r2 = await api('patch', `/api/v1/agents/${a.agent_id}`, { variable_placeholders: { c: '3' }, voicemail_config: { enabled: true } });
    assert.deepEqual(r2.body.variable_placeholders, { c: '3' });
    assert.deepEqual(r2.body.voicemail_config, { enabled: true, message: null, detection_timeout_seconds: null, retry_on_voicemail: true });
  });

  it('refuses name null (name_required), unknown fields at any level and bad values, changing nothing', async () => {
    const a = await createAgent({ name: 'Strict', provider_a_config: { account_sid: 'AC1', auth_token: AUTH_TOKEN, phone_number: '+14155550105' } });
    const before = await row(a.agent_id);
    const cases: Array<[unknown, number, string, string | null]> = [
      [{ name: null }, 422, 'name_required', 'name'],
      [{ name: '' }, 422, 'invalid_value', 'name'],
      [{ colour: 'red' }, 422, 'unknown_field', 'colour'],
      [{ provider_a_config: { colour: 'red' } }, 422, 'unknown_field', 'provider_a_config.colour'],
      [{ provider_a_config: { auth_token: ROTATED_TOKEN, colour: 'red' } }, 422, 'unknown_field', 'provider_a_config.colour'],
      [{ provider_b_config: { public_key: PUBLIC_KEY, colour: 'red' } }, 422, 'unknown_field', 'provider_b_config.colour'],
      [{ realtime: { enable_webcam: false, colour: 'red' } }, 422, 'unknown_field', 'realtime.colour'],
      [{ provider_a_config: { auth_token: 12345 } }, 422, 'invalid_type', 'provider_a_config'],
      [{ provider_a_config: { auth_token: '' } }, 422, 'invalid_value', 'provider_a_config'],
      [{ provider_a_config: { phone_number: 'not a number' } }, 422, 'invalid_value', 'provider_a_config'],
      [{ realtime: { enable_webcam: 'no' } }, 422, 'invalid_type', 'realtime'],
      [{ voicemail_config: { detection_timeout_seconds: 1 } }, 422, 'invalid_value', 'voicemail_config'],
    ];
    for (const [body, status, code, param] of cases) {
      const res = await api('patch', `/api/v1/agents/${a.agent_id}`, body);
      assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.body.error.code, code, `${JSON.stringify(body)}: ${res.text}`);
      if (param) assert.ok(String(res.body.error.param).startsWith(param), `${JSON.stringify(body)}: param ${res.body.error.param}`);
    }
    const bad = await t.http.patch(`/api/v1/agents/${a.agent_id}`).set(bearer(tn.apiKey)).set('Content-Type', 'application/json').send('{"name": ');
    seen.push(bad.text);
    assert.equal(bad.status, 422);
    assert.equal(bad.body.error.code, 'invalid_json');
    assert.deepEqual(await row(a.agent_id), before);
  });
});

describe("agents: default variables held to the filled fields' caps (issue 32)", () => {
  const notes = 'n'.repeat(2000);
  const refusedFor = (res: { status: number; body: any; text: string }, param: string, field: string) => {
    assert.equal(res.status, 422, res.text.slice(0, 500));
    assert.equal(res.body.error.code, 'filled_text_too_long');
    assert.equal(res.body.error.param, param);
    assert.match(res.body.error.message, new RegExp(`'${param.split('.')[1]}'.*${field}`));
  };

  it('refuses a create whose defaults overfill the instruction, first message or voicemail message, naming the variable and the field; stores nothing', async () => {
    const count = async () => Number((await t.service.db.knex('agents').where({ workspace_id: tn.workspaceId }).count({ n: '*' }))[0].n);
    const before = await count();
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ instruction: `${'{{notes}}'.repeat(25)}.`, variable_placeholders: { notes } }, 'variable_placeholders.notes', 'instruction'],
      [{ instruction: '{{a}}'.repeat(10_000), variable_placeholders: { a: notes } }, 'variable_placeholders.a', 'instruction'],
      [{ first_message: 'Hi {{name}}, {{name}}.', variable_placeholders: { name: 'x'.repeat(1000) } }, 'variable_placeholders.name', 'first_message'],
      [
        { voicemail_config: { enabled: true, message: '{{notes}}{{notes}}' }, variable_placeholders: { notes: 'v'.repeat(1001) } },
        'variable_placeholders.notes',
        'voicemail_config.message',
      ],
    ];
    for (const [body, param, field] of cases) refusedFor(await api('post', '/api/v1/agents', { name: 'Overfilled', ...body }), param, field);
    assert.equal(await count(), before);
    // At the cap exactly (25 x 2,000 = 50,000) is taken.
    const atCap = await createAgent({ name: 'At cap', instruction: '{{notes}}'.repeat(25), variable_placeholders: { notes } });
    assert.equal(atCap.variable_placeholders.notes, notes);
  });

  it('refuses an update that overfills with the stored values, whichever of text and defaults it changes; changes nothing', async () => {
    // 26 x 1,900 = 49,400 characters filled: within the instruction's 50,000.
    const a = await createAgent({
      name: 'Grows',
      instruction: '{{notes}}'.repeat(26),
      first_message: 'Hi {{name}}.',
      variable_placeholders: { notes: 'n'.repeat(1900) },
    });
    const stored = await row(a.agent_id);
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ instruction: '{{notes}}'.repeat(27) }, 'variable_placeholders.notes', 'instruction'],
      [{ variable_placeholders: { notes } }, 'variable_placeholders.notes', 'instruction'],
      [{ variable_placeholders: { notes: 'n'.repeat(1900), name: 'x'.repeat(1998) } }, 'variable_placeholders.name', 'first_message'],
      [{ voicemail_config: { enabled: true, message: '{{notes}}'.repeat(3) } }, 'variable_placeholders.notes', 'voicemail_config.message'],
    ];
    for (const [body, param, field] of cases) refusedFor(await api('patch', `/api/v1/agents/${a.agent_id}`, body), param, field);
    assert.deepEqual(await row(a.agent_id), stored);
  });
});

describe('agents: credentials never come back out', () => {
  it('no response, error message or log line contains a credential', async () => {
    // Exercise every path that handles credentials once more, including failures.
    const a = await createAgent({
      name: 'Secrets',
      provider_a_config: { account_sid: 'AC1', auth_token: AUTH_TOKEN, phone_number: '+14155550106' },
      provider_b_config: { api_key: API_KEY, public_key: PUBLIC_KEY },
    });
    await api('patch', `/api/v1/agents/${a.agent_id}`, { provider_a_config: { auth_token: ROTATED_TOKEN } });
    await api('patch', `/api/v1/agents/${a.agent_id}`, { provider_a_config: { auth_token: ROTATED_TOKEN, bogus: AUTH_TOKEN } });
    await api('patch', `/api/v1/agents/${a.agent_id}`, { provider_b_config: { api_key: API_KEY, phone_number: API_KEY } });
    await api('patch', `/api/v1/agents/${a.agent_id}`, { provider_b_config: API_KEY });
    await api('post', '/api/v1/agents', { name: 'x', provider_a_config: { auth_token: AUTH_TOKEN, account_sid: 7 } });
    await api('get', `/api/v1/agents/${a.agent_id}`);
    await api('get', '/api/v1/agents');
    assert.ok(seen.length > 20);
    for (const secret of SECRETS) {
      for (const text of seen) assert.ok(!text.includes(secret), `a response contains a credential: ${text.slice(0, 200)}`);
      for (const line of t.logs) assert.ok(!line.includes(secret), `a log line contains a credential: ${line.slice(0, 200)}`);
    }
    assert.ok(t.logs.length > 20, 'the service logged requests');
  });
});

describe('agents: model and voice from the voice catalogue (issue 34)', () => {
  it('serves the catalogue: the models with what each supports and the default, the voices with their languages', async () => {
    const res = await api('get', '/api/v1/voice-catalogue');
    assert.equal(res.status, 200, res.text);
    const defaults = res.body.models.filter((m: { default: boolean }) => m.default);
    assert.deepEqual(
      defaults.map((m: { id: string }) => m.id),
      ['gemini-live-2.5-flash-preview'],
      'exactly one default: the service-wide VOICE_MODEL (its default here)',
    );
    assert.ok(
      res.body.models.some(
        (m: { id: string; supports: { text_output: boolean } }) => m.id === 'gemini-2.5-flash-native-audio-preview-09-2025' && !m.supports.text_output,
      ),
    );
    const puck = res.body.voices.find((v: { id: string }) => v.id === 'Puck');
    assert.ok(puck.languages.includes('en-US') && puck.languages.includes('fr-FR'), JSON.stringify(puck));
    const analysis = res.body.analysis_models as Array<{ id: string; default: boolean; supports: { structured_output: boolean } }>;
    assert.deepEqual(
      analysis.filter((m) => m.default).map((m) => m.id),
      ['gemini-2.5-flash'],
      'exactly one default analysis model: the service-wide VOICE_ANALYSIS_MODEL (its default here)',
    );
    assert.ok(analysis.some((m) => m.id === 'gemini-2.5-pro' && m.supports.structured_output));
    assert.equal((await t.http.get('/api/v1/voice-catalogue')).status, 401);
  });

  it('takes a model and voice of the catalogue; refuses others on create and update with 422 naming the field, changing nothing', async () => {
    const a = await createAgent({ name: 'Chosen', model: 'gemini-2.0-flash-live-001', voice_id: 'Puck' });
    assert.deepEqual([a.model, a.voice_id], ['gemini-2.0-flash-live-001', 'Puck']);
    const count = async () => Number((await t.service.db.knex('agents').where({ workspace_id: tn.workspaceId }).count({ n: '*' }))[0].n);
    const before = await count();
    for (const [body, code, param] of [
      [{ model: 'gpt-4o-realtime' }, 'unknown_model', 'model'],
      [{ voice_id: 'Alloy' }, 'unknown_voice', 'voice_id'],
      [{ model: 'gemini-2.0-flash-live-001', voice_id: 'puck' }, 'unknown_voice', 'voice_id'],
    ] as const) {
      const created = await api('post', '/api/v1/agents', { name: 'Unknown', ...body });
      assert.equal(created.status, 422, created.text);
      assert.deepEqual([created.body.error.code, created.body.error.param], [code, param]);
      const updated = await api('patch', `/api/v1/agents/${a.agent_id}`, body);
      assert.equal(updated.status, 422, updated.text);
      assert.deepEqual([updated.body.error.code, updated.body.error.param], [code, param]);
    }
    assert.equal(await count(), before);
    assert.deepEqual((await api('get', `/api/v1/agents/${a.agent_id}`)).body, a);
    const reset = await api('patch', `/api/v1/agents/${a.agent_id}`, { model: null, voice_id: null });
    assert.deepEqual([reset.body.model, reset.body.voice_id], [null, null]);
  });
});

describe('agents: analysis model from the voice catalogue (issue 34)', () => {
  it('takes an analysis model of the catalogue; refuses others on create and update with 422 unknown_analysis_model, changing nothing', async () => {
    const a = await createAgent({ name: 'Analysed', analysis_model: 'gemini-2.5-pro' });
    assert.equal(a.analysis_model, 'gemini-2.5-pro');
    const count = async () => Number((await t.service.db.knex('agents').where({ workspace_id: tn.workspaceId }).count({ n: '*' }))[0].n);
    const before = await count();
    // A live model is not an analysis model, and ids are exact.
    for (const analysis_model of ['gemini-live-2.5-flash-preview', 'Gemini-2.5-Pro', 'gpt-4o']) {
      const created = await api('post', '/api/v1/agents', { name: 'Unknown', analysis_model });
      assert.equal(created.status, 422, created.text);
      assert.deepEqual([created.body.error.code, created.body.error.param], ['unknown_analysis_model', 'analysis_model']);
      const updated = await api('patch', `/api/v1/agents/${a.agent_id}`, { analysis_model, name: 'Renamed' });
      assert.equal(updated.status, 422, updated.text);
      assert.deepEqual([updated.body.error.code, updated.body.error.param], ['unknown_analysis_model', 'analysis_model']);
    }
    assert.equal(await count(), before);
    assert.deepEqual((await api('get', `/api/v1/agents/${a.agent_id}`)).body, a);
    const other = await api('patch', `/api/v1/agents/${a.agent_id}`, { analysis_model: 'gemini-2.5-flash-lite' });
    assert.equal(other.body.analysis_model, 'gemini-2.5-flash-lite');
    const untouched = await api('patch', `/api/v1/agents/${a.agent_id}`, { name: 'Still analysed' });
    assert.equal(untouched.body.analysis_model, 'gemini-2.5-flash-lite', 'left out: unchanged');
    const reset = await api('patch', `/api/v1/agents/${a.agent_id}`, { analysis_model: null });
    assert.equal(reset.body.analysis_model, null);
  });
});
