/**
 * Browser test steps: Debian's Chromium driven by playwright-core (fake camera and microphone, the
 * permission prompts answered yes), and a customer's site on another origin of 127.0.0.1: a page that
 * imports the client library from the service's /sdk/voice-agent-client.js, and the site's own token
 * endpoint, which adds its API key and calls POST /api/v1/realtime/sessions as a customer's server would.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { chromium, type Browser, type Page, type WebSocket as PageSocket } from 'playwright-core';
import { patient } from './patience.js';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export async function launchChromium(extraArgs: string[] = []): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: the browser tests need Debian's chromium (apt-get install -y chromium; .ci/run installs it) or CHROMIUM_PATH`);
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--use-fake-device-for-media-stream',
      '--use-fake-ui-for-media-stream',
      ...extraArgs,
    ],
  });
}

/** A WAV file (PCM16 mono) of raw PCM16 LE samples, with `leadMs`/`tailMs` of silence around them. */
export function writeWav(pcm: Buffer, sampleRate: number, opts: { leadMs?: number; tailMs?: number } = {}): string {
  const silence = (ms: number) => Buffer.alloc(Math.round((sampleRate * ms) / 1000) * 2);
  const data = Buffer.concat([silence(opts.leadMs ?? 0), pcm, silence(opts.tailMs ?? 0)]);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0);
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVE', 8);
  header.write('fmt ', 12);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36);
  header.writeUInt32LE(data.length, 40);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-wav-'));
  const file = path.join(dir, 'microphone.wav');
  fs.writeFileSync(file, Buffer.concat([header, data]));
  return file;
}

export interface TokenRequest {
  contentType: string | undefined;
  body: unknown;
}

export interface CustomerSite {
  /** The site's origin, e.g. http://127.0.0.1:41234 (another port than the service: another origin). */
  origin: string;
  tokenUrl: string;
  /** The API key the token endpoint adds. */
  apiKey: string;
  /**
   * How the token endpoint answers: `pass` the service's answer through (status and body), `no_ws_url`
   * (the service's answer without `ws_url`), `wrong_token` (a `ws_url` whose token was never issued).
   */
  mode: 'pass' | 'no_ws_url' | 'wrong_token';
  /** Runs after the service minted a token and before the endpoint answers (changes "after minting"). */
  afterMint: (() => Promise<void>) | null;
  requests: TokenRequest[];
  close(): Promise<void>;
}

