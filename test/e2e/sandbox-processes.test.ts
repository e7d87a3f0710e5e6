/**
 * The simulators as processes of their own (`npm run sandbox -- carriers|voice`, scripts/sandbox.ts), as
 * instances sharing one carrier and one voice service use them: each prints one JSON line once
 * listening, an instance pointed at them by URL runs calls on both carriers through them, and both stop
 * cleanly on SIGTERM.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { FAST_CALLS, createPhoneAgent, providerBConfigFor, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';

const root = path.resolve(import.meta.dirname, '../..');

interface Sandbox {
  child: ChildProcess;
  ready: Record<string, string>;
}

/** Starts `scripts/sandbox.ts <args>` and resolves with the JSON line it prints once listening. */
function startSandbox(args: string[]): Promise<Sandbox> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/sandbox.ts', ...args], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOG_LEVEL: 'warn' },
  });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      out += d;
      const line = out.split('\n')[0];
      if (out.includes('\n')) resolve({ child, ready: JSON.parse(line) });
    });
    child.once('exit', (code) => reject(new Error(`sandbox ${args.join(' ')} exited with ${code}: ${err}`)));
  });
}

const exitCode = (child: ChildProcess) => new Promise<number | null>((r) => (child.exitCode !== null ? r(child.exitCode) : child.once('exit', r)));

let carriers: Sandbox;
let voice: Sandbox;
let t: TestService;
let tn: Tenant;

before(async () => {
  [carriers, voice] = await Promise.all([startSandbox(['carriers', '--speed=4', '--ring-ms=40']), startSandbox(['voice', '--speed=4'])]);
  t = await startTestService({
    ...FAST_CALLS,
    PROVIDER_A_API_URL: carriers.ready.providerAUrl,
    PROVIDER_B_API_URL: carriers.ready.providerBUrl,
    VOICE_SERVICE_URL: voice.ready.url,
    VOICE_SANDBOX_MS_PER_CHAR: '30',
  });
  tn = await tenant(t);
});

after(async () => {
  await t?.close();
  carriers?.child.kill('SIGKILL');
  voice?.child.kill('SIGKILL');
});

describe('npm run sandbox', () => {
  it('prints where each simulator listens, as one JSON line', () => {
    assert.deepEqual(Object.keys(carriers.ready).sort(), ['providerAUrl', 'providerBPublicKey', 'providerBUrl', 'sipTrunkHost', 'url']);
    assert.match(carriers.ready.sipTrunkHost, /^127\.0\.0\.1:\d+$/);
    assert.match(carriers.ready.providerAUrl, /^http:\/\/127\.0\.0\.1:\d+\/provider_a$/);
    assert.match(carriers.ready.providerBUrl, /^http:\/\/127\.0\.0\.1:\d+\/provider_b\/v2$/);
    assert.equal(Buffer.from(carriers.ready.providerBPublicKey, 'base64').length, 32);
    assert.deepEqual(Object.keys(voice.ready), ['url']);
    assert.match(voice.ready.url, /^ws:\/\/127\.0\.0\.1:\d+$/);
  });

  it('an instance pointed at them runs a whole conversation on each carrier, nothing simulated in-process', async () => {
    assert.equal(t.service.sandbox.carriers, null);
    assert.equal(t.service.sandbox.voice, null);
    for (const provider of ['provider_a', 'provider_b'] as const) {
      const agentId = await createPhoneAgent(t, tn, provider, provider === 'provider_b' ? providerBConfigFor(carriers.ready.providerBPublicKey) : {});
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('5555') });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      const call = await waitForCall(t, tn, res.body.call_id, undefined, 30_000);
      assert.equal(call.status, 'completed', provider);
      const said = (call.transcript as Array<{ role: string; text: string }>).filter((turn) => turn.role === 'user').map((turn) => turn.text);
      assert.ok(said.includes('Hello, this is Sam.'), `the voice service heard the callee through the carrier (${provider}): ${JSON.stringify(said)}`);
    }
  });

  it('a schema that refers to itself (one stored before the service refused them) does not end the voice process', async () => {
    const turn = (text: string) => ({ role: 'user' as const, text, timestamp: 1 });
    const recursive = { type: 'object', properties: { name: { type: 'string' }, a: { $ref: '#' }, b: { $ref: '#' } } };
    const answer = await t.service.voice.analyze({ instruction: 'Take names.', transcript: [turn('Name is Sam.')], dataSchema: recursive });
    assert.deepEqual(answer.data?.ok && (answer.data.value as Record<string, unknown>).name, 'Sam', JSON.stringify(answer.data).slice(0, 500));
    assert.equal(voice.child.exitCode, null, 'the voice process is still running');
    const again = await t.service.voice.analyze({
      instruction: 'Take names.',
      transcript: [turn('Name is Kim.')],
      dataSchema: { type: 'object', properties: { name: { type: 'string' } } },
    });
    assert.deepEqual(again.data, { ok: true, value: { name: 'Kim' } });
  });

  it('both stop on SIGTERM with exit code 0; an unknown simulator is a usage error', async () => {
    carriers.child.kill('SIGTERM');
    voice.child.kill('SIGTERM');
    assert.deepEqual(await Promise.all([exitCode(carriers.child), exitCode(voice.child)]), [0, 0]);
    const bad = spawn(process.execPath, ['--import', 'tsx', 'scripts/sandbox.ts', 'bogus'], { cwd: root, stdio: 'ignore' });
    assert.equal(await exitCode(bad), 2);
  });
});
