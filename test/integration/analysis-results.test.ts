/**
 * Structured results from every conversation (an agent's `analysis` setting): the schema checked on
 * write (too large, too deep, a pattern RE2 cannot run, not a usable JSON Schema: 422 naming the field,
 * nothing stored), and after the conversation `data` and `success` filled by the sandbox analysis model
 * from what the caller said (src/sandbox/voice/extraction.ts) and validated against the schema, on the
 * call (`GET /api/v1/calls/{id}`), the web-session record and `call.completed`: exact values through
 * provider_a, provider_b and a web session; an answer that does not match the schema as `data: null`
 * with `invalid_output`; the model unreachable as `analysis_failed`; a call never answered as
 * `no_conversation`; an agent without the setting with none of the fields.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { startReceiver, subscribeCallCompleted, type Receiver } from '../helpers/webhooks.js';
import { bearer, connect, createAgent, mintSession, waitFor } from '../helpers/realtime.js';
import { branchingSchema as branching } from '../helpers/hostile-schemas.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall, type Provider } from '../helpers/calls.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';

let t: TestService;
let tn: Tenant;
let receiver: Receiver;
let carriers: SandboxCarriers;

before(async () => {
  t = await startTestService({ ...FAST_CALLS, VOICE_SANDBOX_SPEED: '8' });
  tn = await tenant(t);
  carriers = t.service.sandbox.carriers!.server;
  receiver = await startReceiver();
  await subscribeCallCompleted(t, tn.apiKey, receiver.url);
});

after(async () => {
  await t.close();
  await receiver.close();
});

async function eventFor(conversationId: string): Promise<Record<string, any>> {
  const found = await waitFor(
    async () => receiver.requests.find((r) => JSON.parse(r.rawBody.toString()).conversation_id === conversationId),
    15_000,
    `call.completed of ${conversationId}`,
  );
  return JSON.parse(found.rawBody.toString());
}

/** What the tests extract: a booked time, a lead score, consent, topics from a closed list, a ZIP code. */
const SCHEMA = {
  type: 'object',
  properties: {
    booked_time: { type: ['string', 'null'], format: 'date-time', description: 'The appointment the caller agreed to.' },
    lead_score: { type: 'integer', minimum: 0, maximum: 10 },
    consent: { type: 'boolean', description: 'Whether the caller agreed to be contacted again.' },
    topics: { type: 'array', items: { type: 'string', enum: ['billing', 'cleaning', 'whitening'] } },
    zip: { type: 'string', pattern: '^[0-9]{5}$' },
  },
  required: ['lead_score', 'consent'],
};
const CRITERIA = 'The caller says "book" and "thank you".';
const ANALYSIS = { schema: SCHEMA, success_criteria: CRITERIA };

const SAID = ['I want to book. Booked time is 2026-12-01T10:00:00Z; lead score is 8.', 'Consent: yes. Topics are cleaning and billing. Zip is 94110.'];
const EXPECTED_DATA = { booked_time: '2026-12-01T10:00:00Z', lead_score: 8, consent: true, topics: ['cleaning', 'billing'], zip: '94110' };
const EXPECTED_SUCCESS = { met: true, reason: 'The caller said "book" and "thank you".' };

const RESULT_FIELDS = ['data', 'data_error', 'success', 'success_error'];

async function agents(): Promise<number> {
  const res = await t.http.get('/api/v1/agents?limit=100').set(bearer(tn.apiKey));
  assert.equal(res.status, 200);
  return res.body.data.length;
}

/** `layers` object schemas nested through `properties` around an array of strings: 2 levels a layer, 3 for the array. */
function nested(layers: number): Record<string, unknown> {
  let s: Record<string, unknown> = { type: 'array', items: { type: 'string' } };
  for (let i = 0; i < layers; i++) s = { type: 'object', properties: { [`l${i}`]: s } };
  return s;
}

