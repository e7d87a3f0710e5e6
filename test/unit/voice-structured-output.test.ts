import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { forStructuredOutput } from '../../src/voice/structured-output.js';

describe('a schema as the analysis model takes it', () => {
  it('keeps the keywords the model honours and writes the rest into the description', () => {
    assert.deepEqual(
      forStructuredOutput({
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        title: 'Lead',
        properties: {
          zip: { type: 'string', description: 'Postal code.', pattern: '^[0-9]{5}$', minLength: 5 },
          kind: { const: 'lead' },
          flag: { const: true },
          score: { type: 'number', minimum: 0, exclusiveMaximum: 10, multipleOf: 0.5 },
          tags: { type: 'array', items: { type: 'string', maxLength: 20 }, uniqueItems: true, minItems: 1 },
          either: { anyOf: [{ type: 'string', format: 'email' }, { type: 'null' }] },
        },
        required: ['zip'],
        additionalProperties: false,
        propertyOrdering: ['zip', 'kind'],
        allOf: [{ required: ['kind'] }],
      }),
      {
        type: 'object',
        title: 'Lead',
        properties: {
          zip: { type: 'string', description: 'Postal code. Constraints: pattern "^[0-9]{5}$"; minLength 5.' },
          kind: { enum: ['lead'] },
          flag: { description: 'Constraints: const true.' },
          score: { type: 'number', minimum: 0, description: 'Constraints: exclusiveMaximum 10; multipleOf 0.5.' },
          tags: {
            type: 'array',
            items: { type: 'string', description: 'Constraints: maxLength 20.' },
            minItems: 1,
            description: 'Constraints: uniqueItems true.',
          },
          either: { anyOf: [{ type: 'string', format: 'email' }, { type: 'null' }] },
        },
        required: ['zip'],
        additionalProperties: false,
        propertyOrdering: ['zip', 'kind'],
        description: 'Constraints: allOf [{"required":["kind"]}].',
      },
    );
  });

  it('rebases local references where the schema will sit, and leaves only $ keywords beside a $ref', () => {
    assert.deepEqual(
      forStructuredOutput(
        {
          type: 'object',
          properties: { home: { $ref: '#/$defs/address', description: 'Where they live.' }, self: { $ref: '#' }, tagged: { $ref: '#place' } },
          $defs: { address: { $anchor: 'place', type: 'object', properties: { city: { type: 'string' } } } },
        },
        '#/properties/data',
      ),
      {
        type: 'object',
        properties: { home: { $ref: '#/properties/data/$defs/address' }, self: { $ref: '#/properties/data' }, tagged: { $ref: '#place' } },
        $defs: { address: { $anchor: 'place', type: 'object', properties: { city: { type: 'string' } } } },
      },
    );
  });

  it('clips a long constraint to 200 characters in words', () => {
    const out = forStructuredOutput({ type: 'string', not: { enum: ['x'.repeat(500)] } }) as { description: string };
    assert.equal(out.description.length, 'Constraints: '.length + 200 + 1);
    assert.ok(out.description.endsWith('....'));
  });
});