/** The page's script: `window.vas` drives sessions and records their events for the test. */
function pageHtml(serviceUrl: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>A customer's page</title></head>
<body>
<button id="talk" type="button">Talk to us</button>
<script type="module">
import * as sdk from '${serviceUrl}/sdk/voice-agent-client.js';
const sessions = [];
const plain = (v) => {
  if (v instanceof Error) return { code: v.code, message: v.message, closeCode: v.closeCode };
  if (v && v.type === 'audio') return { type: 'audio', mime_type: v.mime_type, bytes: atob(v.data).length };
  return v;
};
const errorOf = (err) => ({ ok: false, code: err.code, message: err.message, closeCode: err.closeCode, name: err.name,
  isError: err instanceof Error, isVoiceAgentError: err instanceof sdk.VoiceAgentError });
window.vas = {
  exports: Object.keys(sdk).sort(),
  create(opts) {
    const o = { ...opts };
    if (opts.getTokenFrom) {
      delete o.getTokenFrom;
      o.getToken = async () => (await fetch(opts.getTokenFrom, { method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ agent_id: opts.agentId, user_id: opts.userId, source: opts.source ?? 'voice' }) })).json();
    }
    if ('getTokenReturns' in opts) {
      delete o.getTokenReturns;
      o.getToken = async () => opts.getTokenReturns;
    }
    const s = sdk.createSession(o);
    const rec = { s, events: [] };
    const t0 = performance.now();
    for (const e of ['message', 'state', 'transcript', 'reply', 'speaking', 'interrupted', 'toolCall', 'error', 'close']) {
      s.on(e, (v) => rec.events.push({ e, v: plain(v), at: performance.now() - t0 }));
    }
    s.on('audio', (a) => rec.events.push({ e: 'audio', v: { samples: a.samples.length, sampleRate: a.sampleRate }, at: performance.now() - t0 }));
    sessions.push(rec);
    return sessions.length - 1;
  },
  async start(i) {
    try {
      return { ok: true, started: await sessions[i].s.start() };
    } catch (err) {
      return errorOf(err);
    }
  },
  /** The next click on the page's button starts session i (a user gesture, as on a real page). */
  startOnClick(i) {
    window.vasStarted = new Promise((resolve) => {
      document.getElementById('talk').onclick = () => resolve(window.vas.start(i));
    });
  },
  sendText(i, text) {
    try {
      sessions[i].s.sendText(text);
      return { ok: true };
    } catch (err) {
      return errorOf(err);
    }
  },
  async stop(i) {
    await sessions[i].s.stop();
    return sessions[i].s.state;
  },
  state: (i) => sessions[i].s.state,
  sessionId: (i) => sessions[i].s.sessionId,
  events: (i) => sessions[i].events,
  setImageRate: (i, rate) => sessions[i].s.setImageRate(rate),
  setMuted: (i, muted) => sessions[i].s.setMuted(muted),
};
window.vasReady = true;
</script>
</body></html>`;
}

export async function startCustomerSite(serviceUrl: string): Promise<CustomerSite> {
  const html = pageHtml(serviceUrl);
  const site: Omit<CustomerSite, 'origin' | 'tokenUrl' | 'close'> = { apiKey: '', mode: 'pass', afterMint: null, requests: [] };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://site');
    if (req.method === 'GET' && (url.pathname === '/' || url.pathname === '/no-devices')) {
      const headers: Record<string, string> = { 'Content-Type': 'text/html; charset=utf-8' };
      // A page that may use neither microphone nor camera (as an iframe without allow="microphone").
      if (url.pathname === '/no-devices') headers['Permissions-Policy'] = 'microphone=(), camera=(), display-capture=()';
      res.writeHead(200, headers).end(html);
      return;
    }
    if (req.method === 'POST' && url.pathname === '/token') {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void (async () => {
          const raw = Buffer.concat(chunks).toString();
          let body: unknown = raw;
          try {
            body = JSON.parse(raw);
          } catch {
            // recorded as text
          }
          site.requests.push({ contentType: req.headers['content-type'], body });
          const minted = await fetch(`${serviceUrl}/api/v1/realtime/sessions`, {
            method: 'POST',
            headers: { Authorization: `Bearer ${site.apiKey}`, 'Content-Type': 'application/json' },
            body: raw,
          });
          const answer = (await minted.json()) as Record<string, unknown>;
          if (minted.ok && site.afterMint) await site.afterMint();
          if (minted.ok && site.mode === 'no_ws_url') delete answer.ws_url;
          if (minted.ok && site.mode === 'wrong_token') answer.ws_url = String(answer.ws_url).replace(/token=[^&]+/, `token=rts_${'x'.repeat(43)}`);
          res.writeHead(minted.status, { 'Content-Type': 'application/json' }).end(JSON.stringify(answer));
        })().catch((err: unknown) => res.writeHead(502, { 'Content-Type': 'text/plain' }).end(String(err)));
      });
      return;
    }
    res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return Object.assign(site, {
    origin,
    tokenUrl: `${origin}/token`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

/** A URL on 127.0.0.1 where nothing listens (a token endpoint that is down). */
export async function deadUrl(pathname: string): Promise<string> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return `http://127.0.0.1:${port}${pathname}`;
}

export interface PageEvent {
  e: string;
  v: unknown;
  at: number;
}

export interface SentFrame {
  mime_type: string;
  bytes: Buffer;
  at: number;
}

export interface CustomerPage {
  page: Page;
  /** Every frame the page sent on any WebSocket, as the browser's network stack saw it. */
  sent: SentFrame[];
  create(opts: Record<string, unknown>): Promise<number>;
  start(i: number): Promise<Record<string, unknown>>;
  /** Starts session i from a click on the page's button (a user gesture). */
  clickToStart(i: number): Promise<Record<string, unknown>>;
  events(i: number): Promise<PageEvent[]>;
  /** Polls the events of session i until `pred` finds one. */
  waitForEvent(i: number, pred: (ev: PageEvent) => boolean, timeoutMs?: number, what?: string): Promise<PageEvent>;
  call<T>(method: string, ...args: unknown[]): Promise<T>;
}

