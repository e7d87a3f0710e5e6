import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';

let t: TestService;
let tn: Tenant;
let other: Tenant;
before(async () => {
  t = await startTestService();
  tn = await tenant(t);
  other = await tenant(t, 'Other Co');
});
after(() => t.close());

const IN_PASSWORD = 'inbound-Secret-5fa9c1';
const OUT_PASSWORD = 'outbound-Secret-77e0b2';
const ROTATED = 'rotated-Secret-9d13aa';
const seen: string[] = [];

async function api(method: 'get' | 'post' | 'patch' | 'delete', p: string, body?: unknown, key = tn.apiKey) {
  let req = t.http[method](p).set({ Authorization: `Bearer ${key}` });
  if (body !== undefined) req = req.send(body as object);
  const res = await req;
  seen.push(res.text);
  return res;
}

// +1 555 xxx xxxx: fictional numbers, valid for libphonenumber's checks and owned by nobody.
let next = 1_000_000;
const freshNumber = () => `+1555${String(++next).padStart(7, '0')}`;

async function createTrunk(body: Record<string, unknown> = {}, key = tn.apiKey) {
  const res = await api(
    'post',
    '/api/v1/sip-trunks',
    { name: 'Carrier', inbound: { allowed_sources: ['203.0.113.0/24'], numbers: [freshNumber()] }, ...body },
    key,
  );
  assert.equal(res.status, 201, res.text);
  return res.body;
}

const trunkRow = (id: string) => t.service.db.knex('sip_trunks').where({ id }).first();
const trunkCount = (workspaceId: string) =>
  t.service.db
    .knex('sip_trunks')
    .where({ workspace_id: workspaceId })
    .count<{ count: string }[]>('* as count')
    .then((r) => Number(r[0].count));

/** A refused request changes nothing: the workspace's trunks read the same after it. */
async function unchanged(key: string, fn: () => Promise<void>) {
  const before = await api('get', '/api/v1/sip-trunks?limit=100', undefined, key);
  await fn();
  const after = await api('get', '/api/v1/sip-trunks?limit=100', undefined, key);
  assert.deepEqual(after.body, before.body);
}

async function refused(status: number, code: string, param: string | null, method: 'post' | 'patch', p: string, body: unknown, key = tn.apiKey) {
  const res = await api(method, p, body, key);
  assert.equal(res.status, status, res.text);
  assert.equal(res.body.error.code, code, res.text);
  if (param !== null) assert.equal(res.body.error.param, param, res.text);
  return res;
}

