/**
 * The models client teams generate from our AsyncAPI document decode the webhook bodies the service
 * really sends. A running service places phone calls on both carriers (recorded and not, answered and
 * busy, with the agent's analysis), a batch and a web session; every `call.completed`,
 * `batch.completed`, `call.status_changed` and `call.transcript` body its webhooks receive is then
 * decoded with Modelina's Python models (pydantic preset, run by python3) and Java models (Jackson
 * preset, compiled by javac against Debian's Jackson), the flags docs/generating-a-client.md gives.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { JavaFileGenerator, JAVA_JACKSON_PRESET, PythonFileGenerator, PYTHON_PYDANTIC_PRESET } from '@asyncapi/modelina';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { createBatch, sandboxNumbers, waitForBatch } from '../helpers/batches.js';
import { bearer, connect, createAgent, mintSession, waitFor } from '../helpers/realtime.js';

const root = path.resolve(import.meta.dirname, '../..');
const decoders = path.join(import.meta.dirname, 'decoders');
const JACKSON = ['jackson-databind.jar', 'jackson-core.jar', 'jackson-annotations.jar'].map((j) => path.join('/usr/share/java', j));
const ANALYSIS = {
  schema: { type: 'object', properties: { booked: { type: 'boolean', description: 'Whether the caller booked.' } } },
  success_criteria: 'The caller confirmed the appointment.',
};

/** A python3 with pydantic 2 (the machine's, or Debian's python3-pydantic beside it). */
function pythonWithPydantic(): string {
  for (const python of ['python3', '/usr/bin/python3']) {
    try {
      execFileSync(python, ['-c', 'import pydantic; assert pydantic.VERSION.startswith("2")'], { stdio: 'pipe' });
      return python;
    } catch {
      // try the next one
    }
  }
  throw new Error('no python3 with pydantic 2: install python3-pydantic (.ci/run does)');
}

let t: TestService;
let receiver: Receiver;
let tn: Tenant;
let dir: string;
const bodies: Array<{ kind: string; body: Record<string, unknown> }> = [];

async function phoneCall(agentId: string, to: string, extra: Record<string, unknown> = {}): Promise<void> {
  const res = await placeCall(t, tn, { agent_id: agentId, to_number: to, ...extra });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  await waitForCall(t, tn, res.body.call_id as string, (c) => c.status !== 'queued' && c.status !== 'ringing' && c.status !== 'in_progress', 60_000);
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'models-decode-'));
  receiver = await startReceiver();
  t = await startTestService({ ...FAST_CALLS });
  tn = await tenant(t);
  const hook = await t.http
    .post('/api/v1/webhooks')
    .set(bearer(tn.apiKey))
    .send({ url: receiver.url, events: ['call.completed', 'batch.completed', 'call.status_changed', 'call.transcript'] });
  assert.equal(hook.status, 201, JSON.stringify(hook.body));

  const agentA = await createPhoneAgent(t, tn, 'provider_a', { recording: { enabled: true }, analysis: ANALYSIS });
  const agentB = await createPhoneAgent(t, tn, 'provider_b');
  await phoneCall(agentA, sandboxNumber());
  await phoneCall(agentA, sandboxNumber('0002'));
  await phoneCall(agentB, sandboxNumber(), { recording: { enabled: true } });
  const batch = await createBatch(t, tn, { agent_id: agentB, name: 'Decode', recipients: sandboxNumbers('0002', 2).map((to_number) => ({ to_number })) });
  assert.equal(batch.status, 201, JSON.stringify(batch.body));
  await waitForBatch(t, tn, batch.body.batch_id as string);
  const web = connect((await mintSession(t, tn, await createAgent(t, tn), 'text')).ws_url);
  await web.next('turn_complete');
  web.sendFrame('text/plain', Buffer.from('What are your opening hours?').toString('base64'));
  await web.next('turn_complete', 10_000);
  await web.close();

  const events = () => receiver.requests.map((r) => JSON.parse(r.rawBody.toString()) as Record<string, unknown>);
  // 3 phone calls, 2 batch calls, 1 web session; and the batch.
  await waitFor(
    async () => events().filter((e) => e.event === 'call.completed').length >= 6 && events().some((e) => e.event === 'batch.completed'),
    30_000,
    'the events',
  );
  for (const body of events()) bodies.push({ kind: String(body.event), body });
  fs.writeFileSync(path.join(dir, 'bodies.jsonl'), bodies.map((b) => JSON.stringify(b)).join('\n') + '\n');

  const asyncapi = JSON.parse(fs.readFileSync(path.join(root, 'generated/asyncapi.json'), 'utf8'));
  await new PythonFileGenerator({ presets: [PYTHON_PYDANTIC_PRESET] }).generateToFiles(asyncapi, path.join(dir, 'py/voice'), { packageName: 'voice' }, true);
  fs.writeFileSync(path.join(dir, 'py/voice/__init__.py'), '');
  const javaDir = path.join(dir, 'java');
  await new JavaFileGenerator({ presets: [JAVA_JACKSON_PRESET] }).generateToFiles(
    asyncapi,
    path.join(javaDir, 'com/example/voice'),
    { packageName: 'com.example.voice' },
    true,
  );
  fs.copyFileSync(path.join(decoders, 'Decode.java'), path.join(javaDir, 'Decode.java'));
});

