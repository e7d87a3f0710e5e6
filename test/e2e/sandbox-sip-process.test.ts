/**
 * The sandbox carriers as a process of their own (`npm run sandbox -- carriers`, scripts/sandbox.ts)
 * run the SIP far end too: started the way the script is (forked with its IPC channel, as the
 * benchmark does), it prints where a SIP trunk reaches it; an instance with SIP on places a call
 * through a trunk pointing there (the far end's person answers and is heard), and the process rings
 * the instance's SIP port for an inbound call to a number the trunk delivers.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { FAST_CALLS, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { freePort, LOOPBACK } from '../helpers/sipp.js';

const root = path.resolve(import.meta.dirname, '../..');
const NUMBER = sandboxNumber('5000');
const CALLER = '+14155550177';

interface Carriers {
  child: ChildProcess;
  ready: Record<string, string>;
  ask<T>(msg: Record<string, unknown>, key: string): Promise<T>;
}

/** `scripts/sandbox.ts carriers <args>` forked with an IPC channel; resolves with its ready message. */
async function forkCarriers(args: string[]): Promise<Carriers> {
  const child = fork(path.join(root, 'scripts/sandbox.ts'), ['carriers', ...args], {
    cwd: root,
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const ready = await new Promise<Record<string, string>>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`sandbox carriers exited with ${code}`)));
    child.on('message', (m: Record<string, string> & { ready?: boolean }) => m.ready && resolve(m));
  });
  return {
    child,
    ready,
    ask: <T>(msg: Record<string, unknown>, key: string) =>
      new Promise<T>((resolve) => {
        const on = (m: Record<string, unknown>) => {
          if (!(key in m)) return;
          child.off('message', on);
          resolve(m[key] as T);
        };
        child.on('message', on);
        child.send(msg);
      }),
  };
}

let carriers: Carriers;
let t: TestService;
let tn: Tenant;
let agentId: string;

before(async () => {
  const [sipPort, rtp, farRtp] = [await freePort(), await freePort(), await freePort()];
  carriers = await forkCarriers([`--sip-service=${LOOPBACK}:${sipPort}`, `--sip-rtp-ports=${farRtp}-${farRtp + 40}`, '--speed=4', '--ring-ms=40']);
  const { SANDBOX_CARRIERS_SPEED: _speed, CALL_AUDIO_RATE: _rate, ...fast } = FAST_CALLS;
  t = await startTestService({
    ...fast,
    PROVIDER_A_API_URL: carriers.ready.providerAUrl,
    PROVIDER_B_API_URL: carriers.ready.providerBUrl,
    SIP_PORT: String(sipPort),
    SIP_HOST: LOOPBACK,
    SIP_ADVERTISED_ADDRESS: LOOPBACK,
    SIP_RTP_PORT_MIN: String(rtp),
    SIP_RTP_PORT_MAX: String(rtp + 40),
  });
  tn = await tenant(t);
  const trunk = await t.http
    .post('/api/v1/sip-trunks')
    .set(bearer(tn.apiKey))
    .send({
      name: 'The sandbox process',
      inbound: { allowed_sources: [LOOPBACK], numbers: [NUMBER] },
      outbound: { host: carriers.ready.sipTrunkHost, transport: 'udp' },
    });
  assert.equal(trunk.status, 201, JSON.stringify(trunk.body));
  const agent = await t.http
    .post('/api/v1/agents')
    .set(bearer(tn.apiKey))
    .send({
      name: 'Receptionist',
      instruction: 'You are the receptionist of Acme Dental.',
      first_message: 'Hello! This is Acme Dental.',
      can_end_conversation: true,
      sip_config: { trunk_id: trunk.body.trunk_id, phone_number: NUMBER },
    });
  assert.equal(agent.status, 201, JSON.stringify(agent.body));
  agentId = agent.body.agent_id;
});

after(async () => {
  await t?.close();
  carriers?.child.kill('SIGKILL');
});

const userWords = (call: Record<string, any>) => (call.transcript as Array<{ role: string; text: string }>).filter((e) => e.role === 'user').map((e) => e.text);

describe('npm run sandbox -- carriers: the SIP far end', () => {
  it('says where a SIP trunk reaches it', () => {
    assert.match(carriers.ready.sipTrunkHost, /^127\.0\.0\.1:\d+$/);
  });

  it('takes a call placed through a trunk pointing at it: its person answers and is heard', async () => {
    const before = await carriers.ask<number>({ cmd: 'calls' }, 'calls');
    const res = await t.http.post('/api/v1/calls').set(bearer(tn.apiKey)).send({ agent_id: agentId, to_number: sandboxNumber(), provider: 'sip' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const call = await waitForCall(t, tn, res.body.call_id, undefined, 30_000);
    assert.equal(call.status, 'completed', JSON.stringify(call));
    assert.ok(userWords(call).includes('Hello, this is Sam.'), JSON.stringify(userWords(call)));
    assert.equal(await carriers.ask<number>({ cmd: 'calls' }, 'calls'), before + 1, 'the process took the call');
    assert.equal(t.service.sandbox.carriers?.server.calls().length ?? 0, 0, 'the in-process far end took none');
  });

  it('rings the service: an INVITE to its SIP port reaches the agent bound to the number', async () => {
    const rang = await carriers.ask<{ callSid?: string; error?: string }>({ cmd: 'ring', input: { provider: 'sip', from: CALLER, to: NUMBER } }, 'rang');
    assert.ok(rang.callSid, JSON.stringify(rang));
    const list = await t.http.get('/api/v1/calls?direction=inbound').set(bearer(tn.apiKey));
    const found = (list.body.data as Array<Record<string, any>>).find((c) => c.call_sid === rang.callSid);
    assert.ok(found, 'the service recorded the inbound call once it answered');
    assert.equal(found.from_number, CALLER);
    const call = await waitForCall(t, tn, found.call_id, undefined, 30_000);
    assert.equal(call.status, 'completed', JSON.stringify(call));
    assert.ok(userWords(call).includes('Hello, this is Sam.'), JSON.stringify(userWords(call)));
  });
});
