/**
 * Issue 32's stall findings beyond the tool schemas (tools-hostile.test.ts), measured the way they
 * were found: a second client polls `GET /healthz` back to back beside the hostile request, and its
 * slowest answer is held to STALL_FACTOR times the slowest beside ordinary requests of the same kind,
 * taken on the same instance in the same test (test/helpers/event-loop.ts; no figure in ms). Each is
 * cut to seconds: the sizes that stalled the service, or the part of a flood a budget lets through
 * and then some. What each request is answered with is asserted too.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, connect, createAgent, fixture, mintSession, setWorkspace, type Client } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { wideSchema } from '../helpers/hostile-schemas.js';
import { assertNoStall } from '../helpers/event-loop.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';

let t: TestService;
let tn: Tenant;

before(async () => {
  t = await startTestService({ ...FAST_CALLS, SCHEMA_POOL_THREADS: '2' });
  tn = await tenant(t);
  // The ordinary requests place calls again and again: room for them beside the hostile ones.
  await setWorkspace(t, tn.workspaceId, { plan: 'enterprise', concurrent_session_limit: 50, credit_balance_cents: 100_000_000 });
});

after(() => t.close());

const b64 = (s: string) => Buffer.from(s).toString('base64');
const sandbox = (): SandboxCarriers => t.service.sandbox.carriers!.server;

describe('placeholder filling (issue 32: 10,000 {{a}} of 2,000 characters)', () => {
  it('a call and a batch whose filled instruction would be 20 MB are refused with 422 filled_text_too_long, beside /healthz', async () => {
    const bomb = await createPhoneAgent(t, tn, 'provider_a', { instruction: '{{a}}'.repeat(10_000) });
    const plain = await createPhoneAgent(t, tn, 'provider_a', { instruction: 'Ask {{a}} how they are.' });
    const a = 'x'.repeat(2000);
    const ordinaryCall = async () => {
      const res = await placeCall(t, tn, { agent_id: plain, to_number: sandboxNumber('0002'), variables: { a: 'Ada' } });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    };
    const call = await assertNoStall(
      t.url,
      () => placeCall(t, tn, { agent_id: bomb, to_number: sandboxNumber('0002'), variables: { a } }),
      ordinaryCall,
      'a call filling 10,000 placeholders',
    );
    assert.equal(call.status, 422, JSON.stringify(call.body).slice(0, 300));
    assert.equal(call.body.error.code, 'filled_text_too_long');
    assert.equal(call.body.error.param, 'variables.a');

    const batch = (agentId: string, value: string) =>
      t.http
        .post('/api/v1/batches')
        .set(bearer(tn.apiKey))
        .send({
          agent_id: agentId,
          name: 'Bomb',
          recipients: Array.from({ length: 10 }, () => ({ to_number: sandboxNumber('0002'), variables: { a: value } })),
        });
    const refused = await assertNoStall(
      t.url,
      () => batch(bomb, a),
      () => batch(plain, 'Ada').expect(201),
      'a batch of 10 filling 10,000 placeholders each',
    );
    assert.equal(refused.status, 422, JSON.stringify(refused.body).slice(0, 300));
    assert.equal(refused.body.error.code, 'filled_text_too_long');
  });
});

describe('a keypad flood (issue 32: 20,000 # on a carrier media stream)', () => {
  it('20,000 keys pressed at once: the call completes, beside /healthz', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const call = async (keys: string) => {
      const to = sandboxNumber('6702');
      sandbox().setScript(to, [{ waitForAgent: true }, { pressDigits: keys, gapMs: 0 }, { waitForAgent: true, maxMs: 5_000 }, { hangup: true }]);
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      return waitForCall(t, tn, res.body.call_id, undefined, 60_000);
    };
    const flooded = await assertNoStall(
      t.url,
      () => call('#'.repeat(20_000)),
      () => call('12#'),
      'a call whose caller presses 20,000 keys',
    );
    assert.equal(flooded.status, 'completed');
    assert.equal(sandbox().call(flooded.call_sid)!.dtmfSent.length, 20_000, 'the carrier sent every key');
  });
});

describe('realtime floods (issue 32: 3,000 typed messages, forty 2.9 MB images)', () => {
  let agentId: string;
  before(async () => {
    agentId = await createAgent(t, tn);
  });

  /** Opens a session of `source` after its greeting; `frames` are sent at once, then a frame whose error says all were handled. */
  async function session(source: string, frames: Buffer[]): Promise<Client> {
    // A zero masking key: the client shares this process with the service, and masking is the client's cost.
    const c = connect((await mintSession(t, tn, agentId, source)).ws_url, { generateMask: (mask) => mask.fill(0) });
    await c.next('session_started', 10_000);
    await c.next('turn_complete', 10_000);
    for (const f of frames) c.ws.send(f, { binary: false });
    // Frames are handled in order: the answer to this one comes after every frame before it.
    c.ws.send('[]');
    await c.next((m) => m.type === 'error' && m.code === 'invalid_message', 60_000);
    await c.close();
    return c;
  }
  const codes = (c: Client) => c.messages.filter((m) => m.type === 'error').map((m) => m.code);

  it('3,000 typed messages at once: text_rate_limited once a run of drops, beside /healthz', async () => {
    const flood = Array.from({ length: 3000 }, (_, i) => Buffer.from(JSON.stringify({ mime_type: 'text/plain', data: b64(`Flood message ${i}`) })));
    const few = flood.slice(0, 3);
    const c = await assertNoStall(
      t.url,
      () => session('voice', flood),
      () => session('voice', few),
      'a session sent 3,000 typed messages',
    );
    const limited = codes(c).slice(0, -1);
    // One answer a run of drops: a second run only after the budget let a message through (1 a second).
    assert.ok(limited.length >= 1 && limited.length < 30 && limited.every((code) => code === 'text_rate_limited'), JSON.stringify(codes(c)));
  });

  it('ten images of 2 MiB + 1,000 bytes (the largest a frame holds): each image_too_large, beside /healthz', async () => {
    const frame = Buffer.from(JSON.stringify({ mime_type: 'image/jpeg', data: Buffer.alloc(2 * 1024 * 1024 + 1000, 0xff).toString('base64') }));
    const image = Buffer.from(JSON.stringify({ mime_type: 'image/jpeg', data: fixture('images/camera-frame.jpg').toString('base64') }));
    const flood = Array.from({ length: 10 }, () => frame);
    const c = await assertNoStall(
      t.url,
      () => session('camera', flood),
      () => session('camera', [image, image]),
      'a session sent ten 2.8 MB frames',
    );
    assert.deepEqual(codes(c), [...flood.map(() => 'image_too_large'), 'invalid_message']);
  });
});