describe('the analysis setting on write', () => {
  const refusals: Array<[string, unknown, number, string, string | RegExp]> = [
    ['a schema larger than 16,384 bytes', { type: 'object', description: 'x'.repeat(16_400) }, 422, 'analysis_schema_too_large', 'analysis.schema'],
    [
      'a schema nesting more than 16 levels',
      nested(8),
      422,
      'analysis_schema_too_deep',
      'analysis.schema.properties.l7.properties.l6.properties.l5.properties.l4.properties.l3.properties.l2.properties.l1.properties.l0',
    ],
    [
      'a pattern RE2 cannot run (a back-reference)',
      { type: 'object', properties: { code: { type: 'string', pattern: '^(\\w+)-\\1$' } } },
      422,
      'invalid_analysis_schema',
      'analysis.schema.properties.code.pattern',
    ],
    [
      'a look-ahead in patternProperties',
      { type: 'object', patternProperties: { '^(?=x)': { type: 'string' } } },
      422,
      'invalid_analysis_schema',
      'analysis.schema.patternProperties.^(?=x)',
    ],
    [
      'not a JSON Schema (an unknown type)',
      { type: 'object', properties: { a: { type: 'strin' } } },
      422,
      'invalid_analysis_schema',
      /^analysis\.schema\.properties\.a\.type/,
    ],
    ['a misspelt keyword', { type: 'object', requried: ['a'] }, 422, 'invalid_analysis_schema', 'analysis.schema.requried'],
    [
      'an unknown format',
      { type: 'object', properties: { when: { type: 'string', format: 'datetime' } } },
      422,
      'invalid_analysis_schema',
      'analysis.schema.properties.when.format',
    ],
    [
      'a $ref that resolves nowhere',
      { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } },
      422,
      'invalid_analysis_schema',
      'analysis.schema.properties.a.$ref',
    ],
    [
      '$id below the root',
      { type: 'object', properties: { a: { $id: 'https://example.com/a', type: 'string' } } },
      422,
      'invalid_analysis_schema',
      'analysis.schema.properties.a.$id',
    ],
    [
      'a schema that refers to itself (issue 32: one text session ended the service)',
      { properties: { a: { $ref: '#' } }, type: 'object' },
      422,
      'analysis_schema_too_complex',
      'analysis.schema.properties.a.$ref',
    ],
    [
      'a loop through $defs',
      { type: 'object', properties: { n: { $ref: '#/$defs/node' } }, $defs: { node: { type: 'object', properties: { next: { $ref: '#/$defs/node' } } } } },
      422,
      'analysis_schema_too_complex',
      'analysis.schema.$defs.node.properties.next.$ref',
    ],
    [
      'two $refs per level for 20 levels (2^20 subschemas once followed)',
      branching(20),
      422,
      'analysis_schema_too_complex',
      /^analysis\.schema\.\$defs\.l\d+\.anyOf\.\d\.\$ref$/,
    ],
    ['a root that is not an object schema', { type: 'array' }, 422, 'invalid_value', 'analysis.schema.type'],
  ];

  for (const [what, schema, status, code, param] of refusals) {
    it(`refuses ${what} with ${status} ${code}, storing nothing`, async () => {
      const before = await agents();
      const res = await t.http.post('/api/v1/agents').set(bearer(tn.apiKey)).send({ name: 'Lead qualifier', analysis: { schema } });
      assert.equal(res.status, status, JSON.stringify(res.body));
      assert.equal(res.body.error.code, code, JSON.stringify(res.body));
      if (typeof param === 'string') assert.equal(res.body.error.param, param);
      else assert.match(res.body.error.param, param);
      assert.equal(await agents(), before, 'no agent was created');
    });
  }

  it('on update, a refused schema leaves the agent as it was', async () => {
    const agentId = await createAgent(t, tn, { analysis: ANALYSIS });
    const res = await t.http
      .patch(`/api/v1/agents/${agentId}`)
      .set(bearer(tn.apiKey))
      .send({ name: 'Renamed', analysis: { schema: { type: 'object', properties: { a: { type: 'string', pattern: '(?<=a)b' } } } } });
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(res.body.error.code, 'invalid_analysis_schema');
    assert.equal(res.body.error.param, 'analysis.schema.properties.a.pattern');
    const agent = (await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey))).body;
    assert.equal(agent.name, 'Receptionist');
    assert.deepEqual(agent.analysis, ANALYSIS);
  });

  it('keeps the setting as sent, replaces it as a whole, and clears it with null or an empty object', async () => {
    const agentId = await createAgent(t, tn, { analysis: ANALYSIS });
    const get = async () => (await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey))).body;
    assert.deepEqual((await get()).analysis, ANALYSIS);
    assert.equal(JSON.stringify((await get()).analysis), JSON.stringify(ANALYSIS), 'the schema as written, keys in their order');
    let res = await t.http
      .patch(`/api/v1/agents/${agentId}`)
      .set(bearer(tn.apiKey))
      .send({ analysis: { success_criteria: 'The caller books.' } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.analysis, { schema: null, success_criteria: 'The caller books.' });
    res = await t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send({ analysis: {} });
    assert.equal(res.body.analysis, null);
    res = await t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send({ analysis: ANALYSIS });
    assert.deepEqual(res.body.analysis, ANALYSIS);
    res = await t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send({ analysis: null });
    assert.equal(res.body.analysis, null);
    // An agent created without it shows null.
    assert.equal((await t.http.get(`/api/v1/agents/${await createAgent(t, tn)}`).set(bearer(tn.apiKey))).body.analysis, null);
  });

  it('accepts a schema of exactly 16 levels', async () => {
    const res = await t.http
      .post('/api/v1/agents')
      .set(bearer(tn.apiKey))
      .send({ name: 'Deep', analysis: { schema: nested(7) } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
  });

  it('accepts a pattern that would backtrack catastrophically in JavaScript: RE2 runs it in linear time', async () => {
    const agentId = await createAgent(t, tn, { analysis: { schema: { type: 'object', properties: { code: { type: 'string', pattern: '^(a+)+$' } } } } });
    assert.match(agentId, /^agt_/);
  });
});

