/**
 * Every request example of the contract, sent as written, gets its operation's success status (issue
 * 32: the createAgent example was refused by the service itself). The examples run in document order
 * (those that create first) against one workspace; the ids they name (`agt_...`, `doc_...`) are swapped for the ones the earlier
 * examples created, as a reader following the examples would. Where an example cannot succeed on its
 * own, `EXPECTED` gives the declared status it gets and why.
 */
import { after, before, describe, it } from 'node:test';
import dns from 'node:dns';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { operationRequest } from '../helpers/operations.js';
import { operations } from '../../generated/operations.js';
import { Contract } from '../../src/http/contract.js';
import { internalOpenapiDocument } from '../../src/contract/documents.js';

type Json = Record<string, any>;

/** Examples that cannot succeed as written, with the declared status they get. */
const EXPECTED: Record<string, { status: number; why: string }> = {
  'createSandboxInboundCall:example': { status: 404, why: "the createAgent example's number does not take inbound calls (inbound_enabled is false)" },
  'createTestRun:example': { status: 422, why: 'the deleteAgentTest example has deleted the one test the examples made (no_tests)' },
  ...Object.fromEntries(
    ['providerAVoiceWebhook', 'providerAStatusCallback', 'providerAAmdCallback', 'providerBEvent'].map((id) => [
      `${id}:example`,
      { status: 403, why: "the carrier signs its callbacks; an example carries no signature (each carrier's own test signs them)" },
    ]),
  ),
};

let t: TestService;
let tn: Tenant;
const lookup = dns.promises.lookup;
before(async () => {
  // The examples' hosts (example.com, api.example.com) as this machine's: tests reach no network, and
  // the service resolves every URL it is given (src/net/outbound-guard.ts).
  dns.promises.lookup = ((host: string, options: never) =>
    /(^|\.)example\.com$/.test(host) ? Promise.resolve([{ address: '127.0.0.1', family: 4 }]) : lookup(host, options)) as typeof lookup;
  t = await startTestService();
  tn = await tenant(t);
});
after(async () => {
  dns.promises.lookup = lookup;
  await t.close();
});

const contract = Contract.load();
const document = internalOpenapiDocument() as Json;

/** The request examples of an operation: [name, media type, value]. */
function examplesOf(operationId: string): Array<[string, string, unknown]> {
  const o = operations.find((x) => x.operationId === operationId)!;
  const content = (document.paths[o.path][o.method.toLowerCase()].requestBody?.content ?? {}) as Record<string, Json>;
  return Object.entries(content).flatMap(([type, media]): Array<[string, string, unknown]> =>
    'example' in media
      ? [['example', type, media.example]]
      : Object.entries((media.examples ?? {}) as Record<string, Json>).map(([name, e]) => [name, type, e.value]),
  );
}

/** The path parameter a bare `id` field's id fills, by its prefix where the two differ. */
const FIELD_OF_PREFIX: Record<string, string> = { agt: 'agent', mcp: 'mcp_server', whk: 'webhook', ws: 'workspace', key: 'key' };

/** Every prefixed id in `value` (`agt_` + 26 characters) replaced by the id of that kind created so far. */
function withKnownIds(value: unknown, ids: Map<string, string>): unknown {
  return JSON.parse(JSON.stringify(value).replace(/\b([a-z]+)_[0-9A-Z]{26}\b/g, (id, prefix: string) => ids.get(prefix) ?? id));
}

/** Records every prefixed id of a success body by its prefix and by its field (`agent_id`, or `mcp_server_id` for the `id` of `mcp_...`). */
function learnIds(body: unknown, ids: Map<string, string>): void {
  for (const [, field, id, prefix] of JSON.stringify(body ?? {}).matchAll(/"([a-z_]*id)":"(([a-z]+)_[0-9A-Z]{26})"/g)) {
    ids.set(prefix, id);
    ids.set(field === 'id' ? `${FIELD_OF_PREFIX[prefix] ?? prefix}_id` : field, id);
  }
}

describe('request examples', () => {
  it('every request example of the contract gets its documented status', async () => {
    const ids = new Map<string, string>();
    learnIds({ workspace_id: tn.workspaceId }, ids);
    const wrong: string[] = [];
    let sent = 0;
    // What creates (no id in the path) before what uses an id, so that a later example finds its resource.
    const ordered = [...operations.filter((o) => !o.path.includes('{')), ...operations.filter((o) => o.path.includes('{'))];
    for (const o of ordered) {
      for (const [name, type, example] of examplesOf(o.operationId)) {
        const info = contract.operations.get(o.operationId)!;
        const success = info.statuses.filter((s) => s.startsWith('2')).map(Number);
        const path = o.path.replace(/\{(\w+)\}/g, (_m, p: string) => ids.get(p) ?? `${p}-unknown`);
        const body = withKnownIds(example, ids) as Json;
        let req = operationRequest(t, tn, contract, { ...o, path });
        if (type === 'multipart/form-data') {
          for (const [field, value] of Object.entries(body)) {
            req =
              field === 'file'
                ? req.attach('file', Buffer.from(String(value)), o.operationId === 'createBatchFromCsv' ? 'recipients.csv' : 'example.txt')
                : req.field(field, String(value));
          }
        } else req = req.type(type === 'application/json' ? 'json' : 'form').send(body);
        const res = await req;
        sent += 1;
        const expected = EXPECTED[`${o.operationId}:${name}`];
        const ok = expected ? res.status === expected.status : success.includes(res.status);
        if (!ok) wrong.push(`${o.operationId} (${name}): ${res.status} ${res.text.slice(0, 300)}`);
        if (res.status < 300) learnIds(res.body, ids);
      }
    }
    assert.deepEqual(wrong, []);
    assert.ok(sent >= 29, `only ${sent} examples`);
  });
});
