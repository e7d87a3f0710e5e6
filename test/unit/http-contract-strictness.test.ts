/**
 * Response schemas are open in the contract (clients ignore fields they do not know, so the service may
 * add some), while the service's own checks of what it sends stay strict: the response check and the
 * webhook payload check validate against a copy whose object schemas refuse unlisted fields
 * (withClosedObjects), so a stray field, such as a leaked credential, still fails them.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Contract } from '../../src/http/contract.js';
import { asyncapiDocument, asyncapiPayloadValidator, openapiDocument, withClosedObjects } from '../../src/contract/documents.js';
import { realtimeServerMessages } from '../../generated/asyncapi-types.js';

const realtimeServerMessageComponents = Object.values(realtimeServerMessages) as string[];

/** Where, in the schemas reachable from `roots` (following local $refs), an object sets `additionalProperties: false`. */
function closedObjectsIn(doc: Record<string, any>, roots: unknown[]): string[] {
  const seen = new Set<string>();
  const found: string[] = [];
  const resolve = (ref: string) =>
    ref
      .replace(/^#\//, '')
      .split('/')
      .reduce((o: any, k) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
  const walk = (node: unknown, at: string): void => {
    if (Array.isArray(node)) return node.forEach((n) => walk(n, at));
    if (!node || typeof node !== 'object') return;
    const n = node as Record<string, unknown>;
    if (typeof n.$ref === 'string') {
      if (!seen.has(n.$ref)) {
        seen.add(n.$ref);
        walk(resolve(n.$ref), n.$ref);
      }
      return;
    }
    if (n.additionalProperties === false) found.push(at);
    for (const [k, v] of Object.entries(n)) if (k !== 'example' && k !== 'examples') walk(v, at);
  };
  walk(roots, 'root');
  return [...new Set(found)];
}

describe('open response schemas, strict checks', () => {
  it('the served document leaves response schemas open and request schemas closed', () => {
    const doc = openapiDocument() as Record<string, any>;
    const schemas = doc.components.schemas;
    const responses = Object.values(doc.paths as Record<string, any>).flatMap((item) => Object.values(item).map((op: any) => op?.responses));
    assert.deepEqual(closedObjectsIn(doc, responses), [], 'no object reachable from a response refuses unknown fields');
    for (const name of ['AgentCreateRequest', 'VoicemailConfigInput', 'DocumentCreateRequest', 'McpServerCreateStatic', 'BatchCallingWindowInput'])
      assert.equal(schemas[name].additionalProperties, false, name);
  });

  it('the realtime messages the service sends, and the webhook events, leave objects open too', () => {
    const doc = asyncapiDocument() as Record<string, any>;
    const sent = [...realtimeServerMessageComponents, 'callCompleted', 'batchCompleted'].map((m) => doc.components.messages[m]);
    assert.deepEqual(closedObjectsIn(doc, sent), []);
  });

  it('the response check refuses a field the schema does not list, at any depth', () => {
    const contract = Contract.load();
    const validate = contract.validator('#/components/schemas/VoicemailConfig');
    const voicemail = { enabled: true, message: null, detection_timeout_seconds: null, retry_on_voicemail: true };
    assert.equal(validate(voicemail), true);
    assert.equal(validate({ ...voicemail, auth_token: 'secret' }), false);
    const status = contract.validator('#/components/schemas/TelephonyProviderStatus');
    const sample = Object.fromEntries(Object.keys((contract.document as any).components.schemas.TelephonyProviderStatus.properties).map((k) => [k, null]));
    assert.equal(status({ ...sample, auth_token: 'secret' }), false);
  });

  it('a webhook payload with a field the contract does not list is refused', () => {
    const validate = asyncapiPayloadValidator('batchCompleted');
    assert.equal(validate({ event: 'batch.completed', not_in_the_contract: true }), false);
    assert.ok(validate.errors?.some((e) => e.keyword === 'additionalProperties' || e.keyword === 'required'));
  });

  it('withClosedObjects closes only objects that say nothing about other properties', () => {
    const closed = withClosedObjects({
      a: { type: 'object', properties: { x: { type: 'object', properties: { y: {} } } } },
      b: { type: 'object', properties: { x: {} }, additionalProperties: true },
      c: { type: 'object', properties: { x: {} }, oneOf: [{ properties: { y: {} } }] },
      d: { example: { properties: { x: 1 } } },
    }) as Record<string, any>;
    assert.equal(closed.a.additionalProperties, false);
    assert.equal(closed.a.properties.x.additionalProperties, false);
    assert.equal(closed.b.additionalProperties, true);
    assert.equal(closed.c.unevaluatedProperties, false);
    assert.deepEqual(closed.d, { example: { properties: { x: 1 } } });
  });
});
