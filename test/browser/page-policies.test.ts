/**
 * The served pages under their Content-Security-Policy, in real headless Chromium: the API references
 * (Redoc with its scripts inlined, allowed by hash) run all their scripts and render with no violation
 * of their policy but the two it exists to refuse (see REFUSED); the dashboard may open WebSockets to
 * the service's own origin and to no other host.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { startTestService, type TestService } from '../helpers/service.js';
import { launchChromium } from '../helpers/browser.js';

let t: TestService;
let browser: Browser;

before(async () => {
  t = await startTestService();
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await t?.close();
});

interface Watched {
  page: Page;
  /** `securitypolicyviolation` events of the page (directive and what was blocked). */
  violations(): Promise<string[]>;
  /** The console's CSP errors and the page's uncaught errors. */
  errors: string[];
}

/**
 * What Redoc's bundle tries and the references' policy refuses, by design: the Redocly logo from its
 * CDN (the page loads nothing from elsewhere; Redoc hides the image when it fails) and `Function()`,
 * which its search probes inside a try/catch before indexing in a Worker (refused, it indexes in the
 * page). Anything else is a violation the test fails on.
 */
const REFUSED = [/^img-src https:\/\/cdn\.redoc\.ly\//, /^script-src eval$/];
const CONSOLE_REFUSED = [/^Loading the image 'https:\/\/cdn\.redoc\.ly\//, /'unsafe-eval'/];

async function watchedPage(): Promise<Watched> {
  const page = await browser.newPage();
  page.setDefaultTimeout(15_000);
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) errors.push(m.text());
  });
  page.on('pageerror', (err) => errors.push(`uncaught: ${err.message}`));
  // Playwright's init scripts are not subject to the page's policy.
  await page.addInitScript(() => {
    const w = window as unknown as { __violations: string[] };
    w.__violations = [];
    document.addEventListener('securitypolicyviolation', (e) => w.__violations.push(`${e.effectiveDirective} ${e.blockedURI}`));
  });
  return {
    page,
    violations: () => page.evaluate(() => (window as unknown as { __violations: string[] }).__violations),
    errors,
  };
}

describe('page policies in Chromium', () => {
  for (const [path, title] of [
    ['/docs', 'Voice Agent Calling Service API'],
    ['/docs/asyncapi', 'Voice Agent Calling Service'],
    ['/docs/internal', 'Voice Agent Calling Service API'],
  ] as const) {
    it(`${path} runs and renders under its policy, refusing only what it is meant to`, async () => {
      const w = await watchedPage();
      try {
        const res = await w.page.goto(`${t.url}${path}`);
        assert.equal(res?.status(), 200);
        assert.match(res?.headers()['content-security-policy'] ?? '', /script-src 'sha256-/);
        // Redoc rendered the document (its scripts ran): the title heading and the operations' menu.
        await w.page.getByRole('heading', { level: 1 }).first().waitFor();
        assert.match(await w.page.getByRole('heading', { level: 1 }).first().innerText(), new RegExp(title));
        assert.ok((await w.page.getByRole('listitem').count()) > 3, 'the navigation menu is rendered');
        assert.deepEqual(
          (await w.violations()).filter((v) => !REFUSED.some((r) => r.test(v))),
          [],
        );
        assert.deepEqual(
          w.errors.filter((e) => !CONSOLE_REFUSED.some((r) => r.test(e))),
          [],
        );
      } finally {
        await w.page.close();
      }
    });
  }

  it("the dashboard opens WebSockets to the service's own origin only", async () => {
    const w = await watchedPage();
    try {
      await w.page.goto(`${t.url}/dashboard`);
      const own = t.url.replace('http:', 'ws:');
      // Another host of the same machine: allowed by `connect-src ws:` before, refused now.
      const other = own.replace('127.0.0.1', 'localhost');
      const attempt = (url: string) =>
        w.page.evaluate(
          (u) =>
            new Promise<string>((resolve) => {
              setTimeout(() => resolve('no answer'), 3000);
              try {
                const ws = new WebSocket(u);
                ws.onopen = () => resolve('open');
                ws.onclose = (e) => resolve(`closed ${e.code}`);
              } catch (err) {
                resolve(`refused: ${(err as Error).name}`);
              }
            }),
          url,
        );
      // Reaches the service (which refuses the bad token with its own close code), no violation.
      assert.match(await attempt(`${own}/ws/user-1?token=rt_bad`), /^(open|closed 4\d\d\d)$/);
      assert.deepEqual(await w.violations(), []);
      assert.deepEqual(w.errors, []);
      await attempt(`${other}/ws/user-1?token=rt_bad`);
      const violations = await w.violations();
      assert.ok(
        violations.some((v) => v.startsWith('connect-src') && v.includes('localhost')),
        `the socket to another host is refused by the policy: ${JSON.stringify(violations)}`,
      );
    } finally {
      await w.page.close();
    }
  });
});
