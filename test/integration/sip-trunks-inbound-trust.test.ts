/**
 * authorizeInbound, the decision the SIP stack asks for each INVITE: against trunks and agents made
 * through the API, with a real digest exchange (RFC 8760 with MD5 and qop=auth, computed here on both
 * sides as a phone and the stack would). The refusals a stranger gets must not depend on the number.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import type { InboundDecision, PresentedDigest } from '../../src/sip-trunks/index.js';

let t: TestService;
let acme: Tenant;
let other: Tenant;
before(async () => {
  t = await startTestService();
  acme = await tenant(t);
  other = await tenant(t, 'Other Co');
});
after(() => t.close());

const md5 = (s: string) => createHash('md5').update(s).digest('hex');
const REALM = 'voice.example';

/** What a phone sends for `password` to a challenge, and the stack's check of it against a stored password. */
function digest(username: string, password: string, method = 'INVITE', uri = 'sip:+15552000001@voice.example'): PresentedDigest {
  const nonce = randomBytes(12).toString('hex');
  const cnonce = randomBytes(8).toString('hex');
  const nc = '00000001';
  const respond = (pw: string) => md5(`${md5(`${username}:${REALM}:${pw}`)}:${nonce}:${nc}:${cnonce}:auth:${md5(`${method}:${uri}`)}`);
  const presented = respond(password);
  return { username, matches: (stored) => respond(stored) === presented };
}

async function api(method: 'post' | 'patch', p: string, body: unknown, key = acme.apiKey) {
  const res = await t.http[method](p)
    .set({ Authorization: `Bearer ${key}` })
    .send(body as object);
  assert.ok(res.status < 300, res.text);
  return res.body;
}

const N = {
  ipOnly: '+15552000001',
  ipOnlyNoAgent: '+15552000002',
  digestOnly: '+15552000003',
  both: '+15552000004',
  pbxOnly: '+15552000005',
  nobody: '+15552000099',
};
const CARRIER = '203.0.113.9';
const PBX = '198.51.100.7';
const STRANGER = '192.0.2.55';
const B_PASSWORD = 'digest-only-Secret-1';
const C_PASSWORD = 'both-ways-Secret-2';

const ids: Record<string, string> = {};
const ask = (sourceAddress: string, toNumber: string, d?: PresentedDigest) => t.service.sipTrunks.authorizeInbound({ sourceAddress, toNumber, digest: d });
const refusal = (d: InboundDecision) => (d.allowed ? 'allowed' : d.reason);

function allowedTo(d: InboundDecision, trunk: string, agent: string, number: string) {
  assert.ok(d.allowed, JSON.stringify(d));
  assert.equal(d.trunk.id, ids[trunk]);
  assert.equal(d.agent.id, ids[agent]);
  assert.equal(d.number, number);
  assert.equal(d.agent.workspaceId, d.trunk.workspaceId);
}

async function bind(name: string, trunk: string, number: string, key = acme.apiKey) {
  const agent = await api('post', '/api/v1/agents', { name, sip_config: { trunk_id: ids[trunk], phone_number: number } }, key);
  ids[name] = agent.agent_id;
}

