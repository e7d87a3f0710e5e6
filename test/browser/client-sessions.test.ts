/**
 * The client library in real headless Chromium, imported by a page of another origin from the service's
 * /sdk/voice-agent-client.js: how it is served, a text session, a voice session whose fake microphone
 * (a recording of a person) reaches the sandbox voice service and whose answer is played, camera frames
 * as JPEG at a settable rate, and a refused microphone.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, createAgent, fixture } from '../helpers/realtime.js';
import { assertServedBundle, launchChromium, openCustomerPage, startCustomerSite, writeWav, type CustomerSite } from '../helpers/browser.js';

const BUNDLE = path.resolve(import.meta.dirname, '../../packages/client/dist/voice-agent-client.js');
const LIBRARY = '/sdk/voice-agent-client.js';

let t: TestService;
let site: CustomerSite;
let browser: Browser;
let a: Tenant;
let wav: string;

before(async () => {
  t = await startTestService({ VOICE_SANDBOX_MS_PER_CHAR: '30' });
  site = await startCustomerSite(t.url);
  a = await tenant(t);
  site.apiKey = a.apiKey;
  // The fake microphone plays a person saying hello (4.2 s) once, after 1 s of silence.
  wav = writeWav(fixture('audio/caller-hello.pcm16le-16k.raw'), 16000, { leadMs: 1000, tailMs: 3000 });
  browser = await launchChromium([`--use-file-for-fake-audio-capture=${wav}%noloop`]);
});
after(async () => {
  await browser?.close();
  await site?.close();
  await t?.close();
  if (wav) fs.rmSync(path.dirname(wav), { recursive: true, force: true });
});

const rms = (pcm: Buffer) => {
  let sum = 0;
  for (let i = 0; i + 1 < pcm.length; i += 2) sum += pcm.readInt16LE(i) ** 2;
  return Math.sqrt(sum / Math.max(1, pcm.length >> 1));
};

/** Width and height from a JPEG's start-of-frame segment. */
function jpegSize(jpeg: Buffer): { width: number; height: number } | null {
  let i = 2;
  while (i + 9 < jpeg.length) {
    if (jpeg[i] !== 0xff) return null;
    const marker = jpeg[i + 1];
    if (marker >= 0xc0 && marker <= 0xc3) return { height: jpeg.readUInt16BE(i + 5), width: jpeg.readUInt16BE(i + 7) };
    i += 2 + jpeg.readUInt16BE(i + 2);
  }
  return null;
}

