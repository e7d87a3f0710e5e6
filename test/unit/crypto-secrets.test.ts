/** Sealed secrets are bound to the row and field they were sealed for (AES-GCM associated data). */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createCipheriv, randomBytes } from 'node:crypto';
import { SecretBox } from '../../src/crypto/secrets.js';

const key = randomBytes(32);
const box = new SecretBox(key);

describe('SecretBox', () => {
  it('opens a value only for the context it was sealed for', () => {
    const sealed = box.seal('sk_live_1', 'tools/tool_a/headers/authorization');
    assert.match(sealed, /^v2\./);
    assert.equal(box.open(sealed, 'tools/tool_a/headers/authorization'), 'sk_live_1');
    assert.throws(() => box.open(sealed, 'tools/tool_b/headers/authorization'));
    assert.throws(() => box.open(sealed, 'tools/tool_a/headers/x-other'));
    assert.throws(() => new SecretBox(randomBytes(32)).open(sealed, 'tools/tool_a/headers/authorization'));
  });

  it('still opens values sealed before contexts (v1) wherever they are', () => {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    const data = Buffer.concat([cipher.update('legacy', 'utf8'), cipher.final()]);
    const v1 = ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), data.toString('base64url')].join('.');
    assert.equal(box.open(v1, 'anything'), 'legacy');
  });

  it('refuses a tampered value', () => {
    const sealed = box.seal('secret', 'c');
    const parts = sealed.split('.');
    parts[3] = Buffer.from('tampered').toString('base64url');
    assert.throws(() => box.open(parts.join('.'), 'c'));
  });
});
