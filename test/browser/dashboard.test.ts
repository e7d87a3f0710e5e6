/**
 * The dashboard in real headless Chromium, against the real service: how its page, script and styles
 * are served; sign-up, logout and login; an API key created (shown once, then only its prefix) and
 * revoked; an agent created and edited (credentials write-only; a data schema and success criteria),
 * a SIP trunk added and one of its numbers bound to the agent, the do-not-call list kept (add, import,
 * find, remove),
 * and tried with the web widget on a dashboard-minted token; a CSV batch with a bad row watched until
 * it finishes, and one of its calls opened with its transcript and structured results; the usage page
 * (the last 30 days by day and agent, the limits with their use); the SIP trunk edited (only what
 * changed is sent; a change the service refuses is shown and stores nothing) and a call placed through
 * it from the calls page (provider sip, over real SIP and RTP to the sandbox's far end) and followed to
 * its transcript; a viewer who can read but not change.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { startTestService, type TestService } from '../helpers/service.js';
import { uniqueEmail } from '../helpers/fixtures.js';
import { bearer, waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, sandboxNumber } from '../helpers/calls.js';
import { freePort, LOOPBACK } from '../helpers/sipp.js';
import { launchChromium, writeWav } from '../helpers/browser.js';

let t: TestService;
let browser: Browser;
let page: Page;
let wav: string;
let tmp: string;
const email = uniqueEmail('dash');
const password = 'correct-horse-battery';
let agentId = '';
/** Every API request the dashboard made: method, path and the Authorization scheme's prefix (and a PATCH's body). */
const requests: Array<{ method: string; path: string; auth: string; body?: unknown }> = [];

