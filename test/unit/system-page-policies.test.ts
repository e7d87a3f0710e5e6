/** The Content-Security-Policy of the served pages (src/system/page-policies.ts). */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { dashboardPolicy, inlineScriptHashes, referencePolicy, webSocketOrigin } from '../../src/system/page-policies.js';

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

describe('page policies', () => {
  it("the dashboard connects to its own origin only: 'self' and the ws(s) form of the public URL's origin", () => {
    assert.equal(webSocketOrigin('https://voice.example.com/base/'), 'wss://voice.example.com');
    assert.equal(webSocketOrigin('http://127.0.0.1:8080'), 'ws://127.0.0.1:8080');
    const connect = dashboardPolicy('https://voice.example.com:8443/x')
      .split('; ')
      .find((d) => d.startsWith('connect-src'));
    assert.equal(connect, "connect-src 'self' wss://voice.example.com:8443");
  });

  it('hashes the text of each inline script exactly as served, and no script with a src', () => {
    const first = "window.x = '<b>&amp;</b>';\n";
    const second = 'const a = 1 < 2 && "</div>";';
    const html = `<!doctype html><html><head><script>${first}</script><script src="/a.js"></script></head><body><script type="module">${second}</script><script>${first}</script></body></html>`;
    assert.deepEqual(inlineScriptHashes(html), [sha256(first), sha256(second)]);
    const policy = referencePolicy(html);
    assert.match(policy, new RegExp(`script-src ${sha256(first).replace(/[+/]/g, '\\$&')} ${sha256(second).replace(/[+/]/g, '\\$&')};`));
    assert.doesNotMatch(policy, /unsafe-inline'[^;]*;.*script-src|script-src[^;]*unsafe/);
  });
});
