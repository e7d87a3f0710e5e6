/**
 * `npm run screenshots`: pictures of the web widget and the dashboard for the docs (docs/screenshots/),
 * taken from the real thing. Starts the service in-process (on a fresh database of DATABASE_URL's server, or an embedded
 * PostgreSQL in a temporary directory), creates a workspace and an agent, serves a customer's page on
 * another origin that embeds the widget (its token endpoint adds the API key), and photographs the widget
 * in headless Chromium (Debian's chromium, or CHROMIUM_PATH): idle, then live with a transcript. Then
 * logs in to the dashboard and photographs its main pages: agents, an agent's settings, a new API key,
 * a finished CSV batch with a skipped row, one of its calls with transcript and analysis, and the
 * usage and limits page.
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { chromium } from 'playwright-core';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { startService, type RunningService } from '../src/service.js';
import { buildDocs } from './build-docs.js';
import { buildSdk } from './build-sdk.js';

const root = path.resolve(import.meta.dirname, '..');
const outDir = path.join(root, 'docs/screenshots');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

async function adminQuery(serverUrl: string, sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: serverUrl });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

/** A database of its own on DATABASE_URL's server (dropped afterwards), or none: the service then embeds PostgreSQL. */
async function scratchDatabase(): Promise<{ url?: string; drop(): Promise<void> }> {
  const server = process.env.DATABASE_URL;
  if (!server) return { drop: async () => undefined };
  const name = `vas_screenshots_${randomBytes(4).toString('hex')}`;
  await adminQuery(server, `create database "${name}"`);
  const url = new URL(server);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => adminQuery(server, `drop database if exists "${name}" with (force)`) };
}

