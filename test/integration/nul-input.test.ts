/**
 * NUL characters (U+0000) cannot be stored by PostgreSQL: anywhere in a request they are refused with
 * 422 naming the field (not a 500 from the insert), before any outbound request, on unauthenticated
 * routes too; in a CSV cell the row is skipped; in a document's text they are dropped.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { startHttpPeer, type HttpPeer } from '../helpers/http-peer.js';
import { createPhoneAgent } from '../helpers/calls.js';

let t: TestService;
let tn: Tenant;
let peer: HttpPeer;
let hits = 0;

before(async () => {
  t = await startTestService();
  tn = await tenant(t);
  peer = await startHttpPeer(async (_req, res) => {
    hits++;
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{}');
  });
});

after(async () => {
  await peer.close();
  await t.close();
});

const NUL = 'a\u0000b';

describe('NUL characters in requests', () => {
  it('are 422 naming the field on every kind of route, and nothing is stored or sent', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const cases: Array<[string, string, Record<string, unknown>, string, Record<string, string>?]> = [
      ['post', '/api/v1/auth/signup', { email: 'nul@example.com', password: `long-enough-${NUL}`, workspace_name: 'x' }, 'password'],
      ['post', '/api/v1/auth/login', { email: 'nul@example.com', password: `long-enough-${NUL}` }, 'password'],
      ['post', '/api/v1/agents', { name: NUL }, 'name', bearer(tn.apiKey)],
      ['patch', `/api/v1/agents/${agentId}`, { variable_placeholders: { [NUL]: 'x' } }, 'variable_placeholders', bearer(tn.apiKey)],
      ['post', '/api/v1/tools', { name: 'nul_tool', description: NUL, url: `${peer.url}/x` }, 'description', bearer(tn.apiKey)],
      ['post', '/api/v1/mcp-servers', { name: NUL, url: `${peer.url}/mcp` }, 'name', bearer(tn.apiKey)],
      [
        'post',
        '/api/v1/batches',
        { agent_id: agentId, name: 'x', recipients: [{ to_number: '+14155550100', variables: { name: NUL } }] },
        'recipients.0.variables.name',
        bearer(tn.apiKey),
      ],
      ['post', '/api/v1/documents/text', { name: 'Doc', text: `x${NUL}` }, 'text', bearer(tn.apiKey)],
    ];
    const before = await counts();
    for (const [method, path, body, param, headers] of cases) {
      const res = await t.http[method as 'post'](path)
        .set(headers ?? {})
        .send(body);
      assert.equal(res.status, 422, `${method} ${path}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.code, 'invalid_value', path);
      assert.equal(res.body.error.param, param, path);
    }
    const query = await t.http.get('/api/v1/calls').query({ agent_id: NUL }).set(bearer(tn.apiKey));
    assert.equal(query.status, 422);
    assert.deepEqual(await counts(), before, 'nothing stored');
    assert.equal(hits, 0, 'no outbound request was made');
  });

  it('a CSV cell with a NUL skips its row, naming the row and column', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const res = await t.http
      .post('/api/v1/batches/csv')
      .set(bearer(tn.apiKey))
      .field('agent_id', agentId)
      .field('name', 'NUL rows')
      .field('scheduled_at', new Date(Date.now() + 3600_000).toISOString())
      .attach('file', Buffer.from(`to_number,name\n+14155550101,Ada\n+14155550102,${NUL}\n`), { filename: 'r.csv', contentType: 'text/csv' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.total, 1);
    assert.deepEqual(
      res.body.skipped.items.map((s: Record<string, unknown>) => [s.row, s.column, s.reason]),
      [[3, 'name', 'invalid_value']],
    );
    await t.http.post(`/api/v1/batches/${res.body.batch_id}/cancel`).set(bearer(tn.apiKey));
  });

  it("a document file's NUL characters are dropped from its text", async () => {
    const res = await t.http
      .post('/api/v1/documents')
      .set(bearer(tn.apiKey))
      .attach('file', Buffer.from(`Opening${NUL} hours`), { filename: 'n.txt', contentType: 'text/plain' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const chunk = await t.service.db.knex('knowledge_chunks').where({ document_id: res.body.doc_id }).first('text');
    assert.equal(chunk.text, 'Openingab hours');
  });
});

async function counts(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const table of ['users', 'agents', 'tools', 'mcp_servers', 'batches', 'documents']) {
    const [{ count }] = await t.service.db.knex(table).count<{ count: string }[]>('* as count');
    out[table] = Number(count);
  }
  return out;
}