after(async () => {
  await t?.close();
  await receiver?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('generated models decode the webhook bodies the service sends', () => {
  it('collected every kind, recorded calls and web sessions among them', () => {
    const kinds = new Set(bodies.map((b) => b.kind));
    assert.deepEqual([...kinds].sort(), ['batch.completed', 'call.completed', 'call.status_changed', 'call.transcript']);
    const completed = bodies.filter((b) => b.kind === 'call.completed').map((b) => b.body);
    assert.ok(
      completed.some((b) => b.recording),
      'a recorded call',
    );
    assert.ok(
      completed.some((b) => b.provider === 'web' && b.call_sid === null),
      'a web session',
    );
    assert.ok(
      completed.some((b) => 'data' in b && b.data_error !== null),
      'an analysis result that failed',
    );
  });

  it('Python (Modelina, pydantic preset): every body', () => {
    const out = execFileSync(pythonWithPydantic(), [path.join(decoders, 'decode.py'), path.join(dir, 'py'), path.join(dir, 'bodies.jsonl')], {
      encoding: 'utf8',
    });
    const results = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { kind: string; ok: boolean; error?: string; checks?: Record<string, unknown> });
    assert.equal(results.length, bodies.length);
    assert.deepEqual(
      results.filter((r) => !r.ok),
      [],
    );
    assert.ok(
      results.some((r) => r.checks?.channels === 2),
      'a recording read with its two channels',
    );
  });

  it('Java (Modelina, Jackson preset): every body', () => {
    const javaDir = path.join(dir, 'java');
    const sources = fs.readdirSync(path.join(javaDir, 'com/example/voice')).map((f) => path.join('com/example/voice', f));
    const cp = JACKSON.join(':');
    execFileSync('javac', ['-nowarn', '-cp', cp, '-d', path.join(dir, 'classes'), 'Decode.java', ...sources], { cwd: javaDir, stdio: 'pipe' });
    const out = execFileSync('java', ['-cp', `${cp}:${path.join(dir, 'classes')}`, 'Decode', path.join(dir, 'bodies.jsonl')], { encoding: 'utf8' });
    const lines = out.trim().split('\n');
    assert.equal(lines.length, bodies.length);
    assert.deepEqual(
      lines.filter((l) => !l.startsWith('ok ')),
      [],
    );
    assert.ok(
      lines.some((l) => l.includes('channels=2')),
      'a recording read with its two channels',
    );
  });
});
