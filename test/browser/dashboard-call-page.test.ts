/**
 * A call's page in the dashboard (real headless Chromium, real service, sandbox calls): keypad keys in
 * the transcript, the call's recording, and a live call followed through its event stream.
 * - The keys the agent pressed with `send_dtmf` at the sandbox phone menu appear as key caps in the
 *   agent's turn, marked apart from speech.
 * - The player loads the recording's WAV through its signed link alone (the page's requests for it
 *   carry no API key), Chromium decodes it to the recorded length, and deleting it removes the player.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { FAST_CALLS, createPhoneAgent, getCall, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
import { launchChromium } from '../helpers/browser.js';

let t: TestService;
let tn: Tenant;
let browser: Browser;
let page: Page;

before(async () => {
  t = await startTestService(FAST_CALLS);
  tn = await tenant(t);
  browser = await launchChromium();
  page = await browser.newPage();
  page.setDefaultTimeout(10_000);
  page.on('console', (m) => m.type() === 'error' && console.log('page:', m.text()));
  await page.goto(`${t.url}/dashboard#/login`);
  await page.getByLabel('Email').fill(tn.email);
  await page.getByLabel('Password').fill(tn.password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Agents' }).waitFor();
});

after(async () => {
  await browser?.close();
  await t?.close();
});

describe('dashboard: keypad keys in the transcript', () => {
  it("shows the keys the agent pressed at the phone menu as key caps in the agent's turn", async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_b', { instruction: 'You are the scheduling assistant of Acme Dental, calling a clinic.' });
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0005') });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const call = await waitForCall(t, tn, res.body.call_id);
    assert.ok(call.transcript.some((e: { dtmf?: string }) => e.dtmf === '1#'));

    await page.goto(`${t.url}/dashboard#/calls/${call.call_id}`);
    const keys = page.locator('.transcript li.turn-keys');
    await keys.first().waitFor();
    assert.equal(await keys.count(), 1);
    assert.match(await keys.innerText(), /^Agent\s+pressed\s*1\s*#$/);
    assert.deepEqual(await keys.locator('kbd').allInnerTexts(), ['1', '#']);
    assert.equal(await keys.locator('.keys').getAttribute('aria-label'), 'pressed keys 1#');
    assert.match(await page.locator('.transcript').innerText(), /Front desk, this is Sam speaking\./);
  });
});

describe('dashboard: a call recording', () => {
  it('plays the recording by its signed link, and deletes it', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { recording: { enabled: true } });
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber() });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const call = await waitForCall(t, tn, res.body.call_id);
    assert.equal(call.recording?.status, 'completed', JSON.stringify(call.recording));

    const audioRequests: Array<{ url: string; authorization: string | undefined }> = [];
    page.on('request', (r) => {
      if (r.url().includes('/recording/download')) audioRequests.push({ url: r.url(), authorization: r.headers().authorization });
    });
    await page.goto(`${t.url}/dashboard#/calls/${call.call_id}`);
    await page.getByRole('heading', { name: 'Recording' }).waitFor();
    const duration = await page.locator('audio.recording').evaluate(
      (el: HTMLAudioElement) =>
        new Promise<number>((resolve, reject) => {
          el.addEventListener('loadedmetadata', () => resolve(el.duration));
          el.addEventListener('error', () => reject(new Error(`media error ${el.error?.code}: ${el.error?.message}`)));
          el.load();
        }),
    );
    assert.ok(Math.abs(duration - call.recording.duration) < 0.05, `player ${duration} s, record ${call.recording.duration} s`);
    assert.ok(audioRequests.length > 0);
    assert.ok(
      audioRequests.every((r) => r.authorization === undefined),
      'the signed link needs no key',
    );
    assert.match(await page.locator('.recording + p').innerText(), /caller on the left, agent on the right/);

    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Delete recording' }).click();
    await page.getByRole('heading', { name: 'Recording' }).waitFor({ state: 'detached' });
    const deleted = await getCall(t, tn, call.call_id);
    assert.equal(deleted.recording, null);
    assert.equal(deleted.recording_url, null);
  });
});

describe('dashboard: a live call', () => {
  it('follows the call through its event stream as it is spoken, then shows the record', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber() });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const callId = res.body.call_id as string;
    await page.goto(`${t.url}/dashboard#/calls/${callId}`);
    // The live transcript exists only while the record says the call is live: a caller's finished
    // utterance in it came through the stream, before the call ended.
    await page.locator('.transcript.live li.turn-user').first().waitFor({ timeout: 30_000 });
    assert.match(await page.locator('.live-state').innerText(), /^Following live/);
    const call = await waitForCall(t, tn, callId);
    assert.equal(call.status, 'completed');
    // The end event reloads the record: its transcript replaces the live one, with no page reload.
    await page.locator('.transcript:not(.live)').waitFor({ timeout: 15_000 });
    assert.match(await page.locator('dl.facts').first().innerText(), /completed/);
    const shown = await page.locator('.transcript li.turn').allInnerTexts();
    assert.equal(shown.length, call.transcript.length);
    assert.ok(shown.some((line) => line.includes(call.transcript.find((e: { role: string }) => e.role === 'user').text)));
  });
});