/** The caller of the phone tests: says what SAID holds, thanks the agent and hangs up. */
function caller(lines: string[]) {
  return [
    { waitForAgent: true as const },
    ...lines.flatMap((say) => [{ say }, { waitForAgent: true as const }]),
    { say: 'Thank you, goodbye.' },
    { waitForAgent: true as const, startWithinMs: 2000 },
    { hangup: true as const },
  ];
}

for (const provider of ['provider_a', 'provider_b'] as Provider[]) {
  describe(`${provider}: structured results of a phone call`, () => {
    it('extracts exactly what the caller said, on the call and in call.completed', async () => {
      const agentId = await createPhoneAgent(t, tn, provider, { analysis: ANALYSIS });
      const to = sandboxNumber('7101');
      carriers.setScript(to, caller(SAID));
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.data, null, 'null until the call is terminal');
      assert.equal(res.body.data_error, null);
      const call = await waitForCall(t, tn, res.body.call_id);
      assert.equal(call.status, 'completed');
      assert.deepEqual(
        call.transcript.filter((e: { role: string }) => e.role === 'user').map((e: { text: string }) => e.text),
        [...SAID, 'Thank you, goodbye.'],
      );
      assert.deepEqual(call.data, EXPECTED_DATA);
      assert.equal(call.data_error, null);
      assert.deepEqual(call.success, EXPECTED_SUCCESS);
      assert.equal(call.success_error, null);
      const e = await eventFor(call.call_id);
      for (const k of RESULT_FIELDS) assert.deepEqual(e[k], call[k], k);
      assert.deepEqual(Object.keys(e).slice(-4), RESULT_FIELDS, 'the results close the payload, in the contract order');
      assert.deepEqual(Object.keys(e.data), Object.keys(SCHEMA.properties), "the data's keys in the schema's order");
    });

    it('a value that breaks the schema: data is null with invalid_output, the call flagged for review', async () => {
      const agentId = await createPhoneAgent(t, tn, provider, { analysis: ANALYSIS });
      const to = sandboxNumber('7102');
      carriers.setScript(to, caller(['I want to book. Lead score is eleven; consent: yes.']));
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
      const call = await waitForCall(t, tn, res.body.call_id);
      assert.equal(call.data, null);
      assert.deepEqual(call.data_error, { code: 'invalid_output', message: "the model's data does not match the schema: /lead_score must be integer" });
      assert.deepEqual(call.success, EXPECTED_SUCCESS, 'the judgement stands on its own');
      assert.equal(call.needs_review, true);
      const e = await eventFor(call.call_id);
      assert.equal(e.data, null);
      assert.deepEqual(e.data_error, call.data_error);
    });
  });
}

describe('conversations that give nothing to extract', () => {
  it('a call never answered: data and success null with no_conversation, not flagged for review', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_b', { analysis: ANALYSIS });
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0002') });
    const call = await waitForCall(t, tn, res.body.call_id);
    assert.equal(call.status, 'busy');
    const error = { code: 'no_conversation', message: 'nothing was said in the conversation' };
    assert.deepEqual([call.data, call.data_error, call.success, call.success_error], [null, error, null, error]);
    assert.equal(call.needs_review, false);
    const e = await eventFor(call.call_id);
    assert.deepEqual([e.data, e.data_error, e.success, e.success_error], [null, error, null, error]);
  });

  it('an agent without the setting: no result field on the call or in call.completed', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const to = sandboxNumber('7103');
    carriers.setScript(to, caller(['Lead score is 8.']));
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    const call = await waitForCall(t, tn, res.body.call_id);
    assert.equal(call.status, 'completed');
    const e = await eventFor(call.call_id);
    for (const k of RESULT_FIELDS) {
      assert.ok(!(k in call), `${k} on the call`);
      assert.ok(!(k in e), `${k} in call.completed`);
    }
  });
});

