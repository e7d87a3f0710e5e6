import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { schemaBudgetProblem, TENANT_SCHEMA_BUDGET } from '../../src/contract/schema-budget.js';
import { compiledFor, firstError } from '../../src/contract/compiled-cache.js';
import { compileStandalone, tenantAjv } from '../../src/contract/tenant-schema.js';
import { branchingSchema, wideSchema } from '../helpers/hostile-schemas.js';

const problem = (schema: Record<string, unknown>) => schemaBudgetProblem(schema, TENANT_SCHEMA_BUDGET, 'parameters');

describe('the tenant schema budget', () => {
  it('counts a shared $defs entry as often as it is reached, and lets ordinary reuse through', () => {
    const address = { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' }, zip: { type: 'string' } } };
    const props = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`address_${i}`, { $ref: '#/$defs/address' }]));
    assert.equal(problem({ type: 'object', properties: props, $defs: { address } }), null);
    assert.equal(problem(branchingSchema(8)), null, '2^8 paths are within the budget');
    assert.equal(problem(branchingSchema(20))?.kind, 'too_complex');
  });

  it('refuses every way back into a schema: the root, a $defs loop, an $anchor, $dynamicRef', () => {
    assert.equal(problem({ type: 'object', properties: { a: { $ref: '#' } } })?.param, 'parameters.properties.a.$ref');
    assert.equal(
      problem({
        type: 'object',
        properties: { a: { $ref: '#/$defs/x' } },
        $defs: { x: { items: { $ref: '#/$defs/y' } }, y: { anyOf: [{ $ref: '#/$defs/x' }] } },
      })?.param,
      'parameters.$defs.y.anyOf.0.$ref',
    );
    assert.equal(problem({ type: 'object', $defs: { n: { $anchor: 'n', properties: { c: { $ref: '#n' } } } } })?.param, 'parameters.$defs.n.properties.c.$ref');
    assert.equal(problem({ type: 'object', $dynamicAnchor: 'm', properties: { c: { $dynamicRef: '#m' } } })?.param, 'parameters.properties.c.$dynamicRef');
  });

  it('refuses size before depth before subschemas, each naming where', () => {
    assert.equal(problem(wideSchema(1500))?.kind, 'too_large');
    const many = { type: 'object', properties: Object.fromEntries(Array.from({ length: 600 }, (_, i) => [`p${i}`, {}])) };
    assert.deepEqual(problem(many), { kind: 'too_complex', param: 'parameters', message: "'parameters' has 601 subschemas; at most 512 are allowed." });
  });

  it('keeps nothing of a failed validation on the cached validator', () => {
    const ajv = tenantAjv();
    const validate = compiledFor('test', branchingSchema(6), (s) => compileStandalone(ajv, s));
    assert.equal(
      compiledFor('test', branchingSchema(6), () => assert.fail('compiled again')),
      validate,
      'compiled once per content',
    );
    assert.equal(firstError(validate, { v: 'no' })?.keyword, 'enum');
    assert.equal(validate.errors, null);
  });
});