before(async () => {
  // SIP on, so a call can be placed through a SIP trunk to the sandbox's SIP far end.
  const [sipPort, rtp] = [await freePort(), await freePort()];
  t = await startTestService({
    ...FAST_CALLS,
    VOICE_SANDBOX_MS_PER_CHAR: '20',
    SIP_PORT: String(sipPort),
    SIP_HOST: LOOPBACK,
    SIP_ADVERTISED_ADDRESS: LOOPBACK,
    SIP_RTP_PORT_MIN: String(rtp),
    SIP_RTP_PORT_MAX: String(rtp + 100),
  });
  wav = writeWav(Buffer.alloc(16000 * 2), 16000);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-dashboard-'));
  browser = await launchChromium([`--use-file-for-fake-audio-capture=${wav}%noloop`]);
  page = await browser.newPage();
  page.setDefaultTimeout(10_000);
  page.on('console', (m) => m.type() === 'error' && console.log('page:', m.text()));
  page.on('dialog', (d) => void d.accept());
  // Violations of the page's Content-Security-Policy (an init script is not subject to it).
  await page.addInitScript(() => {
    const w = window as unknown as { __violations: string[] };
    w.__violations = [];
    document.addEventListener('securitypolicyviolation', (e) => w.__violations.push(`${e.effectiveDirective} ${e.blockedURI}`));
  });
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (u.pathname.startsWith('/api/'))
      requests.push({
        method: r.method(),
        path: u.pathname,
        auth: (r.headers().authorization ?? '').slice(0, 10),
        ...(r.method() === 'PATCH' ? { body: r.postDataJSON() as unknown } : {}),
      });
  });
});
after(async () => {
  await browser?.close();
  await t?.close();
  if (wav) fs.rmSync(path.dirname(wav), { recursive: true, force: true });
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const main = () => page.locator('main');

/** Waits for a heading; on a timeout the page's error note (if any) says why. */
async function heading(name: string | RegExp): Promise<void> {
  await page
    .getByRole('heading', { name })
    .waitFor()
    .catch(async (err: unknown) => {
      const alerts = await page.getByRole('alert').allInnerTexts();
      throw new Error(`no heading ${name}${alerts.length ? `; the page says: ${alerts.join(' | ')}` : ''}`, { cause: err });
    });
}
const go = (hash: string) => page.goto(`${t.url}/dashboard#/${hash}`);

/** Logs in through the API (as the page would) and returns the session token, for checks made beside the page. */
async function apiSession(): Promise<string> {
  const res = await t.http.post('/api/v1/auth/login').send({ email, password });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.session_token as string;
}

describe('dashboard', () => {
  it('serves its page with a strict CSP, and its script and styles revalidated by ETag', async () => {
    const res = await fetch(`${t.url}/dashboard`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.equal(res.headers.get('cache-control'), 'no-cache');
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /script-src 'self' blob:;/);
    assert.match(csp, /frame-ancestors 'none'/);
    const html = await res.text();
    assert.match(html, /<script type="module" src="\/dashboard\/app\.js"><\/script>/);
    assert.doesNotMatch(html, /<script>|<script type="module">/, 'no inline script');

    for (const [file, type] of [
      ['app.js', 'text/javascript; charset=utf-8'],
      ['app.css', 'text/css; charset=utf-8'],
    ]) {
      const asset = await fetch(`${t.url}/dashboard/${file}`);
      assert.equal(asset.status, 200, file);
      assert.equal(asset.headers.get('content-type'), type);
      assert.equal(asset.headers.get('access-control-allow-origin'), null, 'for the dashboard page only');
      const etag = asset.headers.get('etag')!;
      assert.equal((await asset.text()).length > 1000, true);
      const again = await fetch(`${t.url}/dashboard/${file}`, { headers: { 'If-None-Match': etag } });
      assert.equal(again.status, 304);
    }
  });

  it('signs up a workspace, logs out and logs back in; a wrong password is answered on the page', async () => {
    await go('signup');
    await page.getByLabel('Workspace name').fill('Dental Group');
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign up' }).click();
    await heading('Agents');
    const header = await page.locator('header').innerText();
    assert.ok(header.includes(`Dental Group · ${email}`) && /\bowner\b/.test(header), header);

    await page.getByRole('button', { name: 'Log out' }).click();
    await heading('Log in');
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill('not-the-password');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('alert').filter({ hasText: 'Incorrect email or password.' }).waitFor();
    assert.match(await page.getByRole('alert').innerText(), /invalid_credentials/);

    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await heading('Agents');
    const authed = requests.filter((r) => !r.path.startsWith('/api/v1/auth/'));
    assert.ok(authed.length > 0 && authed.every((r) => r.auth === 'Bearer ds_'), 'every API call carries the dashboard session');
  });

  it('creates an API key, shows it once, and revokes it', async () => {
    await go('keys');
    await page.getByLabel('Key name').fill('CI pipeline');
    await page.getByRole('button', { name: 'Create key' }).click();
    const shown = page.getByLabel('New API key');
    await shown.waitFor();
    const key = await shown.inputValue();
    assert.match(key, /^ek_/);
    assert.equal((await t.http.get('/api/v1/agents').set(bearer(key))).status, 200, 'the shown key works');

    await page.getByRole('button', { name: 'Done' }).click();
    await page.reload();
    const row = page.locator('tr', { hasText: 'CI pipeline' });
    await row.waitFor();
    assert.ok(!(await page.content()).includes(key), 'the full key is not shown again');
    assert.match(await row.innerText(), /active/);

    await row.getByRole('button', { name: 'Revoke CI pipeline' }).click();
    await row.getByText('revoked').waitFor();
    assert.equal((await t.http.get('/api/v1/agents').set(bearer(key))).status, 401, 'the revoked key is refused');
  });

  it('registers a webhook for the events it picks: the two default kinds checked, the live ones on request', async () => {
    await go('webhooks');
    assert.equal(await page.getByLabel('call.completed').isChecked(), true);
    assert.equal(await page.getByLabel('call.transcript').isChecked(), false, 'live kinds are opt-in');
    await page.getByLabel('Endpoint URL').fill('http://127.0.0.1:9/hooks/live');
    await page.getByLabel('batch.completed').uncheck();
    await page.getByLabel('call.transcript').check();
    await page.getByRole('button', { name: 'Register webhook' }).click();
    const row = page.locator('tr', { hasText: 'http://127.0.0.1:9/hooks/live' });
    await row.waitFor();
    const session = (await t.http.post('/api/v1/auth/login').send({ email, password })).body.session_token as string;
    const hooks = await t.http.get('/api/v1/webhooks').set(bearer(session));
    const hook = hooks.body.data.find((h: { url: string }) => h.url === 'http://127.0.0.1:9/hooks/live');
    assert.deepEqual([...hook.events].sort(), ['call.completed', 'call.transcript']);
    assert.match(await row.innerText(), /call\.completed, call\.transcript/);
  });

  it('creates an agent and edits its fields; credentials are write-only', async () => {
    await go('agents');
    await page.getByLabel("New agent's name").fill('Front desk');
    await page.getByRole('button', { name: 'Create agent' }).click();
    await heading('Front desk');
    agentId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]!);
    assert.match(agentId, /^agt_/);

    const authToken = 'a'.repeat(32);
    await page.getByLabel('Instruction').fill('You are the front desk of Acme Dental. Greet {{name}}.');
    await page.getByLabel('First message').fill('Hello {{name}}! How can I help you today?');
    await page.getByLabel('Placeholders').fill('name=there');
    await page.getByLabel('Language code').fill('en-US');
    await page.getByLabel('Model', { exact: true }).selectOption('gemini-2.0-flash-live-001');
    await page.getByLabel('Analysis model').selectOption('gemini-2.5-pro');
    await page.getByLabel('Voice', { exact: true }).selectOption('Kore');
    await page.getByLabel('The agent may end the conversation').check();
    await page.getByLabel('Voicemail handling').selectOption('configured');
    await page.getByLabel('Detect answering machines').check();
    await page.getByLabel('Message after the beep').fill('Please call us back.');
    await page.getByLabel('Camera').uncheck();
    await page.getByLabel('Data schema').fill('{"type": "object", "properties": {"appointment": {"type": ["string", "null"]}}}');
    await page.getByLabel('Success criteria').fill('The caller says "appointment".');
    await page.getByLabel('Interruptions').selectOption('after_first_message');
    await page.getByLabel('Idle time (ms)').fill('8000');
    await page.getByLabel('Reminders', { exact: true }).fill('Are you still there?\nHello?');
    await page.getByLabel('Goodbye before hanging up').fill('Goodbye for now.');
    const providerA = page.getByRole('group', { name: /^provider_a/ });
    await providerA.getByLabel('Account SID').fill(`AC${'0'.repeat(32)}`);
    await providerA.getByLabel('Auth token').fill(authToken);
    await providerA.getByLabel('Phone number').fill('+14155550100');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved:' }).waitFor();

    const session = await apiSession();
    const agent = (await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(session))).body;
    assert.equal(agent.instruction, 'You are the front desk of Acme Dental. Greet {{name}}.');
    assert.equal(agent.first_message, 'Hello {{name}}! How can I help you today?');
    assert.deepEqual(agent.variable_placeholders, { name: 'there' });
    assert.equal(agent.language_code, 'en-US');
    assert.deepEqual(
      [agent.model, agent.voice_id, agent.analysis_model],
      ['gemini-2.0-flash-live-001', 'Kore', 'gemini-2.5-pro'],
      'chosen from the voice catalogue',
    );
    assert.equal(agent.language, null, 'an untouched field stays as it was');
    assert.equal(agent.can_end_conversation, true);
    assert.deepEqual(agent.voicemail_config, { enabled: true, message: 'Please call us back.', detection_timeout_seconds: null, retry_on_voicemail: true });
    assert.deepEqual(agent.realtime, { enable_webcam: false, enable_screen_share: true });
    assert.deepEqual(agent.telephony.provider_a, { configured: true, phone_number: '+14155550100', inbound_enabled: false });
    assert.deepEqual(agent.conversation, {
      turn_detection: null,
      interruptions: 'after_first_message',
      idle: { idle_ms: 8000, reminders: ['Are you still there?', 'Hello?'], max_reminders: 2, goodbye_message: 'Goodbye for now.' },
      max_duration_seconds: null,
    });
    assert.deepEqual(agent.analysis, {
      schema: { type: 'object', properties: { appointment: { type: ['string', 'null'] } } },
      success_criteria: 'The caller says "appointment".',
    });

    // Saved again with nothing typed in the credential boxes: the stored credentials stay.
    await page.getByLabel('Name', { exact: true }).fill('Front desk (Acme)');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved: name.' }).waitFor();
    assert.ok(!(await page.content()).includes(authToken), 'the auth token is never on the page');
    assert.equal(await providerA.getByLabel('Auth token').inputValue(), '');
    const again = (await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(session))).body;
    assert.equal(again.name, 'Front desk (Acme)');
    assert.equal(again.telephony.provider_a.configured, true);

    // A field the service refuses: its message, code and field on the page; nothing stored.
    await page.getByLabel('Transfer to').fill('555-0100');
    await page.getByRole('button', { name: 'Save changes' }).click();
    const refusal = page.getByRole('alert');
    await refusal.waitFor();
    assert.match(await refusal.innerText(), /transfer_phone_number/);
    assert.equal((await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(session))).body.transfer_phone_number, null);
  });

  it('adds a SIP trunk (passwords write-only) and binds the agent to one of its numbers', async () => {
    const trunkPassword = 'trunk-Secret-0d5e19';
    await go('sip-trunks');
    const form = page.getByRole('form', { name: 'New SIP trunk' });
    await form.getByLabel('Name', { exact: true }).fill('Acme PBX');
    await form.getByLabel('Allowed sources').fill('203.0.113.0/24\n198.51.100.7');
    await form.getByLabel('Numbers it delivers').fill('+15553000001, +15553000002');
    await form
      .getByRole('group', { name: /^Inbound/ })
      .getByLabel('Digest username')
      .fill('acme-pbx');
    await form
      .getByRole('group', { name: /^Inbound/ })
      .getByLabel('Digest password')
      .fill(trunkPassword);
    await form.getByLabel('Host', { exact: true }).fill('sip.carrier.example');
    await form.getByLabel('Transport').selectOption('tls');
    await page.getByRole('button', { name: 'Add SIP trunk' }).click();
    const row = page.locator('tr', { hasText: 'Acme PBX' });
    await row.waitFor();
    assert.match(await row.innerText(), /198\.51\.100\.7, 203\.0\.113\.0\/24/);
    assert.match(await row.innerText(), /sip\.carrier\.example:5061 \(tls\)/);
    assert.ok(!(await page.content()).includes(trunkPassword), 'the password is never on the page');

    await go(`agents/${agentId}`);
    await page.getByLabel('Inbound number').selectOption({ label: '+15553000002 (Acme PBX)' });
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved: sip_config.' }).waitFor();
    const session = await apiSession();
    const agent = (await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(session))).body;
    assert.equal(agent.telephony.sip.phone_number, '+15553000002');
    assert.match(agent.telephony.sip.trunk_id, /^trk_/);
  });

  it('keeps the do-not-call list: adds a number, imports a CSV with its row report, finds and removes an entry; a refusal is shown', async () => {
    await go('do-not-call');
    await heading('Do not call');
    await page.getByText('No numbers on the list.').waitFor();
    const addForm = page.getByRole('form', { name: 'Add a number' });
    await addForm.getByLabel('Number', { exact: true }).fill('+1 (415) 555-0170');
    await addForm.getByRole('button', { name: 'Add to the list' }).click();
    await page.getByRole('status').filter({ hasText: '+14155550170 is on the list.' }).waitFor();
    await page.locator('tr', { hasText: '+14155550170' }).waitFor();

    const csv = path.join(tmp, 'do-not-call.csv');
    fs.writeFileSync(csv, 'number,name\n+14155550171,Ada\n+14155550170,Grace\nnot a number,Linus\n');
    await page.getByLabel('CSV file', { exact: true }).setInputFiles(csv);
    await page.getByRole('button', { name: 'Import' }).click();
    const report = page.getByRole('status').filter({ hasText: 'rows read' });
    await report.waitFor();
    assert.match(await report.innerText(), /3 rows read: 1 listed, 1 already on the list, 1 skipped\./);
    assert.match(await report.innerText(), /Row 4: 'not a number' is not an E\.164 number/);
    await page.locator('tr', { hasText: '+14155550171' }).waitFor();
    assert.match(await page.locator('tr', { hasText: '+14155550171' }).innerText(), /imported/);

    await addForm.getByLabel('Number', { exact: true }).fill('555');
    await addForm.getByRole('button', { name: 'Add to the list' }).click();
    const refusal = page.getByRole('alert');
    await refusal.waitFor();
    assert.match(await refusal.innerText(), /invalid_phone_number/);

    await page.getByLabel('Find', { exact: true }).fill('+14155550170');
    await page.getByRole('button', { name: 'Find', exact: true }).click();
    await waitFor(async () => (await page.locator('tbody tr').count()) === 1 && (await page.locator('tbody tr').innerText()).includes('+14155550170'));
    await page.getByRole('button', { name: 'Remove +14155550170' }).click();
    await page.getByText('That number is not on the list.').waitFor();
    const session = await apiSession();
    const left = (await t.http.get('/api/v1/do-not-call').set(bearer(session))).body.data.map((e: { number: string }) => e.number);
    assert.deepEqual(left, ['+14155550171']);
  });

  it('tries the agent with the web widget: controls follow its settings, tokens come from the dashboard session', async () => {
    await go(`agents/${agentId}`);
    await page.getByRole('button', { name: 'Talk to this agent' }).click();
    const widget = page.locator('voice-agent-widget');
    await widget.waitFor();
    await page.waitForFunction(
      () => {
        const w = document.querySelector('voice-agent-widget') as (HTMLElement & { profileStatus?: string }) | null;
        return w?.profileStatus === 'ready';
      },
      undefined,
      { timeout: 10_000 },
    );
    const ids = await page.evaluate(() => [...document.querySelector('voice-agent-widget')!.shadowRoot!.querySelectorAll('button')].map((b) => b.id));
    assert.deepEqual(ids, ['send', 'start', 'mute', 'screen'], 'camera off, screen sharing on');

    await widget.getByRole('button', { name: 'Start conversation' }).click();
    await page
      .waitForFunction(() => (document.querySelector('voice-agent-widget') as HTMLElement & { state: string }).state === 'live', undefined, { timeout: 15_000 })
      .catch(async (err: unknown) => {
        const status = await page.evaluate(() => document.querySelector('voice-agent-widget')!.shadowRoot!.getElementById('status')!.textContent);
        throw new Error(`the widget did not go live: ${status}`, { cause: err });
      });
    assert.deepEqual(
      await page.evaluate(() => (window as unknown as { __violations: string[] }).__violations),
      [],
      "the widget's WebSocket and microphone worklet are within the dashboard's policy",
    );
    const mint = requests.filter((r) => r.path === '/api/v1/realtime/sessions').at(-1);
    assert.deepEqual(mint, { method: 'POST', path: '/api/v1/realtime/sessions', auth: 'Bearer ds_' });
    await waitFor(
      () =>
        page.evaluate(() =>
          [...document.querySelector('voice-agent-widget')!.shadowRoot!.getElementById('log')!.children].some((e) =>
            (e.textContent ?? '').includes('Hello there! How can I help you today?'),
          ),
        ),
      15_000,
      "the agent's first message in the widget",
    );
    await page.evaluate(() => (document.querySelector('voice-agent-widget') as HTMLElement & { stop(): Promise<void> }).stop());
  });

  it('uploads a CSV batch with a bad row, shows the skipped row, and follows it until it finishes', async () => {
    const csv = path.join(tmp, 'reminders.csv');
    fs.writeFileSync(csv, 'to_number,name\n+14155550002,Ada\nnot-a-number,Grace\n+14155555000,Linus\n');
    await go('batches');
    await page.getByLabel('CSV file', { exact: true }).setInputFiles(csv);
    await page.getByLabel('Agent', { exact: true }).selectOption(agentId);
    await page.getByLabel('Batch name').fill('November reminders');
    // The agent is bound to a SIP trunk too (above): the provider is named.
    await page.getByLabel('Provider', { exact: true }).selectOption('provider_a');
    await page.getByRole('button', { name: 'Upload and start' }).click();
    await heading('November reminders');

    const skipped = page.getByRole('status').filter({ hasText: '1 row was skipped' });
    await skipped.waitFor();
    assert.match(await skipped.innerText(), /Line 3, column to_number/);
    await page
      .locator('.status', { hasText: /^completed$/ })
      .first()
      .waitFor({ timeout: 60_000 });
    assert.equal(await page.locator('progress').getAttribute('value'), '2');
    assert.match(await page.getByText(/numbers finished/).innerText(), /2 of 2 numbers finished/);
    const row = page.locator('tr', { hasText: '+14155555000' });
    assert.match(await row.innerText(), /completed/);

    // The call the person answered: its transcript and analysis.
    await row.getByRole('link').click();
    await heading(/^Call call_/);
    await page.locator('.transcript li').first().waitFor();
    assert.match(await page.locator('.transcript').innerText(), /Hello Linus! How can I help you today\?/);
    await heading('Analysis');
    // The agent's analysis setting: the data the sandbox model heard (nobody stated an appointment) and the judgement.
    await heading('Results');
    const results = page.locator('dl.facts').last();
    assert.match(await results.innerText(), /"appointment": null/);
    assert.match(await results.innerText(), /met — The caller said "appointment"\./);
  });

  it('shows the usage of the last 30 days (the batch calls and the widget session) and the limits with their use', async () => {
    const session = await apiSession();
    // The widget's session is billed once it is recorded; the batch's two calls ended above.
    const usage = await waitFor(
      async () => {
        const res = await t.http.get('/api/v1/usage').set(bearer(session));
        assert.equal(res.status, 200, JSON.stringify(res.body));
        return res.body.totals.web.conversations === 1 ? res.body : null;
      },
      15_000,
      "the widget session's usage",
    );
    // The busy number (…0002) is a conversation of 0 minutes; the answered one 1 minute; the widget session 1.
    assert.deepEqual([usage.totals.phone.conversations, usage.totals.phone.minutes], [2, 1]);
    assert.deepEqual([usage.totals.web.conversations, usage.totals.web.minutes], [1, 1]);

    await go('agents');
    // The agents' names come after the usage here, as they may on a slow network: the breakdown waits for them.
    const slowAgents = (url: URL) => url.pathname === '/api/v1/agents';
    await page.route(slowAgents, async (route) => {
      await new Promise((resolve) => setTimeout(resolve, 500));
      await route.continue();
    });
    await page.getByRole('navigation', { name: 'Dashboard' }).getByRole('link', { name: 'Usage' }).click();
    await heading('Usage and limits');
    const totals = page.getByRole('table', { name: 'Usage totals' });
    await totals.waitFor();
    const cells = async (table: string, row: string) =>
      (
        await page
          .getByRole('table', { name: table })
          .getByRole('row', { name: new RegExp(`^${row} `) })
          .getByRole('cell')
          .allInnerTexts()
      ).map((c) => c.trim());
    const money = (cents: number) => `$${(cents / 100).toFixed(2)}`;
    assert.deepEqual(await cells('Usage totals', 'Phone calls'), ['2', '1', money(usage.totals.phone.cost_cents)]);
    assert.deepEqual(await cells('Usage totals', 'Web sessions'), ['1', '1', money(usage.totals.web.cost_cents)]);
    assert.deepEqual(await cells('Usage totals', 'All'), ['3', '2', money(usage.totals.all.cost_cents)]);
    // By day: the day of the conversations (the browser's zone is the service's, UTC here), newest first.
    const days = page.getByRole('table', { name: 'Usage by day' });
    const today = usage.days.filter(
      (d: { phone: { conversations: number }; web: { conversations: number } }) => d.phone.conversations + d.web.conversations > 0,
    );
    assert.deepEqual(
      (await days.locator('tbody tr').first().getByRole('cell').allInnerTexts()).map((c) => c.trim()),
      [
        today.at(-1).date,
        String(today.at(-1).phone.conversations),
        String(today.at(-1).phone.minutes),
        String(today.at(-1).web.conversations),
        String(today.at(-1).web.minutes),
        money(today.at(-1).phone.cost_cents + today.at(-1).web.cost_cents),
      ],
    );
    assert.equal(
      await page
        .getByRole('img', { name: /^Billed minutes a day from / })
        .locator(':scope > span')
        .count(),
      30,
    );
    // By agent: the one agent, by name, with its calls and its session.
    const agentRow = page.getByRole('table', { name: 'Usage by agent' }).locator('tbody tr');
    assert.equal(await agentRow.count(), 1);
    assert.deepEqual(
      (await agentRow.getByRole('cell').allInnerTexts()).map((c) => c.trim().split('\n')[0]),
      ['Front desk (Acme)', '2', '1', '1', '1', money(usage.totals.all.cost_cents)],
    );
    await page.unroute(slowAgents);

    // Limits: nothing live now; the credit after those charges; the two outbound calls of today.
    const limits = page.getByRole('table', { name: 'Limits' });
    assert.match(await limits.getByRole('row', { name: /^Concurrent conversations/ }).innerText(), /0 live \(0 phone calls, 0 web sessions\)\s+5 at once/);
    assert.match(
      await limits.getByRole('row', { name: /^Credit/ }).innerText(),
      new RegExp(`\\$0\\.00 held by live conversations\\s+\\${money(1000 - usage.totals.all.cost_cents)} balance`),
    );
    assert.match(await limits.getByRole('row', { name: /^Plan minutes \(trial\)/ }).innerText(), /600 a month, [\d.]+ left/);
    assert.match(await limits.getByRole('row', { name: /^Outbound calls today/ }).innerText(), /2 placed\s+1000 a day \(UTC\)/);
    assert.match(await limits.getByRole('row', { name: /^Web sessions created/ }).innerText(), /1 in the last hour, 1 in the last day/);
    assert.match(await limits.getByRole('row', { name: /^Destinations/ }).innerText(), /every country/);
    assert.ok(requests.some((r) => r.path === '/api/v1/usage' && r.auth === 'Bearer ds_'));
    assert.ok(requests.some((r) => r.path === '/api/v1/limits' && r.auth === 'Bearer ds_'));
  });

  it('edits the SIP trunk: only what changed is sent, a refused change stores nothing; then places a call through it', async () => {
    const session = await apiSession();
    const trunkOf = async () => {
      const list = await t.http.get('/api/v1/sip-trunks').set(bearer(session));
      assert.equal(list.status, 200, JSON.stringify(list.body));
      return list.body.data.find((x: { name: string }) => x.name === 'Acme PBX');
    };
    const stored = await trunkOf();
    await go('sip-trunks');
    await page.locator('tr', { hasText: 'Acme PBX' }).getByRole('button', { name: 'Edit' }).click();
    const form = page.getByRole('form', { name: 'Edit SIP trunk Acme PBX' });
    assert.equal(await form.getByLabel('Name', { exact: true }).inputValue(), 'Acme PBX');
    assert.equal(await form.getByLabel('Numbers it delivers').inputValue(), '+15553000001\n+15553000002');
    assert.equal(await form.getByLabel('Host', { exact: true }).inputValue(), 'sip.carrier.example:5061');
    assert.equal(
      await form
        .getByRole('group', { name: /^Inbound/ })
        .getByLabel('Digest password')
        .inputValue(),
      '',
    );

    // Dropping the number the agent answers: refused on the page, and the trunk is as it was.
    await form.getByLabel('Numbers it delivers').fill('+15553000001');
    await form.getByRole('button', { name: 'Save trunk' }).click();
    const refusal = form.getByRole('alert');
    await refusal.waitFor();
    assert.match(await refusal.innerText(), /sip_number_in_use/);
    assert.deepEqual(await trunkOf(), stored);

    // Pointed at a carrier (the sandbox's SIP far end, over udp) with the inbound password rotated.
    const far = t.service.sandbox.carriers!.server.sip!;
    const rotated = 'rotated-Secret-7c41a2';
    await form.getByLabel('Numbers it delivers').fill('+15553000002\n+15553000001');
    await form.getByLabel('Host', { exact: true }).fill(`${far.host}:${far.port}`);
    await form.getByLabel('Transport').selectOption('udp');
    await form
      .getByRole('group', { name: /^Inbound/ })
      .getByLabel('Digest password')
      .fill(rotated);
    await form.getByRole('button', { name: 'Save trunk' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved Acme PBX: inbound, outbound.' }).waitFor();
    const patches = requests.filter((r) => r.method === 'PATCH' && r.path.startsWith('/api/v1/sip-trunks/'));
    assert.deepEqual(patches.at(-1)!.body, {
      inbound: { auth: { username: 'acme-pbx', password: rotated } },
      outbound: { host: `${far.host}:${far.port}`, transport: 'udp' },
    });
    const edited = await trunkOf();
    assert.deepEqual(edited.inbound, stored.inbound, 'the numbers and sources are as they were; the password is never shown');
    assert.equal(edited.outbound.host, `${far.host}:${far.port}`);
    assert.equal(edited.outbound.transport, 'udp');
    // The list is read again after the save: its row shows the new termination once that answer is in.
    await page
      .locator('tr', { hasText: 'Acme PBX' })
      .filter({ hasText: `${far.host}:${far.port} (udp)` })
      .waitFor();
    assert.ok(!(await page.content()).includes(rotated), 'the password is never on the page');

    // A call placed through it: the agent has provider_a too, so the carrier is chosen.
    await go('calls');
    const place = page.getByRole('form', { name: 'Place a call' });
    await place.getByLabel('Agent', { exact: true }).selectOption(agentId);
    await place.getByLabel('Number to call').fill(sandboxNumber());
    await place.getByLabel('Carrier').selectOption('sip');
    await place.getByRole('button', { name: 'Call' }).click();
    await heading(/^Call call_/);
    const callId = decodeURIComponent(new URL(page.url()).hash.split('/')[2]!);
    assert.match(await main().innerText(), /outbound via sip/);
    // The sandbox's person answers, speaks and hangs up: the call ends completed with their words.
    await page
      .locator('.status', { hasText: /^completed$/ })
      .first()
      .waitFor({ timeout: 60_000 });
    assert.match(await page.locator('.transcript').innerText(), /this is Sam\./);
    const call = (await t.http.get(`/api/v1/calls/${callId}`).set(bearer(session))).body;
    assert.deepEqual([call.provider, call.from_number, call.status], ['sip', '+15553000002', 'completed']);
  });

  it('a viewer reads everything and is offered no change', async () => {
    await go('members');
    const viewer = uniqueEmail('viewer');
    await page.getByLabel('Email').fill(viewer);
    await page.getByLabel('Initial password').fill(password);
    await page.getByLabel('Role').selectOption('viewer');
    await page.getByRole('button', { name: 'Add member' }).click();
    await page.locator('tr', { hasText: viewer }).waitFor();

    await page.getByRole('button', { name: 'Log out' }).click();
    // The members form has an Email field too: fill the login form only once it is there.
    await heading('Log in');
    await page.getByLabel('Email').fill(viewer);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await heading('Agents');
    await main().getByRole('link', { name: 'Front desk (Acme)' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Create agent' }).count(), 0);
    await main().getByRole('link', { name: 'Front desk (Acme)' }).click();
    await page.getByLabel('Instruction').waitFor();
    assert.equal(await page.getByLabel('Instruction').isDisabled(), true);
    assert.equal(await page.getByRole('button', { name: 'Save changes' }).count(), 0);
    await go('batches');
    await main().getByRole('link', { name: 'November reminders' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Upload and start' }).count(), 0);
    await go('do-not-call');
    await page.locator('tr', { hasText: '+14155550171' }).waitFor();
    assert.equal(await page.getByRole('button', { name: /^(Add to the list|Import|Remove)/ }).count(), 0);
  });
});