export async function openCustomerPage(browser: Browser, site: CustomerSite, pathname = '/'): Promise<CustomerPage> {
  const page = await browser.newPage();
  const sent: SentFrame[] = [];
  page.on('websocket', (ws: PageSocket) => {
    ws.on('framesent', (f) => {
      if (typeof f.payload !== 'string') return;
      const m = JSON.parse(f.payload) as { mime_type: string; data: string };
      sent.push({ mime_type: m.mime_type, bytes: Buffer.from(m.data, 'base64'), at: Date.now() });
    });
  });
  await page.goto(`${site.origin}${pathname}`);
  await page.waitForFunction(() => (window as unknown as { vasReady?: boolean }).vasReady === true, undefined, { timeout: 10_000 });
  const call = <T>(method: string, ...args: unknown[]): Promise<T> =>
    page.evaluate(([m, a]) => (window as unknown as { vas: Record<string, (...x: unknown[]) => unknown> }).vas[m as string](...(a as unknown[])), [
      method,
      args,
    ] as const) as Promise<T>;
  const cp: CustomerPage = {
    page,
    sent,
    call,
    create: (opts) => call<number>('create', opts),
    start: (i) => call('start', i),
    async clickToStart(i) {
      await call('startOnClick', i);
      await page.click('#talk');
      return page.evaluate(() => (window as unknown as { vasStarted: Promise<Record<string, unknown>> }).vasStarted);
    },
    events: (i) => call<PageEvent[]>('events', i),
    async waitForEvent(i, pred, timeoutMs = 10_000, what = 'event') {
      const deadline = Date.now() + patient(timeoutMs);
      for (;;) {
        const events = await cp.events(i);
        const found = events.find(pred);
        if (found) return found;
        if (Date.now() > deadline) {
          const seen = events
            .filter((e) => e.e !== 'audio')
            .map((e) => `${e.e}:${JSON.stringify(e.v)}`)
            .join('\n  ');
          throw new Error(`timed out waiting for ${what}; events:\n  ${seen.slice(0, 4000)}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
  return cp;
}

/**
 * The serving rules of a bundle under /sdk/: one ES module as JavaScript with nothing else to import,
 * loadable by any origin, cacheable and revalidated by ETag (304 for the same, weak or listed tag),
 * under its gzipped size budget. Returns the body.
 */
export async function assertServedBundle(serviceUrl: string, urlPath: string, bundleFile: string, gzipBudget: number): Promise<string> {
  const res = await fetch(`${serviceUrl}${urlPath}`, { headers: { Origin: 'https://shop.example' } });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/javascript; charset=utf-8');
  assert.equal(res.headers.get('access-control-allow-origin'), '*');
  assert.equal(res.headers.get('cross-origin-resource-policy'), 'cross-origin');
  assert.equal(res.headers.get('cache-control'), 'public, max-age=300');
  const etag = res.headers.get('etag');
  assert.match(etag ?? '', /^"[0-9a-f]{32}"$/);
  const body = await res.text();
  assert.equal(body, fs.readFileSync(bundleFile, 'utf8'), 'the built bundle');
  assert.doesNotMatch(body, /\bimport\s*[{*"']|\brequire\(/, 'one module: nothing else to load');
  const gzipped = gzipSync(body).length;
  assert.ok(gzipped < gzipBudget, `${gzipped} bytes gzipped (goal: under ${gzipBudget / 1024} kB)`);

  for (const inm of [etag!, `W/${etag}`, `"0000", ${etag}`]) {
    const again = await fetch(`${serviceUrl}${urlPath}`, { headers: { 'If-None-Match': inm } });
    assert.equal(again.status, 304, inm);
    assert.equal(await again.text(), '');
    assert.equal(again.headers.get('etag'), etag);
    assert.equal(again.headers.get('access-control-allow-origin'), '*');
    assert.equal(again.headers.get('cache-control'), 'public, max-age=300');
  }
  const changed = await fetch(`${serviceUrl}${urlPath}`, { headers: { 'If-None-Match': '"0123456789abcdef0123456789abcdef"' } });
  assert.equal(changed.status, 200);
  assert.equal(await changed.text(), body);
  return body;
}
