/**
 * The dashboard shows keypad keys in a call's transcript (real headless Chromium, real service, the
 * sandbox phone menu): the keys the agent pressed with `send_dtmf` appear as key caps in the agent's
 * turn, marked apart from speech.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
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

    await page.goto(`${t.url}/dashboard#/login`);
    await page.getByLabel('Email').fill(tn.email);
    await page.getByLabel('Password').fill(tn.password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Agents' }).waitFor();
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
