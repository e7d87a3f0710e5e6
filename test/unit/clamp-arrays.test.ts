/** The view of a request body that validation gets (src/http/clamp-arrays.ts). */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { clampArrays, largestMaxItems } from '../../src/http/clamp-arrays.js';

describe('clampArrays', () => {
  it('leaves a body whose arrays are within the limit as it is, the same object', () => {
    const body = { a: [1, 2, 3], b: { c: [[1], [2, 3]] }, d: 'x', e: null };
    assert.equal(clampArrays(body, 3), body);
  });

  it('cuts each longer array, at any depth, to one past the limit in a copy; the body is unchanged', () => {
    const long = Array.from({ length: 80_000 }, (_, i) => i);
    const body = { events: long, nested: [{ list: long }], kept: [1, 2] };
    const view = clampArrays(body, 16) as typeof body;
    assert.deepEqual(view.events, long.slice(0, 17));
    assert.deepEqual(view.nested[0].list, long.slice(0, 17));
    assert.equal(view.kept, body.kept, 'what needs no cut is shared');
    assert.equal(body.events.length, 80_000);
    assert.equal(body.nested[0].list.length, 80_000);
  });

  it("the contract's largest maxItems is the batch's 10,000 recipients", () => {
    const document = JSON.parse(readFileSync(path.join(import.meta.dirname, '../../generated/openapi-internal.json'), 'utf8'));
    assert.equal(largestMaxItems(document), 10_000);
  });
});
