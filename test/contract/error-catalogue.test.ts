/**
 * One error catalogue: the contract's ErrorCode schema. The code is typed by it (a code it does not
 * list, or a status it does not list for that code, does not compile: src/errors/api-error.ts); this
 * test holds the contract to it: every code an operation's response shows (examples, and codes named
 * in its description) is catalogued with that response's status, the generated catalogue and the docs'
 * Errors page follow the schema, and every status the catalogue gives a code is one some operation
 * declares.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { internalOpenapiDocument, openapiDocument, rootDir } from '../../src/contract/documents.js';
import { errorCatalogue, type ErrorCode } from '../../src/errors/api-error.js';

type Json = Record<string, any>;
const doc = internalOpenapiDocument() as Json;
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];
const catalogue = errorCatalogue as Record<string, { statuses: readonly number[]; meaning: string }>;

const deref = (node: Json): Json => {
  let n = node;
  while (n?.$ref)
    n = n.$ref
      .replace(/^#\//, '')
      .split('/')
      .reduce((o: Json, k: string) => o?.[k], doc);
  return n;
};

/** Every error response of every operation: where, its status, the codes its examples and description show. */
function errorResponses(): Array<{ where: string; status: number; codes: string[] }> {
  const out: Array<{ where: string; status: number; codes: string[] }> = [];
  for (const item of Object.values(doc.paths as Record<string, Json>)) {
    for (const m of METHODS) {
      const op = item[m];
      if (!op) continue;
      for (const [status, raw] of Object.entries(op.responses as Record<string, Json>)) {
        if (!/^[45]\d\d$/.test(status)) continue;
        const res = deref(raw);
        const codes = new Set<string>();
        for (const media of Object.values((res.content ?? {}) as Record<string, Json>)) {
          const examples = [media.example, ...Object.values((media.examples ?? {}) as Record<string, Json>).map((e) => deref(e).value)];
          for (const ex of examples) if (typeof ex?.error?.code === 'string') codes.add(ex.error.code);
        }
        // "(code `agent_not_found`)", "(`subscription_inactive`)": codes named in the description.
        for (const [, name] of String(res.description ?? '').matchAll(/(?:code |\()`([a-z][a-z_0-9]+)`/g)) codes.add(name!);
        out.push({ where: `${op.operationId} ${status}`, status: Number(status), codes: [...codes] });
      }
    }
  }
  return out;
}

describe('the error catalogue', () => {
  it('every code a response shows is catalogued with that status', () => {
    const problems: string[] = [];
    const responses = errorResponses();
    assert.ok(responses.some((r) => r.codes.length > 0));
    for (const r of responses) {
      for (const code of r.codes) {
        const entry = catalogue[code];
        if (!entry) problems.push(`${r.where}: '${code}' is not in the ErrorCode catalogue`);
        else if (!entry.statuses.includes(r.status)) problems.push(`${r.where}: '${code}' is catalogued with ${entry.statuses.join(', ')}, not ${r.status}`);
      }
    }
    assert.deepEqual(problems, []);
  });

  it('every status the catalogue gives a code is one some operation declares', () => {
    const declared = new Set(errorResponses().map((r) => r.status));
    // 405 answers a method no operation has on an existing path, so no operation can declare it; 501
    // answers an operation of the contract without a handler, which this version does not have; 408
    // and 431 answer what the HTTP parser refuses before there is a request to route
    // (src/http/client-errors.ts, in the document's conventions).
    const beforeRouting = new Set(['method_not_allowed', 'not_implemented', 'request_timeout', 'headers_too_large']);
    for (const [code, entry] of Object.entries(catalogue)) {
      if (!beforeRouting.has(code)) for (const s of entry.statuses) assert.ok(declared.has(s), `${code}: ${s}`);
    }
  });

  it("the catalogue is the contract's ErrorCode schema, in the public document too, and the Errors page lists every code", () => {
    const schema = (openapiDocument() as Json).components.schemas.ErrorCode as Json;
    assert.deepEqual(
      schema.oneOf.map((e: Json) => [e.const, e['x-statuses'], e.description]),
      Object.entries(catalogue).map(([code, e]) => [code, [...e.statuses], e.meaning]),
    );
    const page = readFileSync(path.join(rootDir, 'docs/errors.md'), 'utf8');
    for (const code of Object.keys(catalogue) as ErrorCode[]) assert.ok(page.includes(`| \`${code}\` | ${catalogue[code]!.statuses.join(', ')} |`), code);
    for (const code of ['invalid_base64', 'forward_failed', 'upstream_unavailable']) assert.ok(page.includes(`\`${code}\``), `in-session ${code}`);
    assert.ok(page.includes('| 4001 |') && page.includes('`invalid_token`'), 'close codes');
  });
});