describe('sip trunks: CRUD', () => {
  it('creates a trunk; passwords are sealed, never returned, and sources normalised', async () => {
    const [n1, n2] = [freshNumber(), freshNumber()];
    const res = await api('post', '/api/v1/sip-trunks', {
      name: 'Acme carrier',
      inbound: {
        allowed_sources: ['203.0.113.0/24', '198.51.100.7', '2001:DB8::/32', '198.51.100.7/32'],
        auth: { username: 'acme-in', password: IN_PASSWORD },
        numbers: [n2, n1, n1],
      },
      outbound: { host: 'sip.carrier.example', transport: 'tls', auth: { username: 'acme-out', password: OUT_PASSWORD }, caller_id_numbers: [n1] },
    });
    assert.equal(res.status, 201, res.text);
    const trunk = res.body;
    assert.match(trunk.trunk_id, /^trk_[0-9A-Z]{26}$/);
    assert.deepEqual(trunk.inbound, {
      allowed_sources: ['198.51.100.7', '2001:db8::/32', '203.0.113.0/24'],
      auth: { username: 'acme-in', password_set: true },
      numbers: [n1, n2].sort(),
    });
    assert.deepEqual(trunk.outbound, {
      host: 'sip.carrier.example:5061',
      transport: 'tls',
      auth: { username: 'acme-out', password_set: true },
      caller_id_numbers: [n1],
    });
    const row = await trunkRow(trunk.trunk_id);
    assert.ok(!JSON.stringify(row).includes(IN_PASSWORD) && !JSON.stringify(row).includes(OUT_PASSWORD));
    assert.equal(t.service.secrets.open(row.inbound_password, `sip-trunks/${trunk.trunk_id}/inbound/password`), IN_PASSWORD);
    const got = await api('get', `/api/v1/sip-trunks/${trunk.trunk_id}`);
    assert.deepEqual(got.body, trunk);

    const termination = await t.service.sipTrunks.outboundTermination(tn.workspaceId, trunk.trunk_id);
    assert.deepEqual(termination, {
      trunkId: trunk.trunk_id,
      workspaceId: tn.workspaceId,
      host: 'sip.carrier.example',
      port: 5061,
      transport: 'tls',
      credentials: { username: 'acme-out', password: OUT_PASSWORD },
      callerIdNumbers: [n1],
    });
    assert.equal(await t.service.sipTrunks.outboundTermination(other.workspaceId, trunk.trunk_id), null);
  });

  it('a trunk may have one side only; an IPv6 host is shown in brackets with its default port', async () => {
    const inboundOnly = await createTrunk({ outbound: null });
    assert.equal(inboundOnly.outbound, null);
    assert.equal(await t.service.sipTrunks.outboundTermination(tn.workspaceId, inboundOnly.trunk_id), null);
    const outboundOnly = await createTrunk({ inbound: undefined, outbound: { host: '[2606:4700::1111]' } });
    assert.equal(outboundOnly.inbound, null);
    assert.deepEqual(outboundOnly.outbound, { host: '[2606:4700::1111]:5060', transport: 'udp', auth: null, caller_id_numbers: [] });
  });

  it('lists newest first with pagination; 403 and 404 on another workspace trunk or none', async () => {
    const mine = await tenant(t);
    const a = await createTrunk({}, mine.apiKey);
    const b = await createTrunk({}, mine.apiKey);
    const list = await api('get', '/api/v1/sip-trunks?limit=1', undefined, mine.apiKey);
    assert.deepEqual(
      list.body.data.map((x: { trunk_id: string }) => x.trunk_id),
      [b.trunk_id],
    );
    assert.equal(list.body.has_more, true);
    const rest = await api('get', `/api/v1/sip-trunks?limit=1&starting_after=${list.body.next_cursor}`, undefined, mine.apiKey);
    assert.deepEqual(
      rest.body.data.map((x: { trunk_id: string }) => x.trunk_id),
      [a.trunk_id],
    );

    const foreign = await createTrunk({}, other.apiKey);
    const before = await trunkRow(foreign.trunk_id);
    for (const [method, body] of [
      ['get', undefined],
      ['patch', { name: 'mine now' }],
      ['delete', undefined],
    ] as const) {
      const res = await api(method, `/api/v1/sip-trunks/${foreign.trunk_id}`, body);
      assert.equal(res.status, 403, res.text);
      assert.equal(res.body.error.code, 'forbidden');
      const none = await api(method, '/api/v1/sip-trunks/trk_01JD5Z7Q8Y1C2B3A4N5M6K7P9A', body);
      assert.equal(none.status, 404);
      assert.equal(none.body.error.code, 'sip_trunk_not_found');
    }
    assert.deepEqual(await trunkRow(foreign.trunk_id), before);
    const theirs = await api('get', '/api/v1/sip-trunks', undefined, other.apiKey);
    assert.ok(!theirs.body.data.some((x: { trunk_id: string }) => x.trunk_id === a.trunk_id));
  });

  it('updates by merging: a password alone rotates it, the username stays; null removes a side', async () => {
    const trunk = await createTrunk({
      inbound: { allowed_sources: ['203.0.113.0/24'], auth: { username: 'u1', password: IN_PASSWORD }, numbers: [freshNumber()] },
      outbound: { host: 'sip.carrier.example:5080', auth: { username: 'o1', password: OUT_PASSWORD } },
    });
    const rotated = await api('patch', `/api/v1/sip-trunks/${trunk.trunk_id}`, { inbound: { auth: { password: ROTATED } }, outbound: { transport: 'tcp' } });
    assert.equal(rotated.status, 200, rotated.text);
    assert.deepEqual(rotated.body.inbound, { ...trunk.inbound, auth: { username: 'u1', password_set: true } });
    assert.deepEqual(rotated.body.outbound, { ...trunk.outbound, transport: 'tcp' });
    const row = await trunkRow(trunk.trunk_id);
    assert.equal(t.service.secrets.open(row.inbound_password, `sip-trunks/${trunk.trunk_id}/inbound/password`), ROTATED);
    assert.equal((await t.service.sipTrunks.outboundTermination(tn.workspaceId, trunk.trunk_id))?.credentials?.password, OUT_PASSWORD);

    const noAuth = await api('patch', `/api/v1/sip-trunks/${trunk.trunk_id}`, { name: 'Renamed', inbound: { auth: null }, outbound: null });
    assert.equal(noAuth.status, 200, noAuth.text);
    assert.equal(noAuth.body.name, 'Renamed');
    assert.equal(noAuth.body.inbound.auth, null);
    assert.equal(noAuth.body.outbound, null);
    const cleared = await trunkRow(trunk.trunk_id);
    assert.equal(cleared.inbound_password, null);
    assert.equal(cleared.outbound_password, null);
  });
});

