/**
 * The conformance command (packages/conformance) against the real service: it passes, read-only and
 * with --allow-writes, and writes TAP, JUnit and JSON with one test case per operation and check;
 * --operations and --skip-operations choose the operations; put behind a proxy that breaks the
 * contract (an undeclared status, another workspace's data served, a 5xx on a bad body) it fails,
 * naming the operation and what broke.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { main } from '../../packages/conformance/src/cli.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/webhooks.js';

let t: TestService;
before(async () => {
  t = await startTestService({ VOICE_SANDBOX_SPEED: '20', VOICE_SANDBOX_MS_PER_CHAR: '0', WEBHOOK_POLL_INTERVAL_MS: '100' });
});
after(async () => {
  await t.close();
});

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(
    args,
    (s) => (out += s),
    (s) => (err += s),
  );
  return { code, out, err };
}

/** A proxy in front of the service; `rewrite` may answer a request itself. */
async function proxy(
  rewrite: (
    req: http.IncomingMessage,
    body: Buffer,
    upstream: () => Promise<{ status: number; headers: Record<string, string>; body: Buffer }>,
  ) => Promise<{ status: number; headers: Record<string, string>; body: Buffer }>,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      const upstream = async () => {
        const r = await fetch(`${t.url}${req.url}`, {
          method: req.method,
          headers: Object.fromEntries(
            Object.entries(req.headers)
              .filter(([k]) => !['host', 'connection', 'content-length'].includes(k))
              .map(([k, v]) => [k, String(v)]),
          ),
          body: ['GET', 'HEAD'].includes(req.method!) ? undefined : body,
          redirect: 'manual',
        });
        const headers: Record<string, string> = {};
        r.headers.forEach((v, k) => {
          if (!['content-length', 'content-encoding', 'transfer-encoding', 'connection'].includes(k)) headers[k] = v;
        });
        return { status: r.status, headers, body: Buffer.from(await r.arrayBuffer()) };
      };
      const answer = await rewrite(req, body, upstream);
      res.writeHead(answer.status, answer.headers).end(answer.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))),
  };
}

