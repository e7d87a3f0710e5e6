/**
 * Idempotency-Key (src/http/idempotency.ts), exercised on connectMcpServer against a real MCP server:
 * replay, key reuse with another body, a request in flight, failures that release the key, expiry;
 * and a request in flight on each of the other operations that take a key (held on its workspace lock).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type http from 'node:http';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { startMcpPeer, startPlainPeer, type McpPeer } from '../helpers/mcp-peers.js';
import { Contract } from '../../src/http/contract.js';
import { createPhoneAgent, sandboxNumber } from '../helpers/calls.js';
import { waitFor } from '../helpers/realtime.js';

/** The service's clock: real time moved by `offset`, or held at `frozen` while a test steps it. */
const clock = { offset: 0, frozen: undefined as number | undefined, now: () => new Date(clock.frozen ?? Date.now() + clock.offset) };
const DAY = 24 * 60 * 60 * 1000;

let t: TestService;
let peer: McpPeer;
before(async () => {
  t = await startTestService({ MCP_CONNECT_TIMEOUT_MS: '3000' }, { clock });
  peer = await startMcpPeer();
});
after(async () => {
  await peer.close();
  await t.close();
});

const auth = (tn: Tenant) => ({ Authorization: `Bearer ${tn.apiKey}` });
const connect = (tn: Tenant, key: string | null, body: Record<string, unknown>) => {
  const req = t.http.post('/api/v1/mcp-servers').set(auth(tn));
  if (key) req.set('Idempotency-Key', key);
  return req.send(body);
};
const servers = async (tn: Tenant) => t.service.db.knex('mcp_servers').where({ workspace_id: tn.workspaceId }).orderBy('id');
const initializes = () => peer.requests.filter((r) => r.method === 'POST' && r.path === '/mcp').length;