describe('sip trunks: refusals store nothing', () => {
  const create = (body: Record<string, unknown>) => ({ name: 'Bad', ...body });

  it('refuses bad sources with invalid_cidr naming the entry', async () => {
    await unchanged(tn.apiKey, async () => {
      const res = await refused(
        422,
        'invalid_cidr',
        'inbound.allowed_sources[1]',
        'post',
        '/api/v1/sip-trunks',
        create({ inbound: { allowed_sources: ['198.51.100.7', '203.0.113.7/24'] } }),
      );
      assert.match(res.body.error.message, /did you mean 203\.0\.113\.0\/24/);
      for (const bad of ['10.0.0.0/33', 'example.com', '127.1', '10.0.0.1/', '2001:db8::/129', 'fe80::1%eth0', '1.2.3.4/08x'])
        await refused(422, 'invalid_cidr', 'inbound.allowed_sources[0]', 'post', '/api/v1/sip-trunks', create({ inbound: { allowed_sources: [bad] } }));
    });
  });

  it('refuses numbers that are not E.164 or not a line number, naming the entry', async () => {
    await unchanged(tn.apiKey, async () => {
      const res = await api('post', '/api/v1/sip-trunks', create({ inbound: { allowed_sources: ['203.0.113.0/24'], numbers: ['14155550140'] } }));
      assert.equal(res.status, 422, res.text);
      await refused(
        422,
        'invalid_phone_number',
        'inbound.numbers[1]',
        'post',
        '/api/v1/sip-trunks',
        create({ inbound: { allowed_sources: ['203.0.113.0/24'], numbers: [freshNumber(), '+99912345678'] } }),
      );
      await refused(
        422,
        'caller_id_not_allowed',
        'inbound.numbers[0]',
        'post',
        '/api/v1/sip-trunks',
        create({ inbound: { allowed_sources: ['203.0.113.0/24'], numbers: ['+19005550123'] } }),
      );
      await refused(
        422,
        'invalid_phone_number',
        'outbound.caller_id_numbers[0]',
        'post',
        '/api/v1/sip-trunks',
        create({ outbound: { host: 'sip.carrier.example', caller_id_numbers: ['+1234'] } }),
      );
    });
  });

  it('refuses an unprotected inbound side, incomplete credentials, a bad or internal host, and no host', async () => {
    await unchanged(tn.apiKey, async () => {
      await refused(422, 'sip_inbound_unprotected', 'inbound', 'post', '/api/v1/sip-trunks', create({ inbound: { numbers: [freshNumber()] } }));
      await refused(422, 'sip_inbound_unprotected', 'inbound', 'post', '/api/v1/sip-trunks', create({ inbound: { allowed_sources: [], auth: null } }));
      await refused(
        422,
        'sip_credentials_incomplete',
        'inbound.auth.password',
        'post',
        '/api/v1/sip-trunks',
        create({ inbound: { auth: { username: 'only' } } }),
      );
      await refused(
        422,
        'sip_credentials_incomplete',
        'outbound.auth.username',
        'post',
        '/api/v1/sip-trunks',
        create({ outbound: { host: 'sip.carrier.example', auth: { password: OUT_PASSWORD } } }),
      );
      await refused(422, 'sip_outbound_incomplete', 'outbound.host', 'post', '/api/v1/sip-trunks', create({ outbound: { transport: 'tls' } }));
      for (const host of ['sip.carrier.example:70000', '300.1.1.1', '[203.0.113.1]:5060', 'sip..carrier.example', 'sip.carrier.example:0'])
        await refused(422, 'invalid_sip_host', 'outbound.host', 'post', '/api/v1/sip-trunks', create({ outbound: { host } }));
      await refused(422, 'invalid_value', 'outbound.host', 'post', '/api/v1/sip-trunks', create({ outbound: { host: 'bad_name.example' } }));
      for (const host of ['10.1.2.3', '169.254.169.254:5060', '[fd00::1]'])
        await refused(422, 'url_not_allowed', 'outbound.host', 'post', '/api/v1/sip-trunks', create({ outbound: { host } }));
      // Bounds from the contract, before any rule of the service.
      await refused(
        422,
        'invalid_value',
        null,
        'post',
        '/api/v1/sip-trunks',
        create({ inbound: { allowed_sources: Array.from({ length: 51 }, (_, i) => `198.51.100.${i}`) } }),
      );
      const tooLong = await api('post', '/api/v1/sip-trunks', create({ name: 'x'.repeat(201) }));
      assert.equal(tooLong.status, 422);
    });
  });

  it('a refused update leaves the trunk as it was', async () => {
    const trunk = await createTrunk({ outbound: { host: 'sip.carrier.example' } });
    await unchanged(tn.apiKey, async () => {
      await refused(422, 'invalid_cidr', 'inbound.allowed_sources[0]', 'patch', `/api/v1/sip-trunks/${trunk.trunk_id}`, {
        name: 'changed',
        inbound: { allowed_sources: ['nope'] },
      });
      await refused(422, 'sip_inbound_unprotected', 'inbound', 'patch', `/api/v1/sip-trunks/${trunk.trunk_id}`, {
        name: 'changed',
        inbound: { allowed_sources: [] },
      });
      await refused(422, 'sip_credentials_incomplete', 'outbound.auth.password', 'patch', `/api/v1/sip-trunks/${trunk.trunk_id}`, {
        outbound: { auth: { username: 'u' } },
      });
      await refused(422, 'unknown_field', null, 'patch', `/api/v1/sip-trunks/${trunk.trunk_id}`, { inbound: { password: 'x' } });
    });
  });

  it('a number belongs to one trunk across workspaces: 409 sip_number_taken, not saying whose', async () => {
    const number = freshNumber();
    const theirs = await createTrunk({ inbound: { allowed_sources: ['198.51.100.0/24'], numbers: [number] } }, other.apiKey);
    await unchanged(tn.apiKey, async () => {
      const res = await refused(
        409,
        'sip_number_taken',
        'inbound.numbers[1]',
        'post',
        '/api/v1/sip-trunks',
        create({ inbound: { allowed_sources: ['203.0.113.0/24'], numbers: [freshNumber(), number] } }),
      );
      assert.ok(!res.text.includes(other.workspaceId) && !res.text.includes(theirs.trunk_id));
      const mine = await createTrunk();
      await refused(409, 'sip_number_taken', 'inbound.numbers[0]', 'patch', `/api/v1/sip-trunks/${mine.trunk_id}`, { inbound: { numbers: [number] } });
      await api('delete', `/api/v1/sip-trunks/${mine.trunk_id}`);
    });
    const still = await api('get', `/api/v1/sip-trunks/${theirs.trunk_id}`, undefined, other.apiKey);
    assert.deepEqual(still.body.inbound.numbers, [number]);
    // Once the owner lets it go, another workspace may take it.
    assert.equal((await api('patch', `/api/v1/sip-trunks/${theirs.trunk_id}`, { inbound: { numbers: [] } }, other.apiKey)).status, 200);
    const taken = await createTrunk({ inbound: { allowed_sources: ['203.0.113.0/24'], numbers: [number] } });
    assert.deepEqual(taken.inbound.numbers, [number]);
  });

  it('two workspaces claiming one number at once: one gets it, the other 409, never a 500', async () => {
    for (let round = 0; round < 5; round++) {
      const number = freshNumber();
      const body = (source: string) => ({ name: 'Race', inbound: { allowed_sources: [source], numbers: [number] } });
      const answers = await Promise.all([
        api('post', '/api/v1/sip-trunks', body('203.0.113.0/24'), tn.apiKey),
        api('post', '/api/v1/sip-trunks', body('198.51.100.0/24'), other.apiKey),
      ]);
      assert.deepEqual(answers.map((r) => r.status).sort(), [201, 409], answers.map((r) => r.text).join(' | '));
      assert.equal(answers.find((r) => r.status === 409)?.body.error.code, 'sip_number_taken');
      const owners = await t.service.db.knex('sip_trunk_numbers').where({ number });
      assert.equal(owners.length, 1);
      const winner = answers.find((r) => r.status === 201)!;
      await api('delete', `/api/v1/sip-trunks/${winner.body.trunk_id}`, undefined, winner === answers[0] ? tn.apiKey : other.apiKey);
    }
  });

  it('holds the workspace limits: 20 trunks, 2,000 numbers in all', async () => {
    const ws = await tenant(t, 'Limits');
    const batch = (n: number) => Array.from({ length: n }, freshNumber);
    for (let i = 0; i < 4; i++) await createTrunk({ inbound: { allowed_sources: ['203.0.113.0/24'], numbers: batch(500) } }, ws.apiKey);
    await unchanged(ws.apiKey, async () => {
      await refused(
        422,
        'sip_number_limit_reached',
        'inbound.numbers',
        'post',
        '/api/v1/sip-trunks',
        create({ inbound: { allowed_sources: ['203.0.113.0/24'], numbers: batch(1) } }),
        ws.apiKey,
      );
    });
    for (let i = 4; i < 20; i++) await createTrunk({ inbound: { allowed_sources: ['203.0.113.0/24'] } }, ws.apiKey);
    await unchanged(ws.apiKey, async () => {
      await refused(
        422,
        'sip_trunk_limit_reached',
        null,
        'post',
        '/api/v1/sip-trunks',
        create({ inbound: { allowed_sources: ['203.0.113.0/24'] } }),
        ws.apiKey,
      );
    });
    assert.equal(await trunkCount(ws.workspaceId), 20);
  });
});