describe('web session: structured results', () => {
  const b64 = (s: string) => Buffer.from(s).toString('base64');

  async function textSession(agentId: string, lines: string[], beforeClose?: () => Promise<void>): Promise<string> {
    const c = connect((await mintSession(t, tn, agentId, 'text')).ws_url);
    const sessionId = String((await c.next('session_started')).session_id);
    await c.next('turn_complete');
    for (const line of lines) {
      c.sendFrame('text/plain', b64(line));
      await c.next('turn_complete');
    }
    await beforeClose?.();
    await c.close();
    return sessionId;
  }

  async function record(sessionId: string): Promise<Record<string, any>> {
    await eventFor(sessionId);
    const res = await t.http.get(`/api/v1/realtime/conversations/${sessionId}`).set(bearer(tn.apiKey));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body;
  }

  it('extracts exactly what the user typed, on the record and in call.completed', async () => {
    const agentId = await createAgent(t, tn, { analysis: ANALYSIS });
    const sessionId = await textSession(agentId, [...SAID, 'Thank you!']);
    const rec = await record(sessionId);
    assert.deepEqual(rec.data, EXPECTED_DATA);
    assert.equal(rec.data_error, null);
    assert.deepEqual(rec.success, EXPECTED_SUCCESS);
    assert.equal(rec.success_error, null);
    const e = await eventFor(sessionId);
    for (const k of RESULT_FIELDS) assert.deepEqual(e[k], rec[k], k);
  });

  it('runs with the setting the session started with, whatever the agent has by its end', async () => {
    const agentId = await createAgent(t, tn, { analysis: { schema: SCHEMA, success_criteria: null } });
    const sessionId = await textSession(agentId, ['Lead score is 3. Consent: no. Zip is 1234.'], async () => {
      const res = await t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send({ analysis: null });
      assert.equal(res.status, 200);
    });
    const rec = await record(sessionId);
    // The ZIP breaks its pattern: the whole data is refused, never a partial object.
    assert.equal(rec.data, null);
    assert.deepEqual(rec.data_error, { code: 'invalid_output', message: `the model's data does not match the schema: /zip must match pattern "^[0-9]{5}$"` });
    assert.ok(!('success' in rec) && !('success_error' in rec), 'no criteria, no judgement');
    assert.equal(rec.needs_review, true);
  });

  it('the analysis model unreachable: data and success null with analysis_failed', async () => {
    const agentId = await createAgent(t, tn, { analysis: ANALYSIS });
    const voice = t.service.sandbox.voice!;
    const sessionId = await textSession(agentId, ['Lead score is 8; consent: yes.'], async () => voice.setUnavailable(true));
    try {
      const rec = await record(sessionId);
      const error = { code: 'analysis_failed', message: 'generateContent answered 503' };
      assert.deepEqual([rec.data, rec.data_error, rec.success, rec.success_error], [null, error, null, error]);
      assert.equal(rec.needs_review, true);
    } finally {
      voice.setUnavailable(false);
    }
  });
});

describe('the analysis model per agent (issue 34)', () => {
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  const analysedWith = async (instruction: string) =>
    waitFor(async () => t.service.sandbox.voice!.analyses.find((a) => a.instruction === instruction)?.model, 15_000, `the analysis of "${instruction}"`);

  async function textSession(agentId: string, beforeClose?: () => Promise<void>): Promise<void> {
    const c = connect((await mintSession(t, tn, agentId, 'text')).ws_url);
    await c.next('session_started');
    await c.next('turn_complete');
    c.sendFrame('text/plain', b64('Lead score is 8; consent: yes.'));
    await c.next('turn_complete');
    await beforeClose?.();
    await c.close();
  }

  it("a web session is analysed by its agent's analysis model as the session started; none chosen: the service's default", async () => {
    const chosen = 'You are the receptionist of Acme Dental, analysed by the pro model.';
    const agentId = await createAgent(t, tn, { instruction: chosen, analysis_model: 'gemini-2.5-pro' });
    await textSession(agentId, async () => {
      const res = await t.http.patch(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey)).send({ analysis_model: 'gemini-2.5-flash-lite' });
      assert.equal(res.status, 200, JSON.stringify(res.body));
    });
    assert.equal(await analysedWith(chosen), 'models/gemini-2.5-pro', 'the model the session started with');

    const plain = 'You are the receptionist of Acme Dental, analysed by the default model.';
    await textSession(await createAgent(t, tn, { instruction: plain }));
    assert.equal(await analysedWith(plain), 'models/gemini-2.5-flash', 'VOICE_ANALYSIS_MODEL');
  });

  for (const provider of ['provider_a', 'provider_b'] as Provider[]) {
    it(`${provider}: a phone call is analysed by its agent's analysis model`, async () => {
      const instruction = `You are the receptionist of Acme Dental, calling through ${provider} with the lite analysis.`;
      const agentId = await createPhoneAgent(t, tn, provider, { instruction, analysis_model: 'gemini-2.5-flash-lite' });
      const to = sandboxNumber('7104');
      carriers.setScript(to, caller(['Lead score is 8.']));
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const call = await waitForCall(t, tn, res.body.call_id);
      assert.equal(call.status, 'completed');
      assert.equal(await analysedWith(instruction), 'models/gemini-2.5-flash-lite');
    });
  }
});
