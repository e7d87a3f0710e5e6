/**
 * The documents the service serves are the ones client teams generate from: /openapi.json and
 * /asyncapi.json are the generated bundles byte for byte in content, the AsyncAPI one passes the
 * official parser with no error (operation messages referring to their channel's), and the OpenAPI
 * one passes redocly's recommended rules with no error.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Parser } from '@asyncapi/parser';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { startTestService, type TestService } from '../helpers/service.js';
import { generatedDir } from '../../src/contract/documents.js';

let t: TestService;
before(async () => {
  t = await startTestService();
});
after(async () => {
  await t.close();
});

describe('served contract documents', () => {
  it('/asyncapi.json is the bundle and passes the AsyncAPI parser with no error', async () => {
    const res = await t.http.get('/asyncapi.json');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, JSON.parse(readFileSync(path.join(generatedDir, 'asyncapi.json'), 'utf8')));
    const diagnostics = await new Parser().validate(JSON.stringify(res.body));
    const errors = diagnostics.filter((d) => d.severity === 0);
    assert.deepEqual(errors.map((e) => `${e.code} ${e.path.join('.')}`), []);
  });

  it('/openapi.json is the bundle and passes redocly lint with no error', async () => {
    const res = await t.http.get('/openapi.json');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, JSON.parse(readFileSync(path.join(generatedDir, 'openapi.json'), 'utf8')));
    const config = await createConfig({ extends: ['recommended'] });
    const problems = await lintFromString({ source: JSON.stringify(res.body), absoluteRef: `${t.url}/openapi.json`, config });
    const errors = problems.filter((p) => p.severity === 'error');
    assert.deepEqual(errors.map((e) => `${e.ruleId}: ${e.message}`), []);
  });
});