describe('long arrays (issue 32: a 0.9 MB webhook events array, 80,000 integers)', () => {
  // Bodies are written before /healthz is polled: the client shares the service's process, and
  // writing 0.9 MB of JSON is the client's work, not the service's.
  let made = 0;
  const body = (events: unknown[]) => JSON.stringify({ url: `https://example.com/hooks/voice-${made++}`, events });
  const webhook = (json: string) => t.http.post('/api/v1/webhooks').set(bearer(tn.apiKey)).set('Content-Type', 'application/json').send(json);
  const ordinary = async () => {
    const res = await webhook(body(['call.completed'])).expect(201);
    await t.http.delete(`/api/v1/webhooks/${res.body.webhook_id}`).set(bearer(tn.apiKey)).expect(200);
  };

  it('are refused in the envelope before their items are looked at, beside /healthz', async () => {
    const names = body(Array.from({ length: 60_000 }, () => 'call.completed'));
    const strings = await assertNoStall(t.url, () => webhook(names), ordinary, '60,000 event names');
    assert.equal(strings.status, 422, JSON.stringify(strings.body).slice(0, 300));
    assert.equal(strings.body.error.param, 'events');
    const integers = body(Array.from({ length: 80_000 }, (_, i) => i));
    const ints = await assertNoStall(t.url, () => webhook(integers), ordinary, '80,000 integers');
    assert.equal(ints.status, 422, JSON.stringify(ints.body).slice(0, 300));
  });
});

describe('analysis schemas (issue 32: a self-referencing schema, one worker for every tenant)', () => {
  const SMALL = { type: 'object', properties: { name: { type: 'string' } } };
  const create = (who: Tenant, name: string, schema: Record<string, unknown>) =>
    t.http.post('/api/v1/agents').set(bearer(who.apiKey)).send({ name, instruction: 'You are the receptionist of Acme Dental.', analysis: { schema } });

  it('a schema that refers to itself is refused with 422 analysis_schema_too_complex, beside /healthz', async () => {
    const res = await assertNoStall(
      t.url,
      () => create(tn, 'Self', { type: 'object', properties: { a: { $ref: '#' } } }),
      () => create(tn, 'Plain', SMALL).expect(201),
      'an agent whose analysis schema refers to itself',
    );
    assert.equal(res.status, 422, JSON.stringify(res.body));
    assert.equal(res.body.error.code, 'analysis_schema_too_complex');
  });

  it("one workspace's queue of large schemas and another's create, beside /healthz", async () => {
    const other = await tenant(t, 'Neighbour');
    let n = 0;
    const results = await assertNoStall(
      t.url,
      () => Promise.all([...Array.from({ length: 8 }, (_, i) => create(tn, `Slow ${i}`, wideSchema(190, `q${n++}_`))), create(other, 'Neighbour', SMALL)]),
      () => create(other, 'Plain', SMALL).expect(201),
      "eight large analysis schemas from one workspace beside another's create",
    );
    for (const res of results) assert.equal(res.status, 201, JSON.stringify(res.body).slice(0, 300));
  });
});