describe('served at GET /sdk/voice-agent-client.js', () => {
  it('one ES module as JavaScript, loadable by any origin, cacheable with an ETag (304 on If-None-Match)', async () => {
    const body = await assertServedBundle(t.url, LIBRARY, BUNDLE, 15 * 1024);
    assert.match(body, /export\s*\{/, 'an ES module');
  });

  it('a page of another origin imports it (the module is fetched with CORS) and gets the API', async () => {
    assert.notEqual(new URL(site.origin).origin, new URL(t.url).origin);
    const p = await openCustomerPage(browser, site);
    try {
      const exports = await p.page.evaluate(() => (window as unknown as { vas: { exports: string[] } }).vas.exports);
      for (const name of ['createSession', 'Session', 'VoiceAgentError']) assert.ok(exports.includes(name), `exports ${name}: ${exports.join(', ')}`);
      // A script of the page may fetch it too: the answer carries CORS for any origin.
      const fetched = await p.page.evaluate(async (url) => {
        const r = await fetch(url, { mode: 'cors' });
        return { status: r.status, type: r.type, length: (await r.text()).length };
      }, `${t.url}${LIBRARY}`);
      assert.deepEqual(fetched, { status: 200, type: 'cors', length: fs.readFileSync(BUNDLE, 'utf8').length });
    } finally {
      await p.page.close();
    }
  });
});

describe('a text session', () => {
  it('start() resolves on session_started; sendText reaches the agent and its reply arrives; tool calls are told; stop() closes with 1000', async () => {
    const agentId = await createAgent(t, a, { first_message: 'Hello! How can I help you today?' });
    const toolServer = http.createServer((_req, res) => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"found":true}'));
    await new Promise<void>((r) => toolServer.listen(0, '127.0.0.1', r));
    const tool = await t.http
      .post('/api/v1/tools')
      .set(bearer(a.apiKey))
      .send({
        name: 'lookup_appointment',
        description: 'Looks up an appointment.',
        url: `http://127.0.0.1:${(toolServer.address() as AddressInfo).port}/`,
        method: 'POST',
      });
    assert.equal(tool.status, 201, JSON.stringify(tool.body));
    assert.equal((await t.http.put(`/api/v1/agents/${agentId}/tools/${tool.body.tool_id}`).set(bearer(a.apiKey))).status, 200);
    const p = await openCustomerPage(browser, site);
    try {
      const before = site.requests.length;
      const i = await p.create({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-text', source: 'text' });
      assert.equal(await p.call('state', i), 'idle');
      const started = await p.start(i);
      assert.equal(started.ok, true, JSON.stringify(started));
      const msg = started.started as Record<string, unknown>;
      assert.equal(msg.type, 'session_started');
      assert.deepEqual([msg.agent_id, msg.user_id, msg.source, msg.audio_format], [agentId, 'visitor-text', 'text', null]);
      assert.match(String(msg.session_id), /^conv_[0-9A-Z]{26}$/);
      assert.equal(await p.call('state', i), 'live');
      assert.equal(await p.call('sessionId', i), msg.session_id);

      // The library asked the customer's endpoint, which minted the token with its API key.
      assert.equal(site.requests.length, before + 1);
      assert.match(site.requests.at(-1)!.contentType ?? '', /^application\/json/);
      assert.deepEqual(site.requests.at(-1)!.body, { agent_id: agentId, user_id: 'visitor-text', source: 'text' });

      // The agent's first message, then an answer to what the page sends.
      await p.waitForEvent(i, (e) => e.e === 'reply' && e.v === 'Hello! How can I help you today?', 10_000, 'the first message');
      assert.deepEqual(await p.call('sendText', i, 'What are your opening hours on Saturday?'), { ok: true });
      await p.waitForEvent(
        i,
        (e) => e.e === 'reply' && e.v === 'As the receptionist of Acme Dental, I heard: "What are your opening hours on Saturday?".',
        10_000,
        'the reply',
      );
      // The agent calls its tool: the page is told when it starts and when it ends.
      assert.deepEqual(await p.call('sendText', i, 'Please lookup_appointment for Ada'), { ok: true });
      await p.waitForEvent(i, (e) => e.e === 'reply' && /lookup_appointment returned/.test(String(e.v)), 10_000, 'the reply after the tool');
      const events = await p.events(i);
      assert.deepEqual(
        events.filter((e) => e.e === 'toolCall').map((e) => e.v),
        [
          { name: 'lookup_appointment', status: 'started' },
          { name: 'lookup_appointment', status: 'completed' },
        ],
      );
      const messages = events.filter((e) => e.e === 'message').map((e) => (e.v as { type: string }).type);
      assert.deepEqual(messages.slice(0, 1), ['session_started']);
      assert.ok(messages.includes('text') && messages.includes('turn_complete'), messages.join(','));
      assert.deepEqual(
        events.filter((e) => e.e === 'state').map((e) => e.v),
        ['starting', 'live'],
      );

      assert.equal(await p.call('stop', i), 'closed');
      const closed = await p.waitForEvent(i, (e) => e.e === 'close', 5000, 'close');
      assert.deepEqual(closed.v, { code: 1000, reason: '' });
      assert.ok(!(await p.events(i)).some((e) => e.e === 'error'), 'no error');
      assert.deepEqual(await p.call('sendText', i, 'anyone?'), {
        ok: false,
        code: 'not_live',
        message: 'The session is not live.',
        closeCode: undefined,
        name: 'VoiceAgentError',
        isError: true,
        isVoiceAgentError: true,
      });

      // The service's record of the finished session holds the typed turn and the reply.
      const record = await waitForRecord(String(msg.session_id));
      const turns = (record.transcript as Array<{ role: string; text: string }>).map((x) => `${x.role}: ${x.text}`);
      assert.ok(turns.includes('user: What are your opening hours on Saturday?'), turns.join('\n'));
    } finally {
      await p.page.close();
      toolServer.closeAllConnections();
      await new Promise<void>((r) => toolServer.close(() => r()));
    }
  });

  it('getToken instead of tokenUrl: any async function returning {ws_url}', async () => {
    const agentId = await createAgent(t, a);
    const p = await openCustomerPage(browser, site);
    try {
      const i = await p.create({ getTokenFrom: site.tokenUrl, agentId, userId: 'visitor-gettoken', source: 'text' });
      const started = await p.start(i);
      assert.equal(started.ok, true, JSON.stringify(started));
      assert.equal((started.started as { user_id: string }).user_id, 'visitor-gettoken');
      assert.equal(await p.call('stop', i), 'closed');
    } finally {
      await p.page.close();
    }
  });
});

async function waitForRecord(conversationId: string): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const res = await t.http.get(`/api/v1/realtime/conversations/${conversationId}`).set(bearer(a.apiKey));
    if (res.status === 200) return res.body as Record<string, unknown>;
    if (Date.now() > deadline) throw new Error(`no finished record of ${conversationId}: ${res.status} ${JSON.stringify(res.body)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('a voice session with the fake microphone', () => {
  it('the microphone streams PCM16 16 kHz in 20 ms frames; the sandbox hears the speech, barges in on the agent, and its spoken answer is played', async () => {
    // A long first message: the person starts talking while the agent is still saying it.
    const first = 'Hello and welcome to Acme Dental. We are open every weekday from nine to five, and on Saturdays from nine to one. How can I help you today?';
    const agentId = await createAgent(t, a, { first_message: first });
    const p = await openCustomerPage(browser, site);
    try {
      const i = await p.create({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-voice' });
      const started = await p.clickToStart(i);
      assert.equal(started.ok, true, JSON.stringify(started));
      assert.deepEqual((started.started as Record<string, unknown>).audio_format, { encoding: 'pcm16le', sample_rate: 24000, channels: 1 });
      assert.deepEqual(site.requests.at(-1)!.body, { agent_id: agentId, user_id: 'visitor-voice', source: 'voice' });

      const heard = await p.waitForEvent(
        i,
        (e) => e.e === 'transcript' && (e.v as { role: string; final: boolean }).role === 'user' && (e.v as { final: boolean }).final,
        20_000,
        'the user transcript',
      );
      const seconds = Number(/^\[speech (\d+\.\d)s\]$/.exec((heard.v as { text: string }).text)?.[1]);
      assert.ok(seconds >= 2.5 && seconds <= 5, `the sandbox heard ${(heard.v as { text: string }).text} of a 4.2 s recording`);
      const answer = await p.waitForEvent(
        i,
        (e) =>
          e.e === 'transcript' &&
          (e.v as { role: string }).role === 'model' &&
          (e.v as { final: boolean }).final &&
          /I heard/.test((e.v as { text: string }).text),
        15_000,
        'the agent answer',
      );
      assert.equal((answer.v as { text: string }).text, `As the receptionist of Acme Dental, I heard ${seconds.toFixed(1)} seconds of speech.`);
      await p.waitForEvent(
        i,
        (e) => e.e === 'message' && (e.v as { type: string }).type === 'turn_complete' && e.at > answer.at - 5000,
        10_000,
        'turn_complete',
      );
      const events = await p.events(i);

      // The agent's audio arrived at the announced rate and was played: speaking went on.
      const audio = events.filter((e) => e.e === 'audio');
      assert.ok(audio.length >= 20, `${audio.length} audio chunks`);
      assert.ok(audio.every((e) => (e.v as { sampleRate: number }).sampleRate === 24000));
      assert.ok(
        events.some((e) => e.e === 'speaking' && e.v === true),
        'the agent audio played',
      );
      // Barge-in: on `interrupted` the queued audio is dropped at once: speaking goes false in the same
      // handler, before anything else the page hears. (On a busy machine the agent's audio can run dry
      // between chunks, speaking then already false when `interrupted` comes: nothing to flush.)
      const interrupted = events.findIndex((e) => e.e === 'message' && (e.v as { type: string }).type === 'interrupted');
      assert.ok(interrupted >= 0, 'the person talked over the first message');
      const speakingThen = events
        .slice(0, interrupted)
        .filter((e) => e.e === 'speaking')
        .at(-1)?.v;
      if (speakingThen === true) {
        assert.deepEqual(
          [events[interrupted + 1]?.e, events[interrupted + 1]?.v],
          ['speaking', false],
          'playback flushed on interrupted, before any other event',
        );
        assert.equal(events[interrupted + 2]?.e, 'interrupted', 'then the interrupted event');
      } else {
        assert.equal(events[interrupted + 1]?.e, 'interrupted', 'nothing was playing: the interrupted event at once');
      }

      // What went over the wire: JSON frames of PCM16 LE at 16 kHz, 640 bytes (20 ms) each, in real time.
      const frames = p.sent.filter((f) => f.mime_type === 'audio/pcm');
      assert.ok(frames.length >= 150, `${frames.length} audio frames`);
      assert.ok(
        frames.every((f) => f.bytes.length === 640),
        'every frame is 20 ms of 16 kHz PCM16',
      );
      const span = (frames.at(-1)!.at - frames[0].at) / 1000;
      const rate = (frames.length - 1) / span;
      assert.ok(rate > 35 && rate < 65, `${rate.toFixed(1)} frames per second`);
      const loud = frames.filter((f) => rms(f.bytes) >= 300).length;
      assert.ok(loud >= 100, `${loud} frames of speech (about 4 s expected)`);
      assert.ok(
        p.sent.every((f) => f.mime_type === 'audio/pcm'),
        'a voice session sends only audio',
      );
      assert.ok(!events.some((e) => e.e === 'error'), JSON.stringify(events.filter((e) => e.e === 'error')));

      assert.equal(await p.call('stop', i), 'closed');
      assert.deepEqual((await p.waitForEvent(i, (e) => e.e === 'close')).v, { code: 1000, reason: '' });
    } finally {
      await p.page.close();
    }
  });
});

describe('a camera session', () => {
  it('sends the camera as JPEG frames at the set rate, scaled to imageMaxWidth, with the microphone alongside', async () => {
    const agentId = await createAgent(t, a);
    const p = await openCustomerPage(browser, site);
    try {
      const i = await p.create({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-camera', source: 'camera', imageRate: 5, imageMaxWidth: 320 });
      const started = await p.clickToStart(i);
      assert.equal(started.ok, true, JSON.stringify(started));
      assert.equal((started.started as { source: string }).source, 'camera');
      await new Promise((r) => setTimeout(r, 2000));
      const fast = p.sent.filter((f) => f.mime_type === 'image/jpeg');
      assert.ok(fast.length >= 6 && fast.length <= 13, `${fast.length} images in 2 s at 5 per second`);
      for (const f of fast) {
        assert.deepEqual([f.bytes[0], f.bytes[1], f.bytes.at(-2), f.bytes.at(-1)], [0xff, 0xd8, 0xff, 0xd9], 'a whole JPEG');
        assert.deepEqual(jpegSize(f.bytes), { width: 320, height: 240 }, 'the fake camera 640x480 scaled to 320 wide');
      }
      await p.call('setImageRate', i, 1);
      const mark = p.sent.length;
      await new Promise((r) => setTimeout(r, 2000));
      const slow = p.sent.slice(mark).filter((f) => f.mime_type === 'image/jpeg');
      assert.ok(slow.length >= 1 && slow.length <= 4, `${slow.length} images in 2 s at 1 per second`);
      assert.ok(p.sent.filter((f) => f.mime_type === 'audio/pcm').length >= 150, 'the microphone streams too');
      // The service took every frame: no in-session error came back.
      assert.ok(!(await p.events(i)).some((e) => e.e === 'error'), JSON.stringify((await p.events(i)).filter((e) => e.e === 'error')));
      assert.equal(await p.call('stop', i), 'closed');
    } finally {
      await p.page.close();
    }
  });
});

describe('devices the page may not use', () => {
  it('a refused microphone rejects start() with permission_denied, before any token is minted', async () => {
    const agentId = await createAgent(t, a);
    const p = await openCustomerPage(browser, site, '/no-devices');
    try {
      const before = site.requests.length;
      for (const source of ['voice', 'camera']) {
        const i = await p.create({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-denied', source });
        const res = await p.clickToStart(i);
        assert.equal(res.ok, false);
        assert.equal(res.code, 'permission_denied', JSON.stringify(res));
        assert.equal(res.isVoiceAgentError, true);
        assert.match(String(res.message), source === 'voice' ? /microphone was refused/ : /microphone and camera was refused/);
        assert.equal(await p.call('state', i), 'closed');
      }
      assert.equal(site.requests.length, before, 'no token was minted (none wasted)');
      // A text session needs no device and still works on that page.
      const i = await p.create({ tokenUrl: site.tokenUrl, agentId, userId: 'visitor-denied', source: 'text' });
      assert.equal((await p.start(i)).ok, true);
      await p.call('stop', i);
    } finally {
      await p.page.close();
    }
  });
});
