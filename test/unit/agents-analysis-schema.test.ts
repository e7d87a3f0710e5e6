import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ANALYSIS_DATA_MAX_BYTES, dataProblem, schemaBoundsProblem, schemaProblem } from '../../src/agents/analysis-schema.js';

describe("an agent's analysis schema", () => {
  it('runs a pattern that backtracks catastrophically in JavaScript on RE2, in linear time', () => {
    const schema = { type: 'object', properties: { code: { type: 'string', pattern: '^(a+)+$' } } };
    assert.equal(schemaProblem(schema), null);
    // JavaScript's engine would take about 2^40 steps on this value; RE2 answers at once.
    assert.equal(dataProblem(schema, { code: `${'a'.repeat(40)}!` }), '/code must match pattern "^(a+)+$"');
    assert.equal(dataProblem(schema, { code: 'aaaa' }), null);
  });

  it('names the first problem of a value, and refuses data over the size limit', () => {
    const schema = { type: 'object', properties: { n: { type: 'integer' }, s: { type: 'string' } }, required: ['n'] };
    assert.equal(dataProblem(schema, {}), "/ must have required property 'n'");
    assert.equal(dataProblem(schema, { n: 1.5 }), '/n must be integer');
    assert.match(
      dataProblem(schema, { n: 1, s: 'x'.repeat(ANALYSIS_DATA_MAX_BYTES) }) ?? '',
      /^the data is \d+ bytes as compact JSON; at most 65536 are kept$/,
    );
  });

  it('counts size in UTF-8 bytes of the compact JSON and depth in levels of objects and arrays', () => {
    assert.equal(schemaBoundsProblem({ type: 'object', description: 'é'.repeat(8170) }), null);
    assert.equal(schemaBoundsProblem({ type: 'object', description: 'é'.repeat(8200) })?.code, 'analysis_schema_too_large');
    const deep = { type: 'object', examples: [[[[[[[[[[[[[[[1]]]]]]]]]]]]]]] };
    assert.equal(schemaBoundsProblem(deep), null, '16 levels');
    assert.deepEqual(schemaBoundsProblem({ type: 'object', examples: [[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]] }), {
      code: 'analysis_schema_too_deep',
      param: 'analysis.schema.examples.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0',
      message: "'analysis.schema' nests deeper than 16 levels of objects and arrays at 'analysis.schema.examples.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0'.",
    });
  });

  it('refuses a $ref into a keyword the analysis model is not given', () => {
    const problem = schemaProblem({ type: 'object', allOf: [{ type: 'object' }], properties: { a: { $ref: '#/allOf/0' } } });
    assert.equal(problem?.code, 'invalid_analysis_schema');
    assert.equal(problem?.param, 'analysis.schema');
    assert.match(problem?.message ?? '', /refers into a keyword the analysis model does not take/);
  });

  it('allows the model’s propertyOrdering and refuses other unknown keywords', () => {
    assert.equal(schemaProblem({ type: 'object', properties: { a: { type: 'string' } }, propertyOrdering: ['a'] }), null);
    assert.equal(schemaProblem({ type: 'object', properties: { a: { type: 'string', optional: true } } })?.param, 'analysis.schema.properties.a.optional');
  });
});
