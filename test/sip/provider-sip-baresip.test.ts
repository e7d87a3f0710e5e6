/**
 * Provider `sip` end to end against a phone we did not write: the service calls baresip (Debian's,
 * auto-answer) through a trunk. baresip's microphone plays the caller's words (spoken-text audio the
 * sandbox voice service reads back), so they are in the call's transcript; the agent's reply is in
 * baresip's own recording of the call, sample for sample against the agent channel of our recording.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { encodeSpokenText } from '../../src/sandbox/spoken-text.js';
import { wavHeader } from '../../src/recordings/wav.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';
import { FAST_CALLS, waitForCall } from '../helpers/calls.js';
import { decodeWav, downloadRecording } from '../helpers/recordings.js';
import { startBaresip, type Baresip } from '../helpers/baresip.js';
import { freePort, LOOPBACK } from '../helpers/sipp.js';

type Entry = { role: string; text: string };

const NUMBER = '+14155550150';
const SAID = 'Hello, this is Sam.';
const CALLED = '+14155550123';

/** Where `needle` is in `haystack` with every sample within `tolerance`, or -1. */
function findAudio(haystack: Int16Array, needle: Int16Array, tolerance: number): number {
  for (let at = 0; at + needle.length <= haystack.length; at++) {
    let i = 0;
    while (i < needle.length && Math.abs(haystack[at + i] - needle[i]) <= tolerance) i++;
    if (i === needle.length) return at;
  }
  return -1;
}

/** The first `samples` long run of the agent channel that is never silent. */
function loudRun(channel: Int16Array, samples: number): Int16Array | null {
  let start = -1;
  for (let i = 0; i < channel.length; i++) {
    if (Math.abs(channel[i]) > 2) {
      if (start < 0) start = i;
      if (i - start + 1 >= samples) return channel.subarray(start, start + samples);
    } else start = -1;
  }
  return null;
}

let t: TestService;
let tn: Tenant;
let phone: Baresip;
let dir: string;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sip-baresip-'));
  // Two seconds of quiet (the agent's first message plays), the words, then quiet (baresip hangs up when its file ends).
  const quiet = Buffer.alloc(16_000 * 2);
  const words = encodeSpokenText(SAID);
  const microphone = path.join(dir, 'caller.wav');
  const audio = Buffer.concat([quiet, words, ...Array<Buffer>(10).fill(quiet)]);
  fs.writeFileSync(microphone, Buffer.concat([wavHeader(audio.length, 8000, 1), audio]));
  phone = await startBaresip(microphone, CALLED);
  const rtp = await freePort();
  const { SANDBOX_CARRIERS_SPEED: _speed, CALL_AUDIO_RATE: _rate, ...fast } = FAST_CALLS;
  t = await startTestService({
    ...fast,
    SIP_PORT: String(await freePort()),
    SIP_HOST: LOOPBACK,
    SIP_ADVERTISED_ADDRESS: LOOPBACK,
    SIP_RTP_PORT_MIN: String(rtp),
    SIP_RTP_PORT_MAX: String(rtp + 40),
  });
  tn = await tenant(t);
});

after(async () => {
  await t?.close();
  await phone?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('provider sip against baresip', () => {
  it("baresip's words are in the transcript and the agent's reply is in baresip's recording", async () => {
    const trunk = await t.http
      .post('/api/v1/sip-trunks')
      .set(bearer(tn.apiKey))
      .send({
        name: 'baresip',
        inbound: { allowed_sources: [LOOPBACK], numbers: [NUMBER] },
        outbound: { host: `${LOOPBACK}:${phone.port}`, transport: 'udp' },
      });
    assert.equal(trunk.status, 201, JSON.stringify(trunk.body));
    const agent = await t.http
      .post('/api/v1/agents')
      .set(bearer(tn.apiKey))
      .send({
        name: 'Receptionist',
        instruction: 'You are the receptionist of Acme Dental.',
        first_message: 'Hello! This is Acme Dental.',
        sip_config: { trunk_id: trunk.body.trunk_id ?? trunk.body.id, phone_number: NUMBER },
      });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    const res = await t.http
      .post('/api/v1/calls')
      .set(bearer(tn.apiKey))
      .send({ agent_id: agent.body.agent_id, to_number: CALLED, provider: 'sip', recording: { enabled: true } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const heard = await waitForCall(t, tn, res.body.call_id, (c) => {
      const entries = c.transcript as Entry[];
      const at = entries.findIndex((e) => e.role === 'user' && e.text === SAID);
      return (at >= 0 && entries.slice(at + 1).some((e) => e.role === 'model')) || ['completed', 'busy', 'no_answer', 'failed', 'canceled'].includes(c.status);
    });
    assert.equal(heard.status, 'in_progress', JSON.stringify(heard));
    // Let the reply play out, then hang up and wait for baresip's recording to be complete.
    await new Promise((r) => setTimeout(r, 2500));
    const over = phone.callOver();
    assert.equal((await t.http.post(`/api/v1/calls/${heard.call_id}/hangup`).set(bearer(tn.apiKey))).status, 200);
    await over;
    const done = await waitForCall(t, tn, heard.call_id);
    assert.equal(done.status, 'completed');
    const rec = await downloadRecording(t, tn, done.call_id);
    assert.equal(rec.status, 200);
    const ours = decodeWav(rec.body as Buffer);
    const recorded = phone.heard();
    const theirs = new Int16Array(recorded.buffer.slice(recorded.byteOffset, recorded.byteOffset + (recorded.length & ~1)));
    // The agent channel's audio after the caller's words (its reply): 200 ms of it, in baresip's recording.
    const replyFrom = Math.floor(ours.right.length / 2);
    const reply = loudRun(ours.right.subarray(replyFrom), 1600) ?? loudRun(ours.right, 1600);
    assert.ok(reply, 'the agent spoke');
    assert.ok(findAudio(theirs, reply, 2) >= 0, "the agent's audio is in baresip's recording");
  });
});
