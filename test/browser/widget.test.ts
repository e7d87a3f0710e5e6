/**
 * The web widget in real headless Chromium, on a page of another origin that loads it from the service's
 * /sdk/voice-agent-widget.js and mints tokens through its own endpoint: how it is served; two agents'
 * camera and screen-share controls, known from the public profile before anyone starts; the keyboard
 * (Tab to the start button, Enter starts a voice session, a typed message answered in the live region);
 * readable errors, stop() freeing the slot; theming through CSS custom properties.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { createAgent, setWorkspace, waitFor } from '../helpers/realtime.js';
import { assertServedBundle, deadUrl, launchChromium, writeWav } from '../helpers/browser.js';

const BUNDLE = path.resolve(import.meta.dirname, '../../packages/widget/dist/voice-agent-widget.js');
const WIDGET = '/sdk/voice-agent-widget.js';

interface Site {
  origin: string;
  /** Pages by path; each is the HTML around the widget script. */
  pages: Map<string, string>;
  tokenRequests: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

/** A customer's site on another port of 127.0.0.1 (another origin): its pages and its token endpoint, which adds the API key. */
async function startSite(serviceUrl: string, apiKey: () => string): Promise<Site> {
  const pages = new Map<string, string>();
  const tokenRequests: Array<Record<string, unknown>> = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://site');
    const page = req.method === 'GET' ? pages.get(url.pathname) : undefined;
    if (page !== undefined) {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(page);
      return;
    }
    if (req.method === 'POST' && url.pathname === '/token') {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void (async () => {
          const raw = Buffer.concat(chunks).toString();
          tokenRequests.push(JSON.parse(raw) as Record<string, unknown>);
          const minted = await fetch(`${serviceUrl}/api/v1/realtime/sessions`, {
            method: 'POST',
            headers: { Authorization: `Bearer ${apiKey()}`, 'Content-Type': 'application/json' },
            body: raw,
          });
          res.writeHead(minted.status, { 'Content-Type': 'application/json' }).end(await minted.text());
        })().catch((err: unknown) => res.writeHead(502, { 'Content-Type': 'text/plain' }).end(String(err)));
      });
      return;
    }
    res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    pages,
    tokenRequests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let t: TestService;
let site: Site;
let browser: Browser;
let a: Tenant;
/** The API key the site's token endpoint adds. */
let siteKey = '';
let wav: string;
let pageCount = 0;

before(async () => {
  // A closed session gives its slot back at once; the expiry only has to outlast a heartbeat delayed by
  // a loaded machine (at 700 ms a CI run once saw a live session's slot expire and a second admitted).
  t = await startTestService({ VOICE_SANDBOX_MS_PER_CHAR: '20', REALTIME_LEASE_HEARTBEAT_MS: '250', REALTIME_LEASE_EXPIRY_MS: '5000' });
  a = await tenant(t);
  siteKey = a.apiKey;
  site = await startSite(t.url, () => siteKey);
  // A quiet microphone: the fake device's beeps would be heard as speech and answered.
  wav = writeWav(Buffer.alloc(16000 * 2), 16000);
  browser = await launchChromium([`--use-file-for-fake-audio-capture=${wav}%noloop`]);
});
after(async () => {
  await browser?.close();
  await site?.close();
  await t?.close();
  if (wav) fs.rmSync(path.dirname(wav), { recursive: true, force: true });
});

