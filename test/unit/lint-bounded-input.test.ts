/**
 * The contract's own lint rule `request-input-bounded` (.spectral.yaml, lint/functions/boundedInput.js)
 * flags every array and string a client sends that has no bound, so a new one cannot land (issue 32).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

const root = path.resolve(import.meta.dirname, '../..');

/** The JSON paths Spectral flags with request-input-bounded in `fixture`. */
async function flagged(fixture: string): Promise<string[]> {
  const args = ['lint', path.join(root, 'test/fixtures/lint', fixture), '--ruleset', path.join(root, '.spectral.yaml'), '--format', 'json', '--quiet'];
  const res = await promisify(execFile)(path.join(root, 'node_modules/.bin/spectral'), args, { cwd: root }).catch((e: { stdout: string }) => e);
  const results = JSON.parse(res.stdout) as Array<{ code: string; path: string[] }>;
  return results
    .filter((r) => r.code === 'request-input-bounded')
    .map((r) => r.path.join('.'))
    .sort();
}

describe('lint rule request-input-bounded', () => {
  it('flags the unbounded array and strings of an OpenAPI request, not the bounded ones or responses', async () => {
    assert.deepEqual(await flagged('unbounded-request.openapi.yaml'), [
      'paths./api/v1/things.post.parameters.0.schema',
      'paths./api/v1/things.post.requestBody.content.application/json.schema.properties.events',
      'paths./api/v1/things.post.requestBody.content.application/json.schema.properties.note',
    ]);
  });

  it('flags the unbounded string of a message the service receives, not of one it sends', async () => {
    assert.deepEqual(await flagged('unbounded-request.asyncapi.yaml'), ['channels.socket.messages.input.payload.properties.data']);
  });
});