describe('voice-agent-conformance', () => {
  it('passes against the service with --allow-writes, and writes JUnit and JSON with a case per operation and check', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'conformance-'));
    const junitFile = path.join(dir, 'conformance.xml');
    const jsonFile = path.join(dir, 'conformance.json');
    const contract = path.resolve(import.meta.dirname, '../../generated/openapi.json');
    const r = await run(['--base-url', t.url, '--allow-writes', '--contract', contract, '--junit', junitFile, '--json', jsonFile]);
    assert.equal(r.code, 0, r.out + r.err);
    assert.match(r.out, /All \d+ test cases passed\./);
    assert.doesNotMatch(r.out, /^SKIP/m, 'every check ran');
    const xml = fs.readFileSync(junitFile, 'utf8');
    assert.match(xml, /<testsuite name="voice-agent-conformance" tests="\d+" failures="0" skipped="0"/);
    for (const name of [
      'createAgent: response matches contract',
      'createAgent: writes as declared',
      'createAgent: refuses bad bodies with a declared 4xx',
      'listAgents: reads its own workspace',
      'getAgent: keeps other workspaces&apos; resources out',
      'listAgents: answers 401 without valid credentials',
      'createApiKey: refuses an API key',
      'createAgent: declared as in the reference contract',
    ])
      assert.ok(xml.includes(`name="${name}"`), `JUnit has the case ${name}`);
    assert.match(xml, /<testcase classname="voice-agent-conformance\.createAgent" name="createAgent: response matches contract">/);
    const report = JSON.parse(fs.readFileSync(jsonFile, 'utf8'));
    assert.equal(report.failed, 0);
    assert.equal(report.cases.length, report.cases.length && (xml.match(/<testcase /g) ?? []).length, 'the same cases in JSON and JUnit');
    const operationsChecked = new Set(report.cases.map((c: { operation: string | null }) => c.operation).filter(Boolean));
    const documented = Object.values(JSON.parse(fs.readFileSync(contract, 'utf8')).paths).flatMap((item) =>
      Object.values(item as Record<string, { operationId?: string }>).filter((o) => o?.operationId),
    );
    assert.equal(operationsChecked.size, documented.length, 'every operation of the contract has cases');
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('checks only the operations asked for, and refuses names the contract does not have', async () => {
    const a = await tenant(t);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'conformance-'));
    const jsonFile = path.join(dir, 'only.json');
    const only = await run([
      '--base-url',
      t.url,
      '--api-key',
      a.apiKey,
      '--operations',
      'listAgents,getAgent',
      '--operations',
      'listTools',
      '--json',
      jsonFile,
      '--tap',
    ]);
    assert.equal(only.code, 0, only.out + only.err);
    const report = JSON.parse(fs.readFileSync(jsonFile, 'utf8'));
    const ops = new Set(report.cases.map((c: { operation: string | null }) => c.operation).filter(Boolean));
    assert.deepEqual([...ops].sort(), ['getAgent', 'listAgents', 'listTools']);
    assert.match(only.out, /^ok \d+ - listAgents: response matches contract$/m);
    assert.equal((only.out.match(/^(not )?ok /gm) ?? []).length, report.cases.length, 'TAP has the same cases');

    const skipping = await run(['--base-url', t.url, '--api-key', a.apiKey, '--skip-operations', 'listTools', '--json', jsonFile]);
    assert.equal(skipping.code, 0, skipping.out);
    assert.ok(!JSON.parse(fs.readFileSync(jsonFile, 'utf8')).cases.some((c: { operation: string | null }) => c.operation === 'listTools'));

    const unknown = await run(['--base-url', t.url, '--operations', 'createAgent,noSuchOperation']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.err, /no operation noSuchOperation/);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('read-only with two keys: reads and isolation, and nothing is written', async () => {
    const a = await tenant(t);
    const b = await tenant(t);
    await t.http.post('/api/v1/agents').set(bearer(b.apiKey)).send({ name: 'B agent' });
    const count = async () => Number((await t.service.db.knex('agents').count())[0].count);
    const before = await count();
    const r = await run(['--base-url', t.url, '--api-key', a.apiKey, '--api-key', b.apiKey, '--tap']);
    assert.equal(r.code, 0, r.out + r.err);
    assert.match(r.out, /^ok \d+ - getAgent: keeps other workspaces' resources out$/m);
    assert.match(r.out, /^ok \d+ - listAgents: keeps other workspaces' resources out$/m);
    assert.match(r.out, /^ok \d+ - writes # SKIP/m);
    assert.equal(await count(), before);
  });

  it('exits 2 on usage errors and an unreachable deployment', async () => {
    assert.equal((await run([])).code, 2);
    assert.equal((await run(['--base-url', 'ftp://x'])).code, 2);
    assert.equal((await run(['--base-url', t.url, '--bogus'])).code, 2);
    assert.equal((await run(['--base-url', 'http://127.0.0.1:9'])).code, 2);
  });

  it('fails on an undeclared status, naming the operation', async () => {
    const p = await proxy(async (req, _body, upstream) =>
      req.method === 'GET' && req.url?.startsWith('/api/v1/tools')
        ? { status: 418, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"error":{}}') }
        : upstream(),
    );
    try {
      const a = await tenant(t);
      const r = await run(['--base-url', p.url, '--api-key', a.apiKey]);
      assert.equal(r.code, 1, r.out);
      assert.match(r.out, /^ {2}FAIL {2}listTools: response matches contract$/m);
      assert.match(r.out, /^ {2}FAIL {2}listTools: reads its own workspace$/m);
      assert.doesNotMatch(r.out, /FAIL {2}listAgents/, 'only the broken operation fails');
      assert.match(r.out, /GET \/api\/v1\/tools \(listTools\) answered 418: status 418 is not declared/);
      // Skipping the broken operations (every tool read), the rest conforms.
      const skipping = await run(['--base-url', p.url, '--api-key', a.apiKey, '--skip-operations', 'listTools,getTool']);
      assert.equal(skipping.code, 0, skipping.out);
    } finally {
      await p.close();
    }
  });

  it("fails when another workspace's resource is served", async () => {
    const a = await tenant(t);
    const b = await tenant(t);
    const agentB = (await t.http.post('/api/v1/agents').set(bearer(b.apiKey)).send({ name: 'Secret agent of B' })).body;
    // The broken build answers any agent read with B's key, whoever asks.
    const p = await proxy(async (req, body, upstream) => {
      if (req.method === 'GET' && req.url === `/api/v1/agents/${agentB.agent_id}`) {
        const r = await fetch(`${t.url}${req.url}`, { headers: bearer(b.apiKey) });
        return {
          status: r.status,
          headers: { 'content-type': 'application/json', 'x-request-id': r.headers.get('x-request-id') ?? 'req_x' },
          body: Buffer.from(await r.arrayBuffer()),
        };
      }
      void body;
      return upstream();
    });
    try {
      const r = await run(['--base-url', p.url, '--api-key', a.apiKey, '--api-key', b.apiKey]);
      assert.equal(r.code, 1, r.out);
      assert.match(r.out, /^ {2}FAIL {2}getAgent: keeps other workspaces' resources out$/m);
      assert.match(r.out, /getAgent served another workspace's resource/);
    } finally {
      await p.close();
    }
  });

  it('fails on a 5xx for a malformed body', async () => {
    const p = await proxy(async (req, body, upstream) =>
      req.method === 'POST' && req.url === '/api/v1/agents' && body.toString() === '{"'
        ? {
            status: 500,
            headers: { 'content-type': 'application/json' },
            body: Buffer.from('{"error":{"type":"api_error","code":"internal_error","message":"boom","param":null,"request_id":"req_x"}}'),
          }
        : upstream(),
    );
    try {
      const r = await run(['--base-url', p.url, '--allow-writes']);
      assert.equal(r.code, 1, r.out);
      assert.match(r.out, /^ {2}FAIL {2}createAgent: refuses bad bodies with a declared 4xx$/m);
      assert.match(r.out, /^ {2}FAIL {2}createAgent: response matches contract$/m);
      assert.match(r.out, /createAgent answered 500 to unparsable JSON/);
    } finally {
      await p.close();
    }
  });
});