/** Opens a page of the site with `body` after the widget's script tag, and waits until every widget has its profile. */
async function openPage(body: string, head = ''): Promise<Page> {
  const pathname = `/page-${++pageCount}`;
  site.pages.set(
    pathname,
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>A customer's page</title>${head}
<script type="module" src="${t.url}${WIDGET}"></script></head><body><h1>Acme Dental</h1>${body}</body></html>`,
  );
  const page = await browser.newPage();
  await page.goto(`${site.origin}${pathname}`);
  await page.waitForFunction(
    () => {
      const widgets = [...document.querySelectorAll('voice-agent-widget')] as Array<HTMLElement & { profileStatus?: string }>;
      return widgets.length > 0 && widgets.every((w) => w.profileStatus !== undefined && w.profileStatus !== 'loading');
    },
    undefined,
    { timeout: 10_000 },
  );
  return page;
}

/** What the test reads from a widget's shadow root. */
interface View {
  name: string;
  status: string;
  statusIsError: boolean;
  log: string[];
  buttons: Array<{ id: string; text: string; pressed: string | null; disabled: boolean }>;
  state: string;
}

function view(page: Page, selector: string): Promise<View> {
  return page.evaluate((sel) => {
    const host = document.querySelector(sel) as HTMLElement & { state: string };
    const root = host.shadowRoot!;
    return {
      name: root.getElementById('name')!.textContent ?? '',
      status: root.getElementById('status')!.textContent ?? '',
      statusIsError: root.getElementById('status')!.classList.contains('error'),
      log: [...root.getElementById('log')!.children].map((e) => e.textContent ?? ''),
      buttons: [...root.querySelectorAll('button')].map((b) => ({
        id: b.id,
        text: (b.textContent ?? '').trim(),
        pressed: b.getAttribute('aria-pressed'),
        disabled: b.disabled,
      })),
      state: host.state,
    };
  }, selector);
}

async function waitForView(page: Page, selector: string, pred: (v: View) => boolean, what: string, timeoutMs = 10_000): Promise<View> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await view(page, selector);
    if (pred(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function leases(workspaceId: string): Promise<number> {
  const [{ count }] = await t.service.db
    .knex('session_leases')
    .where({ workspace_id: workspaceId })
    .where('expires_at', '>', new Date())
    .count<{ count: string }[]>('* as count');
  return Number(count);
}

describe('served at GET /sdk/voice-agent-widget.js', () => {
  it('one ES module as JavaScript, loadable by any origin, cacheable with an ETag (304 on If-None-Match), under 30 kB gzipped', async () => {
    await assertServedBundle(t.url, WIDGET, BUNDLE, 30 * 1024);
  });
});

describe("the controls follow each agent's realtime settings", () => {
  it('camera only for the agent with enable_webcam, screen sharing only for the one with enable_screen_share, before anyone starts', async () => {
    const webcamAgent = await createAgent(t, a, { name: 'Camera desk', realtime: { enable_webcam: true, enable_screen_share: false } });
    const screenAgent = await createAgent(t, a, { name: 'Screen desk', realtime: { enable_webcam: false, enable_screen_share: true } });
    const p = await openPage(
      `<voice-agent-widget id="one" agent-id="${webcamAgent}" token-url="/token"></voice-agent-widget>
       <voice-agent-widget id="two" agent-id="${screenAgent}" token-url="/token"></voice-agent-widget>
       <voice-agent-widget id="nobody" agent-id="agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8V" token-url="/token"></voice-agent-widget>`,
    );
    try {
      const one = await view(p, '#one');
      const two = await view(p, '#two');
      assert.equal(one.name, 'Camera desk');
      assert.equal(two.name, 'Screen desk');
      const ids = (v: View) => v.buttons.map((b) => b.id);
      assert.deepEqual(ids(one), ['send', 'start', 'mute', 'camera']);
      assert.deepEqual(ids(two), ['send', 'start', 'mute', 'screen']);
      assert.deepEqual(
        one.buttons.find((b) => b.id === 'camera'),
        { id: 'camera', text: 'Camera', pressed: 'false', disabled: false },
      );
      assert.deepEqual(
        two.buttons.find((b) => b.id === 'screen'),
        { id: 'screen', text: 'Share screen', pressed: 'false', disabled: false },
      );
      for (const v of [one, two]) {
        assert.deepEqual(
          v.buttons.find((b) => b.id === 'start'),
          { id: 'start', text: 'Start conversation', pressed: null, disabled: false },
        );
        assert.deepEqual(
          v.buttons.find((b) => b.id === 'mute'),
          { id: 'mute', text: 'Mute', pressed: 'false', disabled: true },
        );
        assert.equal(v.state, 'idle');
      }

      // The same through the accessibility tree: named buttons, toggles with a pressed state, the live regions.
      const oneHost = p.locator('#one');
      await assert.doesNotReject(oneHost.getByRole('button', { name: 'Start conversation' }).waitFor());
      assert.equal(await oneHost.getByRole('button', { name: 'Camera', pressed: false }).count(), 1);
      assert.equal(await oneHost.getByRole('button', { name: 'Share screen' }).count(), 0);
      assert.equal(await p.locator('#two').getByRole('button', { name: 'Camera' }).count(), 0);
      assert.equal(await oneHost.getByRole('log', { name: 'Conversation' }).count(), 1);
      assert.equal(await oneHost.getByRole('status').count(), 1);
      assert.equal(await oneHost.getByRole('textbox', { name: 'Message to the agent' }).isDisabled(), true, 'nothing to type to before the session');
      await oneHost.getByRole('button', { name: 'Camera' }).click();
      assert.equal(await oneHost.getByRole('button', { name: 'Camera', pressed: true }).count(), 1, 'a toggle');

      // An agent that does not exist: said in the live region, and nothing to start.
      const nobody = await view(p, '#nobody');
      assert.equal(nobody.status, 'This voice agent does not exist.');
      assert.equal(nobody.statusIsError, true);
      assert.deepEqual(
        nobody.buttons.map((b) => [b.id, b.disabled]),
        [
          ['send', true],
          ['start', true],
          ['mute', true],
        ],
      );

      // The widget asked the service it was loaded from (another origin than the page), not the page's site.
      const asked = await p.evaluate(() =>
        performance
          .getEntriesByType('resource')
          .map((e) => e.name)
          .filter((n) => n.includes('/api/v1/public/agents/')),
      );
      assert.deepEqual(
        asked.map((u) => new URL(u).origin),
        [t.url, t.url, t.url].map((u) => new URL(u).origin),
      );
      assert.deepEqual(asked.map((u) => u.split('/').pop()).sort(), [webcamAgent, screenAgent, 'agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8V'].sort());
    } finally {
      await p.close();
    }
  });

  it('api-base points the widget at another service URL; a change of agent-id reloads the profile and its controls', async () => {
    const webcamAgent = await createAgent(t, a, { name: 'Camera desk', realtime: { enable_webcam: true, enable_screen_share: false } });
    const screenAgent = await createAgent(t, a, { name: 'Screen desk', realtime: { enable_webcam: false, enable_screen_share: true } });
    const down = await deadUrl('/voice');
    const p = await openPage(`<voice-agent-widget id="w" agent-id="${webcamAgent}" token-url="/token" api-base="${down}"></voice-agent-widget>`);
    try {
      const failed = await view(p, '#w');
      assert.equal(failed.status, 'The voice agent service could not be reached.', 'nothing listens at that api-base');
      assert.equal(failed.statusIsError, true);
      assert.deepEqual(
        failed.buttons.map((b) => b.id),
        ['send', 'start', 'mute'],
      );
      await p.evaluate(
        ([base, id]) => {
          const w = document.querySelector('#w')!;
          w.setAttribute('api-base', base);
          w.setAttribute('agent-id', id);
        },
        [t.url, screenAgent] as const,
      );
      const loaded = await waitForView(p, '#w', (v) => v.name === 'Screen desk', 'the second profile');
      assert.deepEqual(
        loaded.buttons.map((b) => b.id),
        ['send', 'start', 'mute', 'screen'],
      );
      assert.equal(loaded.status, '');
    } finally {
      await p.close();
    }
  });

  it('a pressed camera control starts a camera session', async () => {
    const agentId = await createAgent(t, a, { name: 'Camera desk', realtime: { enable_webcam: true, enable_screen_share: false } });
    const p = await openPage(`<voice-agent-widget id="w" agent-id="${agentId}" token-url="/token" user-id="visitor-cam"></voice-agent-widget>`);
    try {
      const host = p.locator('#w');
      await host.getByRole('button', { name: 'Camera' }).click();
      await host.getByRole('button', { name: 'Start conversation' }).click();
      const live = await waitForView(p, '#w', (v) => v.state === 'live', 'the camera session');
      assert.deepEqual(site.tokenRequests.at(-1), { agent_id: agentId, user_id: 'visitor-cam', source: 'camera' });
      assert.deepEqual(
        live.buttons.find((b) => b.id === 'camera'),
        { id: 'camera', text: 'Camera', pressed: 'true', disabled: true },
      );
      assert.equal(live.buttons.find((b) => b.id === 'mute')!.disabled, false);
      await host.getByRole('button', { name: 'End conversation' }).click();
      await waitForView(p, '#w', (v) => v.state === 'closed', 'the end');
    } finally {
      await p.close();
    }
  });
});

describe('keyboard and screen reader', () => {
  it('Tab reaches the start button, Enter starts a voice session; a typed message is answered in the live region; stop() frees the slot', async () => {
    const agentId = await createAgent(t, a, { name: 'Front desk', first_message: 'Hello! How can I help you today?' });
    const p = await openPage(`<voice-agent-widget id="w" agent-id="${agentId}" token-url="/token"></voice-agent-widget>`);
    try {
      const focused = () =>
        p.evaluate(() => {
          const host = document.activeElement;
          return host?.shadowRoot?.activeElement?.id ?? host?.tagName.toLowerCase() ?? null;
        });
      let tabs = 0;
      while ((await focused()) !== 'start') {
        assert.ok(++tabs <= 3, `Tab did not reach the start button (focus on ${await focused()})`);
        await p.keyboard.press('Tab');
      }
      await p.keyboard.press('Enter');
      const live = await waitForView(p, '#w', (v) => v.state === 'live', 'session_started');
      assert.equal(live.status, 'Connected. You can talk now.');
      assert.deepEqual(
        live.buttons.find((b) => b.id === 'start'),
        { id: 'start', text: 'End conversation', pressed: null, disabled: false },
      );
      assert.equal(await focused(), 'start', 'focus stays on the button');

      // The user id: random, kept in the page origin's localStorage, sent to the token endpoint.
      const stored = await p.evaluate(() => localStorage.getItem('voice-agent-widget.user-id'));
      assert.match(stored ?? '', /^visitor-[0-9a-f]{24}$/);
      assert.deepEqual(site.tokenRequests.at(-1), { agent_id: agentId, user_id: stored, source: 'voice' });
      assert.equal(await leases(a.workspaceId), 1);

      await waitForView(p, '#w', (v) => v.log.includes('Front desk: Hello! How can I help you today?'), 'the first message in the log', 15_000);
      const message = p.locator('#w').getByRole('textbox', { name: 'Message to the agent' });
      await message.focus();
      await p.keyboard.type('What are your opening hours on Saturday?');
      await p.keyboard.press('Enter');
      const answered = await waitForView(
        p,
        '#w',
        (v) => v.log.some((e) => e.startsWith('Front desk: ') && e.includes('I heard: "What are your opening hours on Saturday?"')),
        "the agent's answer in the log",
        15_000,
      );
      assert.ok(answered.log.includes('You: What are your opening hours on Saturday?'), answered.log.join('\n'));
      assert.equal(await message.inputValue(), '', 'the box is emptied');
      // The log is a polite live region: screen readers read each entry as it is added.
      const region = await p.evaluate(() => {
        const log = document.querySelector('#w')!.shadowRoot!.getElementById('log')!;
        return [log.getAttribute('role'), log.getAttribute('aria-live')];
      });
      assert.deepEqual(region, ['log', 'polite']);

      await p.evaluate(() => (document.querySelector('#w') as HTMLElement & { stop(): Promise<void> }).stop());
      const ended = await view(p, '#w');
      assert.equal(ended.state, 'closed');
      assert.equal(ended.status, 'Conversation ended.');
      assert.equal(ended.buttons.find((b) => b.id === 'start')!.text, 'Start conversation');
      await waitFor(async () => (await leases(a.workspaceId)) === 0, 3000, 'the slot to be released');
    } finally {
      await p.close();
    }
  });

  it("start()'s errors are said in the live region in words; after stop() frees the slot the next start works", async () => {
    const b = await tenant(t, 'Busy Dental');
    siteKey = b.apiKey;
    try {
      await setWorkspace(t, b.workspaceId, { concurrent_session_limit: 1 });
      const agentId = await createAgent(t, b, { name: 'Busy desk' });
      const p = await openPage(
        `<voice-agent-widget id="first" agent-id="${agentId}" token-url="/token" source="text"></voice-agent-widget>
         <voice-agent-widget id="second" agent-id="${agentId}" token-url="/token" source="text"></voice-agent-widget>`,
      );
      try {
        const errors: unknown[] = [];
        await p.exposeFunction('recordError', (detail: unknown) => errors.push(detail));
        await p.evaluate(() =>
          document
            .querySelector('#second')!
            .addEventListener('voice-agent-error', (e) => (window as unknown as { recordError(d: unknown): void }).recordError((e as CustomEvent).detail)),
        );
        await p.locator('#first').getByRole('button', { name: 'Start conversation' }).click();
        assert.equal((await waitForView(p, '#first', (v) => v.state === 'live', 'the first session')).status, 'Connected. Type a message to the agent.');

        await p.locator('#second').getByRole('button', { name: 'Start conversation' }).click();
        const refused = await waitForView(p, '#second', (v) => v.state === 'closed', 'the refusal');
        assert.equal(refused.status, 'All agents are busy right now. Please try again in a moment.');
        assert.equal(refused.statusIsError, true);
        assert.equal((errors[0] as { code: string }).code, 'rate_limited');

        await p.evaluate(() => (document.querySelector('#first') as HTMLElement & { stop(): Promise<void> }).stop());
        await waitFor(async () => (await leases(b.workspaceId)) === 0, 3000, 'the slot to be released');
        await p.locator('#second').getByRole('button', { name: 'Start conversation' }).click();
        const live = await waitForView(p, '#second', (v) => v.state === 'live', 'the second session in the freed slot');
        assert.equal(live.statusIsError, false);
        await p.evaluate(() => (document.querySelector('#second') as HTMLElement & { stop(): Promise<void> }).stop());
      } finally {
        await p.close();
      }
    } finally {
      siteKey = a.apiKey;
    }
  });
});

describe('theming', () => {
  it('CSS custom properties set on the element, by a page rule or inline, change the styles inside the shadow root', async () => {
    const agentId = await createAgent(t, a, { name: 'Themed desk' });
    const p = await openPage(
      `<voice-agent-widget id="w" agent-id="${agentId}" token-url="/token"></voice-agent-widget>`,
      '<style>voice-agent-widget { --vaw-accent: rgb(124, 58, 237); --vaw-radius: 3px; --vaw-font-family: Georgia, serif; }</style>',
    );
    try {
      const styles = () =>
        p.evaluate(() => {
          const root = document.querySelector('#w')!.shadowRoot!;
          const start = getComputedStyle(root.getElementById('start')!);
          const panel = getComputedStyle(root.getElementById('panel')!);
          return { accent: start.backgroundColor, radius: panel.borderTopLeftRadius, font: panel.fontFamily };
        });
      assert.deepEqual(await styles(), { accent: 'rgb(124, 58, 237)', radius: '3px', font: 'Georgia, serif' });
      await p.evaluate(() => (document.querySelector('#w') as HTMLElement).style.setProperty('--vaw-accent', 'rgb(200, 0, 100)'));
      assert.equal((await styles()).accent, 'rgb(200, 0, 100)');
    } finally {
      await p.close();
    }
  });
});