describe('Idempotency-Key', () => {
  it('replays the first response for the same key and body (key order does not matter), running the operation once', async () => {
    const tn = await tenant(t);
    const body = { name: 'Orders', url: peer.streamableUrl, transport: 'streamable_http' };
    const before = initializes();
    const first = await connect(tn, 'key-1', body);
    assert.equal(first.status, 201);
    assert.equal(first.headers['idempotent-replayed'], undefined);
    const contacted = initializes() - before;
    assert.ok(contacted > 0);

    const second = await connect(tn, 'key-1', { transport: 'streamable_http', url: peer.streamableUrl, name: 'Orders' });
    assert.equal(second.status, 201);
    assert.equal(second.headers['idempotent-replayed'], 'true');
    assert.deepEqual(second.body, first.body);
    assert.notEqual(second.headers['x-request-id'], first.headers['x-request-id']);
    assert.equal(initializes() - before, contacted, 'the MCP server was not contacted again');
    assert.equal((await servers(tn)).length, 1);

    const other = await connect(tn, 'key-2', body);
    assert.equal(other.status, 201);
    assert.notEqual(other.body.mcp_server_id, first.body.mcp_server_id, 'another key is another request');
    const unkeyed = await connect(tn, null, body);
    assert.notEqual(unkeyed.body.mcp_server_id, first.body.mcp_server_id);
    assert.equal((await servers(tn)).length, 3);
  });

  it('refuses the same key with a different body (422 idempotency_key_reused) and changes nothing', async () => {
    const tn = await tenant(t);
    const first = await connect(tn, 'reused', { name: 'Orders', url: peer.streamableUrl });
    assert.equal(first.status, 201);
    const rowsBefore = await servers(tn);
    const res = await connect(tn, 'reused', { name: 'Orders v2', url: peer.streamableUrl });
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'idempotency_key_reused');
    assert.equal(res.body.error.type, 'idempotency_error');
    assert.deepEqual(await servers(tn), rowsBefore);
  });

  it('scopes keys by workspace', async () => {
    const a = await tenant(t);
    const b = await tenant(t);
    const ra = await connect(a, 'shared-key', { name: 'A', url: peer.streamableUrl });
    const rb = await connect(b, 'shared-key', { name: 'B', url: peer.streamableUrl });
    assert.equal(rb.status, 201);
    assert.equal(rb.headers['idempotent-replayed'], undefined);
    assert.notEqual(rb.body.mcp_server_id, ra.body.mcp_server_id);
    assert.equal(rb.body.name, 'B');
  });

  it('answers 409 while the first request is in flight, then replays its response', async () => {
    let release: () => void = () => undefined;
    const held: http.ServerResponse[] = [];
    const gate = new Promise<void>((r) => (release = r));
    const slow = await startPlainPeer((_req, res) => {
      held.push(res);
      void gate.then(() => res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":"not here"}'));
    });
    try {
      const tn = await tenant(t);
      const body = { name: 'Slow', url: `${slow.url}/mcp` };
      const first = connect(tn, 'in-flight', body).then((r) => r);
      while (held.length === 0) await new Promise((r) => setTimeout(r, 10));
      const second = await connect(tn, 'in-flight', body);
      assert.equal(second.status, 409);
      assert.equal(second.body.error.code, 'idempotency_request_in_progress');
      assert.equal(second.body.error.type, 'idempotency_error');
      release();
      const done = await first;
      assert.equal(done.status, 201);
      assert.equal(done.body.error.code, 'protocol_error');
      const third = await connect(tn, 'in-flight', body);
      assert.equal(third.status, 201);
      assert.equal(third.headers['idempotent-replayed'], 'true');
      assert.deepEqual(third.body, done.body);
      assert.equal((await servers(tn)).length, 1);
    } finally {
      release();
      await slow.close();
    }
  });

  it('stores and replays errors of the operation (4xx), but not request validation failures', async () => {
    const tn = await tenant(t);
    const refused = await connect(tn, 'err-key', { name: 'x', url: peer.streamableUrl, auth_type: 'static' });
    assert.equal(refused.status, 422);
    assert.equal(refused.body.error.code, 'static_auth_required');
    const again = await connect(tn, 'err-key', { name: 'x', url: peer.streamableUrl, auth_type: 'static' });
    assert.equal(again.status, 422);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.deepEqual(again.body, refused.body);

    const invalid = await connect(tn, 'validation-key', { name: 'x', url: peer.streamableUrl, command: 'rm -rf' });
    assert.equal(invalid.status, 422);
    assert.equal(invalid.body.error.code, 'unknown_field');
    const valid = await connect(tn, 'validation-key', { name: 'x', url: peer.streamableUrl });
    assert.equal(valid.status, 201, 'an invalid request does not claim its key');
    assert.equal(valid.headers['idempotent-replayed'], undefined);
  });

  it('does not store a 5xx: the same key can be retried', async () => {
    const tn = await tenant(t);
    const knex = t.service.db.knex;
    await knex.raw(`alter table mcp_servers add constraint test_refuse_explode check (name <> 'explode')`);
    try {
      const failed = await connect(tn, 'retry-key', { name: 'explode', url: peer.streamableUrl });
      assert.equal(failed.status, 500);
      assert.equal(failed.body.error.code, 'internal_error');
      assert.equal(await knex('idempotency_keys').where({ key: 'retry-key' }).first(), undefined, 'the key is released');
    } finally {
      await knex.raw('alter table mcp_servers drop constraint test_refuse_explode');
    }
    const retried = await connect(tn, 'retry-key', { name: 'explode', url: peer.streamableUrl });
    assert.equal(retried.status, 201);
    assert.equal(retried.headers['idempotent-replayed'], undefined);
    assert.equal((await servers(tn)).length, 1);
  });

  it('replays for 24 hours, then the key is free again', async () => {
    const tn = await tenant(t);
    const body = { name: 'Daily', url: peer.streamableUrl };
    // Held still, so that "a second before the day is out" does not depend on how fast the machine is.
    clock.frozen = Date.now();
    try {
      const first = await connect(tn, 'day-key', body);
      assert.equal(first.status, 201);
      clock.frozen += DAY - 1000;
      const within = await connect(tn, 'day-key', body);
      assert.equal(within.headers['idempotent-replayed'], 'true');
      assert.equal(within.body.mcp_server_id, first.body.mcp_server_id);
      clock.frozen += 2000;
      const after = await connect(tn, 'day-key', body);
      assert.equal(after.status, 201);
      assert.equal(after.headers['idempotent-replayed'], undefined);
      assert.notEqual(after.body.mcp_server_id, first.body.mcp_server_id);
      assert.equal((await servers(tn)).length, 2);
    } finally {
      clock.frozen = undefined;
    }
  });

  it('lets a request take over a key whose first request never finished (an instance died) after the lock timeout', async () => {
    const tn = await tenant(t);
    const now = clock.now().getTime();
    const claim = (key: string, lockedAgoMs: number) =>
      t.service.db.knex('idempotency_keys').insert({
        scope: tn.workspaceId,
        operation_id: 'connectMcpServer',
        key,
        request_hash: 'a'.repeat(64),
        state: 'in_progress',
        locked_at: new Date(now - lockedAgoMs),
        expires_at: new Date(now + DAY),
      });
    await claim('stuck-recent', 60_000);
    await claim('stuck-old', 5 * 60 * 1000 + 1000);
    const body = { name: 'Orphan', url: peer.streamableUrl };
    const recent = await connect(tn, 'stuck-recent', body);
    assert.equal(recent.status, 422, 'a different request under a live claim');
    assert.equal(recent.body.error.code, 'idempotency_key_reused');
    const old = await connect(tn, 'stuck-old', body);
    assert.equal(old.status, 201);
    assert.equal(old.headers['idempotent-replayed'], undefined);
    const row = await t.service.db.knex('idempotency_keys').where({ scope: tn.workspaceId, key: 'stuck-old' }).first();
    assert.equal(row.state, 'completed');
    assert.equal(row.response_body.mcp_server_id, old.body.mcp_server_id);
  });

  it("createCall, createBatch and createBatchFromCsv answer 409 while the first request waits on the workspace's lock; the call or batch is made once", async () => {
    const tn = await tenant(t);
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const later = new Date(clock.now().getTime() + 3_600_000).toISOString();
    const toNumber = sandboxNumber();
    const csv = Buffer.from('to_number\n+14155550002\n');
    const cases: Array<{
      operationId: string;
      table: string;
      lock: string;
      send: (key: string) => ReturnType<typeof t.http.post>;
      end?: (made: Record<string, string>) => Promise<void>;
    }> = [
      {
        operationId: 'createCall',
        table: 'calls',
        // Admission takes the workspace's slot lock (src/workspaces/admission-store.ts).
        lock: `session-lease:${tn.workspaceId}`,
        send: (key: string) => t.http.post('/api/v1/calls').set(auth(tn)).set('Idempotency-Key', key).send({ agent_id: agentId, to_number: toNumber }),
        // The call dials once the lock is free: it is hung up, not left ringing through the other cases.
        end: async (made: Record<string, string>) => assert.equal((await t.http.post(`/api/v1/calls/${made.call_id}/hangup`).set(auth(tn))).status, 200),
      },
      {
        operationId: 'createBatch',
        table: 'batches',
        lock: `batch_create:${tn.workspaceId}`,
        send: (key: string) =>
          t.http
            .post('/api/v1/batches')
            .set(auth(tn))
            .set('Idempotency-Key', key)
            .send({ agent_id: agentId, name: 'Held', scheduled_at: later, recipients: [{ to_number: '+14155550002' }] }),
      },
      {
        operationId: 'createBatchFromCsv',
        table: 'batches',
        lock: `batch_create:${tn.workspaceId}`,
        send: (key: string) =>
          t.http
            .post('/api/v1/batches/csv')
            .set(auth(tn))
            .set('Idempotency-Key', key)
            .field('agent_id', agentId)
            .field('name', 'Held CSV')
            .field('scheduled_at', later)
            .attach('file', csv, { filename: 'numbers.csv', contentType: 'text/csv' }),
      },
    ];
    const knex = t.service.db.knex;
    for (const c of cases) {
      const key = `held-${c.operationId}`;
      const rows = () => knex(c.table).where({ workspace_id: tn.workspaceId }).count<{ count: string }[]>('* as count');
      const [{ count: before }] = await rows();
      const trx = await knex.transaction();
      let first;
      try {
        await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [c.lock]);
        first = c.send(key).then((r) => r);
        await waitFor(
          async () => Boolean(await knex('idempotency_keys').where({ scope: tn.workspaceId, key, state: 'in_progress' }).first()),
          5000,
          `${c.operationId} to claim its key`,
        );
        const second = await c.send(key);
        assert.equal(second.status, 409, `${c.operationId}: ${second.text}`);
        assert.equal(second.body.error.code, 'idempotency_request_in_progress');
      } finally {
        await trx.commit();
      }
      const done = await first;
      assert.equal(done.status, 201, `${c.operationId}: ${done.text}`);
      const third = await c.send(key);
      assert.equal(third.status, 201, third.text);
      assert.equal(third.headers['idempotent-replayed'], 'true');
      assert.deepEqual(third.body, done.body);
      const [{ count: after }] = await rows();
      assert.equal(Number(after) - Number(before), 1, `${c.operationId} made one`);
      await c.end?.(done.body);
    }
  });

  it('applies to every operation that declares the header, and each declares Idempotent-Replayed on its 2xx responses', () => {
    const contract = Contract.load();
    const idempotent = [...contract.operations.values()]
      .filter((o) => o.idempotent)
      .map((o) => o.operationId)
      .sort();
    assert.deepEqual(idempotent, ['connectMcpServer', 'createBatch', 'createBatchFromCsv', 'createCall', 'createTestRun', 'importDoNotCallCsv']);
    for (const operationId of idempotent) {
      const info = contract.operations.get(operationId)!;
      for (const status of info.statuses.filter((s) => s.startsWith('2'))) {
        const declared = contract.response(operationId, Number(status))!;
        assert.ok(declared.headers['Idempotent-Replayed'], `${operationId} ${status} declares Idempotent-Replayed`);
      }
    }
  });
});
