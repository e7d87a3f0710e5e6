import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('voice service configuration', () => {
  it('defaults to the sandbox with bounded retries', () => {
    const c = loadConfig({});
    assert.equal(c.VOICE_SERVICE_URL, undefined);
    assert.equal(c.GEMINI_API_KEY, undefined);
    assert.equal(c.VOICE_RETRY_MAX, 4);
    assert.equal(c.VOICE_SANDBOX_END_OF_TURN_MS, 600);
  });

  it('takes a local endpoint without a key', () => {
    assert.equal(loadConfig({ VOICE_SERVICE_URL: 'ws://127.0.0.1:9000' }).VOICE_SERVICE_URL, 'ws://127.0.0.1:9000');
  });

  for (const [env, name] of [
    [{ VOICE_SERVICE_URL: 'https://example.com' }, 'VOICE_SERVICE_URL'],
    [{ VOICE_SERVICE_URL: 'ws://[' }, 'VOICE_SERVICE_URL'],
    [{ VOICE_SERVICE_URL: 'wss://generativelanguage.googleapis.com' }, 'GEMINI_API_KEY'],
    [{ VOICE_RETRY_MAX: '-1' }, 'VOICE_RETRY_MAX'],
    [{ VOICE_SANDBOX_SPEED: '0' }, 'VOICE_SANDBOX_SPEED'],
  ] as const) {
    it(`names ${name} when ${JSON.stringify(env)} is wrong`, () => {
      assert.throws(
        () => loadConfig(env),
        (err: unknown) => err instanceof ConfigError && err.message.includes(name),
      );
    });
  }

  it('accepts the Google endpoint with a key', () => {
    const c = loadConfig({ VOICE_SERVICE_URL: 'wss://generativelanguage.googleapis.com', GEMINI_API_KEY: 'k' });
    assert.equal(c.GEMINI_API_KEY, 'k');
  });
});
