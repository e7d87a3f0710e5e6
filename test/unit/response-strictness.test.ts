/**
 * Response schemas are open in the contract (clients ignore fields they do not know, so the service may
 * add some), while the service's own checks of what it sends stay strict: the response check and the
 * webhook payload check validate against a copy whose object schemas refuse unlisted fields
 * (withClosedObjects), so a stray field, such as a leaked credential, still fails them.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Contract } from '../../src/http/contract.js';
import { asyncapiPayloadValidator, openapiDocument, withClosedObjects } from '../../src/contract/documents.js';

describe('open response schemas, strict checks', () => {
  it('the served document leaves response schemas open and request schemas closed', () => {
    const schemas = (openapiDocument().components as Record<string, any>).schemas;
    for (const name of ['Agent', 'Call', 'Document', 'McpServer', 'VoicemailConfig', 'ToolCallRecord'])
      assert.equal(schemas[name].additionalProperties, undefined, name);
    for (const name of ['AgentCreateRequest', 'VoicemailConfigInput', 'DocumentCreateRequest', 'McpServerCreateStatic', 'BatchCallingWindowInput'])
      assert.equal(schemas[name].additionalProperties, false, name);
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