describe('sip trunks: agents answer a trunk number', () => {
  it('binds an agent; refuses another workspace trunk, an unknown trunk, a number not on the trunk, a number taken', async () => {
    const [n1, n2] = [freshNumber(), freshNumber()];
    const trunk = await createTrunk({ inbound: { allowed_sources: ['203.0.113.0/24'], numbers: [n1, n2] } });
    const foreign = await createTrunk({}, other.apiKey);
    const created = await api('post', '/api/v1/agents', { name: 'Front desk', sip_config: { trunk_id: trunk.trunk_id, phone_number: n1 } });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(created.body.telephony.sip, { trunk_id: trunk.trunk_id, phone_number: n1 });
    const agentId = created.body.agent_id;

    const second = await api('post', '/api/v1/agents', { name: 'Second' });
    const path = `/api/v1/agents/${second.body.agent_id}`;
    const agentBefore = await api('get', path);
    await refused(409, 'phone_number_in_use', 'sip_config.phone_number', 'patch', path, { sip_config: { trunk_id: trunk.trunk_id, phone_number: n1 } });
    await refused(422, 'sip_number_not_on_trunk', 'sip_config.phone_number', 'patch', path, {
      sip_config: { trunk_id: trunk.trunk_id, phone_number: freshNumber() },
    });
    const theirs = await api('patch', path, { sip_config: { trunk_id: foreign.trunk_id, phone_number: foreign.inbound.numbers[0] } });
    assert.equal(theirs.status, 403, theirs.text);
    await refused(404, 'sip_trunk_not_found', 'sip_config.trunk_id', 'patch', path, {
      sip_config: { trunk_id: 'trk_01JD5Z7Q8Y1C2B3A4N5M6K7P9A', phone_number: n2 },
    });
    await refused(404, 'sip_trunk_not_found', 'sip_config.trunk_id', 'post', '/api/v1/agents', {
      name: 'Nobody',
      sip_config: { trunk_id: 'trk_01JD5Z7Q8Y1C2B3A4N5M6K7P9A', phone_number: n2 },
    });
    assert.deepEqual((await api('get', path)).body, agentBefore.body);

    // The bound number cannot leave the trunk, nor the trunk go, while the agent answers it.
    await unchanged(tn.apiKey, async () => {
      await refused(409, 'sip_number_in_use', 'inbound.numbers', 'patch', `/api/v1/sip-trunks/${trunk.trunk_id}`, { inbound: { numbers: [n2] } });
      await refused(409, 'sip_number_in_use', 'inbound.numbers', 'patch', `/api/v1/sip-trunks/${trunk.trunk_id}`, { inbound: null });
      const del = await api('delete', `/api/v1/sip-trunks/${trunk.trunk_id}`);
      assert.equal(del.status, 409, del.text);
      assert.equal(del.body.error.code, 'sip_trunk_in_use');
    });
    // Other numbers may go; unbinding frees the trunk.
    assert.equal((await api('patch', `/api/v1/sip-trunks/${trunk.trunk_id}`, { inbound: { numbers: [n1] } })).status, 200);
    const unbound = await api('patch', `/api/v1/agents/${agentId}`, { sip_config: null });
    assert.equal(unbound.status, 200, unbound.text);
    assert.equal(unbound.body.telephony.sip, null);
    const del = await api('delete', `/api/v1/sip-trunks/${trunk.trunk_id}`);
    assert.deepEqual(del.body, { status: 'deleted', trunk_id: trunk.trunk_id });
    assert.equal((await api('get', `/api/v1/sip-trunks/${trunk.trunk_id}`)).status, 404);
  });

  it('deleting a workspace removes its bound agents and trunks together', async () => {
    const ws = await tenant(t, 'Going away');
    const trunk = await createTrunk({}, ws.apiKey);
    const agent = await api(
      'post',
      '/api/v1/agents',
      { name: 'A', sip_config: { trunk_id: trunk.trunk_id, phone_number: trunk.inbound.numbers[0] } },
      ws.apiKey,
    );
    assert.equal(agent.status, 201, agent.text);
    await t.service.db.knex('workspaces').where({ id: ws.workspaceId }).delete();
    assert.equal(await trunkRow(trunk.trunk_id), undefined);
    assert.equal(await t.service.db.knex('sip_trunk_numbers').where({ trunk_id: trunk.trunk_id }).first(), undefined);
  });
});

describe('sip trunks: secrets', () => {
  it('a password sealed for one trunk does not open in another', async () => {
    const a = await createTrunk({ outbound: { host: 'sip.carrier.example', auth: { username: 'a', password: OUT_PASSWORD } } });
    const b = await createTrunk({ outbound: { host: 'sip.carrier.example', auth: { username: 'b', password: ROTATED } } });
    const sealed = (await trunkRow(a.trunk_id)).outbound_password;
    await t.service.db.knex('sip_trunks').where({ id: b.trunk_id }).update({ outbound_password: sealed });
    await assert.rejects(t.service.sipTrunks.outboundTermination(tn.workspaceId, b.trunk_id));
    assert.equal((await t.service.sipTrunks.outboundTermination(tn.workspaceId, a.trunk_id))?.credentials?.password, OUT_PASSWORD);
  });

  it('never shows or logs a password', () => {
    for (const secret of [IN_PASSWORD, OUT_PASSWORD, ROTATED]) {
      for (const text of seen) assert.ok(!text.includes(secret), `a response contains a password: ${text.slice(0, 200)}`);
      for (const line of t.logs) assert.ok(!line.includes(secret), `a log line contains a password: ${line.slice(0, 200)}`);
    }
  });
});
