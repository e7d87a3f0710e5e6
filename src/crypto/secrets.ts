/**
 * Secrets at rest (provider credentials, tool headers, OAuth tokens, webhook secrets): AES-256-GCM
 * with SECRETS_KEY. Outside production an unset key is generated once into DATA_DIR/secrets.key.
 * Stored form: `v2.<iv>.<tag>.<ciphertext>` (base64url), sealed for a context naming the row and
 * field it belongs to (`agents/<id>/provider_a/auth_token`), which is authenticated with it (GCM
 * associated data): a sealed value copied into another row or field does not open there. `v1` values
 * (sealed before contexts) still open anywhere, and are replaced by v2 when next written.
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('SECRETS_KEY must be 32 bytes');
  }

  seal(plaintext: string, context: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(context, 'utf8'));
    const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v2', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), data.toString('base64url')].join('.');
  }

  /**
   * Identifies the key without revealing it (an HMAC of a constant under the key), so instances can
   * tell whether they share one.
   */
  fingerprint(): string {
    return createHmac('sha256', this.key).update('voice-agent-service secrets key fingerprint v1').digest('hex').slice(0, 32);
  }

  /** A key for one purpose derived from SECRETS_KEY (HMAC of the label), so the purpose needs no key of its own. */
  derive(label: string): Buffer {
    return createHmac('sha256', this.key).update(`voice-agent-service derived key: ${label}`).digest();
  }

  /** Throws when the value was sealed with another key or for another context. */
  open(sealed: string, context: string): string {
    const [version, iv, tag, data] = sealed.split('.');
    if ((version !== 'v1' && version !== 'v2') || !iv || !tag || data === undefined) throw new Error('not a sealed secret');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    if (version === 'v2') decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
  }
}

function parseKey(value: string): Buffer {
  return /^[0-9a-fA-F]{64}$/.test(value) ? Buffer.from(value, 'hex') : Buffer.from(value, 'base64');
}

export function loadSecretBox(opts: { secretsKey?: string; dataDir: string; production: boolean }): SecretBox {
  if (opts.secretsKey) return new SecretBox(parseKey(opts.secretsKey));
  if (opts.production) throw new Error('SECRETS_KEY is required in production');
  const file = path.join(opts.dataDir, 'secrets.key');
  fs.mkdirSync(opts.dataDir, { recursive: true });
  try {
    fs.writeFileSync(file, randomBytes(32).toString('base64'), { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  return new SecretBox(parseKey(fs.readFileSync(file, 'utf8').trim()));
}