describe('authorizeInbound', () => {
  it('with only source-checked trunks, a stranger is refused as an unknown source whatever the number', async () => {
    const a = await api('post', '/api/v1/sip-trunks', { name: 'A', inbound: { allowed_sources: ['203.0.113.0/24'], numbers: [N.ipOnly, N.ipOnlyNoAgent] } });
    ids.A = a.trunk_id;
    await bind('agentA', 'A', N.ipOnly);
    for (const number of [N.ipOnly, N.ipOnlyNoAgent, N.nobody, 'not-a-number']) assert.equal(refusal(await ask(STRANGER, number)), 'unknown_source', number);
    assert.equal(refusal(await ask('not-an-address', N.ipOnly)), 'unknown_source');
  });

  it('a listed source reaches the agent of the number, in E.164 with or without +, and from an IPv4-mapped address', async () => {
    allowedTo(await ask(CARRIER, N.ipOnly), 'A', 'agentA', N.ipOnly);
    allowedTo(await ask(CARRIER, N.ipOnly.slice(1)), 'A', 'agentA', N.ipOnly);
    allowedTo(await ask(`::ffff:${CARRIER}`, N.ipOnly), 'A', 'agentA', N.ipOnly);
    // The trusted carrier may learn that a number is not its to deliver, or has no agent.
    assert.equal(refusal(await ask(CARRIER, N.ipOnlyNoAgent)), 'unknown_number');
    assert.equal(refusal(await ask(CARRIER, N.nobody)), 'unknown_number');
  });

  it('digest-only and source-plus-digest trunks: strangers are challenged, whatever the number', async () => {
    const b = await api(
      'post',
      '/api/v1/sip-trunks',
      { name: 'B', inbound: { auth: { username: 'b-user', password: B_PASSWORD }, numbers: [N.digestOnly] } },
      other.apiKey,
    );
    ids.B = b.trunk_id;
    await bind('agentB', 'B', N.digestOnly, other.apiKey);
    const c = await api('post', '/api/v1/sip-trunks', {
      name: 'C',
      inbound: { allowed_sources: [PBX], auth: { username: 'c-user', password: C_PASSWORD }, numbers: [N.both] },
    });
    ids.C = c.trunk_id;
    await bind('agentC', 'C', N.both);

    // Without credentials: the same challenge for every number, known or not, from anywhere.
    for (const source of [STRANGER, PBX])
      for (const number of [N.ipOnly, N.digestOnly, N.both, N.nobody])
        assert.equal(refusal(await ask(source, number)), 'credentials_required', `${source} ${number}`);
    // A source-only trunk's carrier is not challenged for its own numbers.
    allowedTo(await ask(CARRIER, N.ipOnly), 'A', 'agentA', N.ipOnly);
  });

  it('a digest that verifies reaches the agent; a wrong one is refused alike for every number', async () => {
    allowedTo(await ask(STRANGER, N.digestOnly, digest('b-user', B_PASSWORD)), 'B', 'agentB', N.digestOnly);
    allowedTo(await ask(PBX, N.both, digest('c-user', C_PASSWORD)), 'C', 'agentC', N.both);
    for (const number of [N.ipOnly, N.digestOnly, N.both, N.nobody]) {
      assert.equal(refusal(await ask(STRANGER, number, digest('b-user', 'wrong-password'))), 'wrong_credentials', number);
      assert.equal(refusal(await ask(STRANGER, number, digest('nobody', B_PASSWORD))), 'wrong_credentials', number);
    }
    // C wants both: its credentials from another source verify against no trunk.
    assert.equal(refusal(await ask(STRANGER, N.both, digest('c-user', C_PASSWORD))), 'wrong_credentials');
    assert.equal(refusal(await ask(PBX, N.both, digest('c-user', B_PASSWORD))), 'wrong_credentials');
    // Authenticated to B, asking for another trunk's number or none: told it is unknown.
    assert.equal(refusal(await ask(STRANGER, N.ipOnly, digest('b-user', B_PASSWORD))), 'unknown_number');
    assert.equal(refusal(await ask(STRANGER, N.nobody, digest('b-user', B_PASSWORD))), 'unknown_number');
  });

  it("the number's trunk decides: a source another trunk trusts is challenged for a digest trunk's number", async () => {
    // CARRIER is trusted by A's source list; B (digest only) delivers N.digestOnly.
    assert.equal(refusal(await ask(CARRIER, N.digestOnly)), 'credentials_required');
    allowedTo(await ask(CARRIER, N.digestOnly, digest('b-user', B_PASSWORD)), 'B', 'agentB', N.digestOnly);
    assert.equal(refusal(await ask(CARRIER, N.digestOnly, digest('b-user', 'wrong-password'))), 'unknown_number');
    // C takes calls from PBX only: for A's carrier C's number is one more number A does not deliver.
    assert.equal(refusal(await ask(CARRIER, N.both)), 'unknown_number');
    assert.equal(refusal(await ask(CARRIER, N.nobody)), 'unknown_number');

    // PBX listed by a source-only trunk D as well: C still asks it for C's credentials.
    const d = await api('post', '/api/v1/sip-trunks', { name: 'D', inbound: { allowed_sources: [PBX], numbers: [N.pbxOnly] } });
    ids.D = d.trunk_id;
    await bind('agentD', 'D', N.pbxOnly);
    assert.equal(refusal(await ask(PBX, N.both)), 'credentials_required');
    allowedTo(await ask(PBX, N.both, digest('c-user', C_PASSWORD)), 'C', 'agentC', N.both);
    allowedTo(await ask(PBX, N.pbxOnly), 'D', 'agentD', N.pbxOnly);
    assert.equal(refusal(await ask(PBX, N.nobody)), 'unknown_number');

    // A stranger is answered as before: the same challenge for every number (B takes any source).
    for (const number of [N.ipOnly, N.digestOnly, N.both, N.pbxOnly, N.nobody])
      assert.equal(refusal(await ask(STRANGER, number)), 'credentials_required', number);
  });

  it('follows changes: a rotated password, a removed source, an unbound agent', async () => {
    const ROTATED = 'rotated-B-Secret-3';
    await api('patch', `/api/v1/sip-trunks/${ids.B}`, { inbound: { auth: { password: ROTATED } } }, other.apiKey);
    assert.equal(refusal(await ask(STRANGER, N.digestOnly, digest('b-user', B_PASSWORD))), 'wrong_credentials');
    allowedTo(await ask(STRANGER, N.digestOnly, digest('b-user', ROTATED)), 'B', 'agentB', N.digestOnly);

    await api('patch', `/api/v1/sip-trunks/${ids.A}`, { inbound: { allowed_sources: ['203.0.113.128/25'] } });
    assert.equal(refusal(await ask(CARRIER, N.ipOnly)), 'credentials_required');
    allowedTo(await ask('203.0.113.200', N.ipOnly), 'A', 'agentA', N.ipOnly);

    await api('patch', `/api/v1/agents/${ids.agentA}`, { sip_config: null });
    assert.equal(refusal(await ask('203.0.113.200', N.ipOnly)), 'unknown_number');
  });
});
