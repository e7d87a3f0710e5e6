/**
 * The documents the service serves are the ones client teams generate from: /openapi.json,
 * /internal/openapi.json and /asyncapi.json are the generated bundles (generated/*.json) in content,
 * and the AsyncAPI one passes the official parser with no error (operation messages referring to
 * their channel's). Those very files are what `npm run lint` holds to Redocly's recommended-strict
 * rules and to Spectral with our ruleset, no exception (scripts/lint.ts: CI runs it before the tests),
 * so the served bytes are not linted a second time here. What their texts say of the service's
 * answers is what it answers. /openapi.json holds what API clients may call; /internal/openapi.json
 * holds every operation the service routes, and nothing internal leaks into the public one.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Parser } from '@asyncapi/parser';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant } from '../helpers/fixtures.js';
import { generatedDir } from '../../src/contract/documents.js';
import { INTERNAL_EXTENSIONS, INTERNAL_TAGS } from '../../scripts/public-document.js';
import { operations } from '../../generated/operations.js';

type Json = Record<string, any>;
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

function operationIds(doc: Json): string[] {
  return Object.values(doc.paths as Record<string, Json>).flatMap((item) => METHODS.filter((m) => item[m]).map((m) => item[m].operationId as string));
}

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
    assert.deepEqual(
      errors.map((e) => `${e.code} ${e.path.join('.')}`),
      [],
    );
  });

  it('/openapi.json is the public bundle', async () => {
    const res = await t.http.get('/openapi.json');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, JSON.parse(readFileSync(path.join(generatedDir, 'openapi.json'), 'utf8')));
  });

  it('/internal/openapi.json is the whole bundle, every operation the service routes', async () => {
    const res = await t.http.get('/internal/openapi.json');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, JSON.parse(readFileSync(path.join(generatedDir, 'openapi-internal.json'), 'utf8')));
    assert.deepEqual(operationIds(res.body).sort(), operations.map((o) => o.operationId).sort(), 'every operation the service routes');
  });

  it('the public document holds no operator, carrier, system, browser-file or dashboard route, and no internal extension', async () => {
    const pub = (await t.http.get('/openapi.json')).body as Json;
    const internal = (await t.http.get('/internal/openapi.json')).body as Json;
    const publicIds = new Set(operationIds(pub));
    for (const o of operations) {
      const isInternal = o.tags.some((tag) => INTERNAL_TAGS.has(tag));
      assert.equal(publicIds.has(o.operationId), !isInternal, `${o.operationId} (${o.tags.join(', ')})`);
    }
    for (const prefix of ['/admin/', '/telephony/', '/metrics', '/healthz', '/sdk/', '/dashboard']) {
      assert.deepEqual(
        Object.keys(pub.paths).filter((p) => p.startsWith(prefix)),
        [],
        prefix,
      );
    }
    const text = JSON.stringify(pub);
    for (const ext of INTERNAL_EXTENSIONS) {
      assert.ok(!text.includes(`"${ext}"`), `${ext} leaks into the public document`);
      assert.ok(JSON.stringify(internal).includes(`"${ext}"`), `${ext} is in the internal document`);
    }
    // Components only internal operations use are not in the public document; every public $ref resolves.
    assert.equal(pub.components.schemas.ProviderAVoiceRequest, undefined);
    assert.equal(pub.components.schemas.WorkspaceList, undefined);
    assert.deepEqual(Object.keys(pub.components.securitySchemes).sort(), ['ApiKey', 'DashboardSession'], 'no operator or metrics scheme');
    const refs = [...text.matchAll(/"\$ref":"#\/components\/(\w+)\/([^"]+)"/g)];
    for (const [, kind, name] of refs) assert.ok(pub.components[kind!]?.[name!], `#/components/${kind}/${name}`);
  });

  it("the documents' texts say what the service answers", async () => {
    const pub = (await t.http.get('/openapi.json')).body as Json;
    const asyncapi = (await t.http.get('/asyncapi.json')).body as Json;
    // The codes a text session sends: RealtimeError's table, and the realtime channel's own text.
    const listed = (text: string, lead: RegExp) => {
      const m = lead.exec(text);
      assert.ok(m, `${lead} in the text`);
      return [...m[1].matchAll(/`([a-z_]+)`/g)].map((x) => x[1]).sort();
    };
    const errorCodes = listed(asyncapi.components.messages.realtimeError.payload.description, /Text sessions emit only ((?:`[a-z_]+`(?:, | and )?)+)/);
    const channelCodes = listed(asyncapi.channels.realtime.description, /a text session, whose only error codes are ((?:`[a-z_]+`[,\s]*(?:and\s+)?)+)/);
    assert.deepEqual(channelCodes, errorCodes);
    for (const code of errorCodes) assert.ok(asyncapi.components.messages.realtimeError.payload.properties.code.enum.includes(code), code);
    // What createRealtimeSession says of a body that is not JSON.
    const said = /not JSON: (\d{3})/.exec(pub.paths['/api/v1/realtime/sessions'].post.description);
    assert.ok(said, 'createRealtimeSession says what a non-JSON body gets');
    const tn = await tenant(t);
    const res = await t.http
      .post('/api/v1/realtime/sessions')
      .set('Authorization', `Bearer ${tn.apiKey}`)
      .set('Content-Type', 'application/json')
      .send('{not json');
    assert.equal(res.status, Number(said[1]), JSON.stringify(res.body));
  });

  it('the docs render both documents', async () => {
    for (const [page, marker] of [
      ['/docs', 'Voice Agent Calling Service API'],
      ['/docs/internal', 'Voice Agent Calling Service API (internal)'],
    ] as const) {
      const res = await t.http.get(page);
      assert.equal(res.status, 200, page);
      assert.ok(res.text.includes(marker), page);
    }
    const internalPage = (await t.http.get('/docs/internal')).text;
    assert.ok(internalPage.includes('listWorkspaces') || internalPage.includes('/admin/v1/workspaces'), 'the operator routes are in the internal reference');
  });
});
