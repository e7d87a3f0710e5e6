/**
 * The browser client library's start() error codes for close codes are the ones the AsyncAPI
 * document states (`x-close-codes[].client_error_code`): the contract is where client teams read them.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { refusal } from '../../packages/client/src/errors.js';
import { generatedDir } from '../../src/contract/documents.js';

interface CloseCode {
  code: number;
  reason: string;
  client_error_code?: string;
  delivery?: string;
}

describe('client library error codes', () => {
  it('map every close code as x-close-codes says', () => {
    const doc = JSON.parse(readFileSync(path.join(generatedDir, 'asyncapi.json'), 'utf8')) as { channels: Record<string, { 'x-close-codes'?: CloseCode[] }> };
    const codes = Object.values(doc.channels).flatMap((c) => c['x-close-codes'] ?? []);
    assert.ok(codes.length >= 10);
    for (const c of codes) {
      if (!c.client_error_code) continue;
      // Refused before the upgrade: what the browser sees is 1006 with no reason.
      const [code, reason] = c.delivery ? [1006, ''] : [c.code, c.reason];
      assert.equal(refusal(code, reason).code, c.client_error_code, `${c.code} ${c.reason}`);
    }
  });
});
