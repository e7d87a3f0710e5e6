/**
 * Provider `sip` inbound, with sipp (Debian's `sip-tester`) as the caller through a trunk: an INVITE
 * from an allowed source to a number the trunk delivers reaches the agent bound to it (its speech and
 * its RFC 4733 keys reach the call: the keys are a `dtmf` entry of the transcript), and on a trunk
 * that wants digest credentials sipp's answer to our 401 reaches the trunk's password check (a wrong
 * password is a bare 403), also when another trunk already trusts sipp's address.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { FAST_CALLS, waitForCall } from '../helpers/calls.js';
import { DTMF_PCAPS, freePort, LOOPBACK, startSipp } from '../helpers/sipp.js';

const SPEECH = path.resolve(import.meta.dirname, '../fixtures/audio/caller-question.ulaw-8k.raw');
const OPEN_NUMBER = '+14155550160';
const DIGEST_NUMBER = '+14155550161';
const SECOND_DIGEST_NUMBER = '+14155550162';

/** After the 200 (and its ACK, in the scenario): BYE. */
const BYE = `<pause milliseconds="1500" />
  <send retrans="500">
    <![CDATA[
      BYE sip:[service]@[remote_ip]:[remote_port] SIP/2.0
      Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch];rport
      From: <sip:+15550001111@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
      To: <sip:[service]@[remote_ip]:[remote_port]>[peer_tag_param]
      Call-ID: [call_id]
      CSeq: 3 BYE
      Max-Forwards: 70
      Content-Length: 0
    ]]>
  </send>
  <recv response="200" />`;

let t: TestService;
let tn: Tenant;
let sipPort: number;

async function bind(trunk: Record<string, unknown>, number: string): Promise<string> {
  const res = await t.http.post('/api/v1/sip-trunks').set(bearer(tn.apiKey)).send(trunk);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const agent = await t.http
    .post('/api/v1/agents')
    .set(bearer(tn.apiKey))
    .send({
      name: 'Front desk',
      first_message: 'Hello! This is Acme Dental.',
      sip_config: { trunk_id: res.body.trunk_id ?? res.body.id, phone_number: number },
    });
  assert.equal(agent.status, 201, JSON.stringify(agent.body));
  return agent.body.agent_id;
}

/** The inbound call sipp placed to `number`, once the service has it. */
async function inboundCall(number: string): Promise<Record<string, any>> {
  for (;;) {
    const list = await t.http.get('/api/v1/calls?direction=inbound').set(bearer(tn.apiKey));
    const call = (list.body.data as Array<Record<string, any>>).find((c) => c.to_number === number);
    if (call) return call;
    await new Promise((r) => setTimeout(r, 100));
  }
}

before(async () => {
  sipPort = await freePort();
  const rtp = await freePort();
  const { SANDBOX_CARRIERS_SPEED: _speed, CALL_AUDIO_RATE: _rate, ...fast } = FAST_CALLS;
  t = await startTestService({
    ...fast,
    SIP_PORT: String(sipPort),
    SIP_HOST: LOOPBACK,
    SIP_ADVERTISED_ADDRESS: LOOPBACK,
    SIP_RTP_PORT_MIN: String(rtp),
    SIP_RTP_PORT_MAX: String(rtp + 40),
    CALL_DTMF_GAP_MS: '500',
  });
  tn = await tenant(t);
});

after(async () => {
  await t?.close();
});

/**
 * sipp calls `number` on a digest trunk twice: with a wrong password (challenged, then a bare 403) and
 * with the right one (challenged, let in, BYE); the call reaches `agentId` and completes.
 */
async function challengedThenLetIn(number: string, auth: { username: string; password: string }, agentId: string): Promise<void> {
  for (const [password, FINAL, AFTER] of [
    ['guess', '403', '<timewait milliseconds="200" />'],
    [auth.password, '200', BYE],
  ]) {
    const sipp = await startSipp({
      name: 'uac-auth.xml',
      vars: { USERNAME: auth.username, PASSWORD: password, FINAL, AFTER },
      target: `${LOOPBACK}:${sipPort}`,
      service: number,
    });
    const r = await sipp.done;
    assert.equal(r.code, 0, `sipp (${FINAL}) failed:\n${r.stdout}\n${r.errors}`);
  }
  const call = await waitForCall(t, tn, (await inboundCall(number)).call_id);
  assert.equal(call.agent_id, agentId);
  assert.equal(call.status, 'completed');
}

describe('sipp calls an agent through a trunk', () => {
  it('challenges for the trunk credentials (401): the right password is let in, a wrong one gets 403', async () => {
    const auth = { username: 'acme', password: 's3cret-pass' };
    const agentId = await bind({ name: 'Carrier', inbound: { auth, numbers: [DIGEST_NUMBER] } }, DIGEST_NUMBER);
    await challengedThenLetIn(DIGEST_NUMBER, auth, agentId);
  });

  it('reaches the bound agent: its speech and keys reach the call', async () => {
    const agentId = await bind({ name: 'PBX', inbound: { allowed_sources: [LOOPBACK], numbers: [OPEN_NUMBER] } }, OPEN_NUMBER);
    const speechMs = (fs.statSync(SPEECH).size / 8000) * 1000;
    const sipp = await startSipp({
      name: 'uac-pcmu.xml',
      vars: { AUDIO: SPEECH, DTMF_DIR: DTMF_PCAPS, HOLD_MS: String(Math.ceil(speechMs) + 500) },
      target: `${LOOPBACK}:${sipPort}`,
      service: OPEN_NUMBER,
    });
    const result = await sipp.done;
    assert.equal(result.code, 0, `sipp failed:\n${result.stdout}\n${result.errors}`);
    const call = await waitForCall(t, tn, (await inboundCall(OPEN_NUMBER)).call_id);
    assert.equal(call.agent_id, agentId);
    assert.equal(call.provider, 'sip');
    assert.equal(call.from_number, '+15550001111');
    assert.equal(call.status, 'completed');
    assert.ok(
      (call.transcript as Array<{ role: string; dtmf?: string }>).some((e) => e.role === 'user' && e.dtmf === '15#'),
      JSON.stringify(call.transcript),
    );
  });

  it("challenges for a digest trunk's number (401) though another trunk trusts the source by address", async () => {
    // The PBX trunk of the test above lets loopback in by its source; the number's trunk still decides.
    const auth = { username: 'acme-2', password: 'other-s3cret' };
    const agentId = await bind({ name: 'Second carrier', inbound: { auth, numbers: [SECOND_DIGEST_NUMBER] } }, SECOND_DIGEST_NUMBER);
    await challengedThenLetIn(SECOND_DIGEST_NUMBER, auth, agentId);
  });
});
