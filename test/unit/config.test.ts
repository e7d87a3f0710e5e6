import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('configuration', () => {
  it('has working defaults', () => {
    const c = loadConfig({});
    assert.equal(c.PORT, 3000);
    assert.equal(c.EMBEDDED_PG_PORT, 54329);
    assert.equal(c.publicBaseUrl, 'http://localhost:3000');
    assert.ok(c.CORS_ORIGINS.includes('http://localhost:3000'));
    assert.equal(c.DATABASE_URL, undefined);
  });

  const bad: Array<[Record<string, string>, string]> = [
    [{ PORT: 'eighty' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ PUBLIC_BASE_URL: 'ftp://x' }, 'PUBLIC_BASE_URL'],
    [{ ADMIN_TOKEN: 'short' }, 'ADMIN_TOKEN'],
    [{ CORS_ORIGINS: 'localhost:3000' }, 'CORS_ORIGINS'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ SECRETS_KEY: 'not-a-key' }, 'SECRETS_KEY'],
    [{ EMBEDDED_PG_PORT: '0' }, 'EMBEDDED_PG_PORT'],
    [{ REALTIME_LEASE_HEARTBEAT_MS: '30000' }, 'REALTIME_LEASE_HEARTBEAT_MS'],
    [{ REALTIME_LEASE_HEARTBEAT_MS: '5000', REALTIME_LEASE_EXPIRY_MS: '4000' }, 'REALTIME_LEASE_HEARTBEAT_MS'],
    [{ NODE_ENV: 'production' }, 'SECRETS_KEY'],
    [{ NODE_ENV: 'production', SECRETS_KEY: '0'.repeat(64), PUBLIC_BASE_URL: 'https://voice.example.com' }, 'VOICE_SERVICE_URL'],
    [
      { NODE_ENV: 'production', SECRETS_KEY: '0'.repeat(64), PUBLIC_BASE_URL: 'https://voice.example.com', VOICE_SERVICE_URL: 'wss://v.example.com' },
      'PROVIDER_A_API_URL',
    ],
    [
      {
        NODE_ENV: 'production',
        SECRETS_KEY: '0'.repeat(64),
        PUBLIC_BASE_URL: 'https://voice.example.com',
        VOICE_SERVICE_URL: 'wss://v.example.com',
        PROVIDER_A_API_URL: 'https://api.twilio.com',
      },
      'PROVIDER_B_API_URL',
    ],
    [{ CALL_HEARTBEAT_MS: '5000', CALL_ORPHAN_AFTER_MS: '4000' }, 'CALL_HEARTBEAT_MS'],
    [{ PROVIDER_A_API_URL: 'ftp://carrier' }, 'PROVIDER_A_API_URL'],
  ];
  for (const [env, name] of bad) {
    it(`names ${name} when ${JSON.stringify(env)} is wrong`, () => {
      assert.throws(
        () => loadConfig(env),
        (err: unknown) => err instanceof ConfigError && err.message.includes(name),
      );
    });
  }

  it('accepts a lease heartbeat shorter than the lease expiry; admission hold defaults to 250 frames / 8 MB', () => {
    const c = loadConfig({ REALTIME_LEASE_HEARTBEAT_MS: '100', REALTIME_LEASE_EXPIRY_MS: '700' });
    assert.equal(c.REALTIME_LEASE_HEARTBEAT_MS, 100);
    assert.deepEqual([c.REALTIME_ADMISSION_HOLD_FRAMES, c.REALTIME_ADMISSION_HOLD_BYTES], [250, 8 * 1024 * 1024]);
  });

  it('treats an empty variable as unset', () => {
    assert.equal(loadConfig({ ADMIN_TOKEN: '' }).ADMIN_TOKEN, undefined);
  });
});