async function api<T>(base: string, method: string, pathname: string, token: string | null, body?: unknown): Promise<T> {
  const res = await fetch(`${base}${pathname}`, {
    method,
    headers: { 'Content-Type': 'application/json', ...(token ? { Authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as T;
  if (!res.ok) throw new Error(`${method} ${pathname}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

function pageHtml(serviceUrl: string, agentId: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Bright Smile Dental</title>
<script type="module" src="${serviceUrl}/sdk/voice-agent-widget.js"></script>
<style>
  body { margin: 0; font-family: system-ui, sans-serif; background: #f3f5f8; }
  #shot { display: inline-block; padding: 24px; }
  voice-agent-widget { --vaw-log-height: 300px; }
</style></head>
<body><div id="shot"><voice-agent-widget agent-id="${agentId}" token-url="/token" user-id="visitor-screenshots"></voice-agent-widget></div></body></html>`;
}

/** The customer's site: the page, and a token endpoint that adds the API key (as the customer's server would). */
async function startSite(serviceUrl: string, apiKey: string, html: string): Promise<{ origin: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/') {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(html);
      return;
    }
    if (req.method === 'POST' && req.url === '/token') {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        fetch(`${serviceUrl}/api/v1/realtime/sessions`, {
          method: 'POST',
          headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
          body: Buffer.concat(chunks),
        })
          .then(async (r) => res.writeHead(r.status, { 'Content-Type': 'application/json' }).end(await r.text()))
          .catch((err: unknown) => res.writeHead(502).end(String(err)));
      });
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A WAV of silence: the fake microphone says nothing (its default beeps would be answered as speech). */
function silentWav(dir: string): string {
  const data = Buffer.alloc(16000 * 2);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0);
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVEfmt ', 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(16000, 24);
  header.writeUInt32LE(32000, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36);
  header.writeUInt32LE(data.length, 40);
  const file = path.join(dir, 'silence.wav');
  fs.writeFileSync(file, Buffer.concat([header, data]));
  return file;
}

/** The dashboard's main pages, logged in as the workspace's owner. Returns the files written. */
async function photographDashboard(
  browser: Awaited<ReturnType<typeof chromium.launch>>,
  base: string,
  owner: { email: string; password: string },
  agentId: string,
  tmp: string,
): Promise<string[]> {
  const page = await browser.newPage({ deviceScaleFactor: 1, viewport: { width: 1280, height: 860 } });
  page.on('dialog', (d) => void d.accept());
  const shot = async (name: string) => page.screenshot({ path: path.join(outDir, name), fullPage: true, animations: 'disabled' });
  await page.goto(`${base}/dashboard#/login`);
  await page.getByLabel('Email').fill(owner.email);
  await page.getByLabel('Password').fill(owner.password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('link', { name: 'Maya, Bright Smile Dental' }).waitFor();
  await shot('dashboard-agents.png');

  await page.getByRole('link', { name: 'Maya, Bright Smile Dental' }).click();
  await page.getByLabel('Instruction').waitFor();
  await shot('dashboard-agent.png');

  await page.goto(`${base}/dashboard#/keys`);
  await page.getByLabel('Key name').fill('Production server');
  await page.getByRole('button', { name: 'Create key' }).click();
  await page.getByLabel('New API key').waitFor();
  await shot('dashboard-keys.png');

  const csv = path.join(tmp, 'recalls.csv');
  fs.writeFileSync(csv, 'to_number,name\n+14155551234,Ada\n+14155550002,Grace\nnot-a-number,Linus\n+14155550003,Edsger\n');
  await page.goto(`${base}/dashboard#/batches`);
  await page.getByLabel('CSV file', { exact: true }).setInputFiles(csv);
  await page.getByLabel('Agent', { exact: true }).selectOption(agentId);
  await page.getByLabel('Batch name').fill('December recalls');
  await page.getByRole('button', { name: 'Upload and start' }).click();
  await page.getByRole('heading', { name: 'December recalls' }).waitFor();
  await page
    .getByText('3 of 3 numbers finished')
    .waitFor({ timeout: 90_000 })
    .catch(async (err: unknown) => {
      await shot('failed.png');
      throw err;
    });
  await shot('dashboard-batch.png');

  await page.locator('tr', { hasText: '+14155551234' }).getByRole('link').click();
  await page.getByRole('heading', { name: 'Analysis' }).waitFor();
  await page.locator('.transcript li').nth(2).waitFor();
  await shot('dashboard-call.png');

  // Usage and limits, once the batch's calls are billed.
  await page.goto(`${base}/dashboard#/usage`);
  await page.getByRole('table', { name: 'Usage by agent' }).locator('tbody tr a').first().waitFor();
  await shot('dashboard-usage.png');
  await page.close();
  return ['dashboard-agents.png', 'dashboard-agent.png', 'dashboard-keys.png', 'dashboard-batch.png', 'dashboard-call.png', 'dashboard-usage.png'];
}

async function main(): Promise<void> {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium) or set CHROMIUM_PATH`);
  buildDocs({ onlyStale: true });
  await buildSdk({ onlyStale: true, quiet: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-screenshots-'));
  // Run as root, the embedded PostgreSQL runs as its own user, which must reach its data directory in here.
  fs.chmodSync(tmp, 0o755);
  const db = await scratchDatabase();
  let service: RunningService | undefined;
  let site: { origin: string; close(): Promise<void> } | undefined;
  let browser: Awaited<ReturnType<typeof chromium.launch>> | undefined;
  try {
    const config = loadConfig({
      NODE_ENV: 'development',
      ...(db.url ? { DATABASE_URL: db.url } : {}),
      DATA_DIR: tmp,
      EMBEDDED_PG_PORT: String(54400 + Math.floor(Math.random() * 500)),
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      VOICE_SANDBOX_MS_PER_CHAR: '15',
      SANDBOX_CARRIERS_SPEED: '4',
      SANDBOX_CARRIERS_RING_MS: '40',
      VOICE_SANDBOX_SPEED: '4',
      VOICE_SANDBOX_END_OF_TURN_MS: '500',
      CALL_RING_TIMEOUT_S: '5',
      JOBS_POLL_INTERVAL_MS: '200',
    });
    service = await startService(config, createLogger(config.LOG_LEVEL));
    const base = service.url;

    const owner = { email: `screenshots-${randomBytes(4).toString('hex')}@example.com`, password: 'correct-horse-battery' };
    const signup = await api<{ session_token: string }>(base, 'POST', '/api/v1/auth/signup', null, { ...owner, workspace_name: 'Bright Smile Dental' });
    const { key } = await api<{ key: string }>(base, 'POST', '/api/v1/keys', signup.session_token, { name: 'screenshots' });
    const { agent_id: agentId } = await api<{ agent_id: string }>(base, 'POST', '/api/v1/agents', key, {
      name: 'Maya, Bright Smile Dental',
      instruction: 'You are Maya, the receptionist of Bright Smile Dental.',
      first_message: 'Hi, this is Maya from Bright Smile Dental. How can I help you today?',
      realtime: { enable_webcam: true, enable_screen_share: false },
      provider_a_config: { account_sid: `AC${randomBytes(16).toString('hex')}`, auth_token: randomBytes(16).toString('hex'), phone_number: '+14155550100' },
    });
    await api(base, 'POST', '/api/v1/agents', key, { name: 'Recall reminders', first_message: 'Hi {{name}}, this is Bright Smile Dental.' });

    site = await startSite(base, key, pageHtml(base, agentId));
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--use-fake-device-for-media-stream',
        '--use-fake-ui-for-media-stream',
        `--use-file-for-fake-audio-capture=${silentWav(tmp)}%noloop`,
      ],
    });
    const page = await browser.newPage({ deviceScaleFactor: 2, viewport: { width: 480, height: 720 } });
    await page.goto(`${site.origin}/`);
    const widget = page.locator('voice-agent-widget');
    await widget.getByRole('button', { name: 'Camera' }).waitFor();
    fs.mkdirSync(outDir, { recursive: true });
    const shot = page.locator('#shot');
    await shot.screenshot({ path: path.join(outDir, 'widget-idle.png'), animations: 'disabled' });

    await widget.getByRole('button', { name: 'Start conversation' }).click();
    await widget.getByRole('button', { name: 'End conversation' }).waitFor();
    const log = widget.getByRole('log', { name: 'Conversation' });
    await log.getByText('How can I help you today?').waitFor({ timeout: 15_000 });
    const box = widget.getByRole('textbox', { name: 'Message to the agent' });
    await box.fill('Do you have an appointment free on Saturday morning?');
    await box.press('Enter');
    await log.getByText('I heard:').waitFor({ timeout: 15_000 });
    await box.fill('And how much is a check-up');
    await shot.screenshot({ path: path.join(outDir, 'widget-live.png'), animations: 'disabled' });
    await widget.getByRole('button', { name: 'End conversation' }).click();
    await widget.getByRole('button', { name: 'Start conversation' }).waitFor();

    const dashboardShots = await photographDashboard(browser, base, owner, agentId, tmp);
    for (const name of ['widget-idle.png', 'widget-live.png', ...dashboardShots]) console.log(path.relative(root, path.join(outDir, name)));
  } finally {
    await browser?.close();
    await site?.close();
    await service?.close();
    await db.drop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
