/**
 * baresip, a SIP phone we did not write, takes our call (src/sip/): it answers by itself, its WAV
 * microphone (the fixtures' greeting) reaches us sample for sample, and what we say (the fixtures'
 * question) is in the recording it makes of the call.
 */
import { describe, it, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { mulawToPcm16 } from '../../src/audio/pcm16.js';
import { wavHeader } from '../../src/recordings/wav.js';
import type { SipUserAgent } from '../../src/sip/index.js';
import { startBaresip, type Baresip } from '../helpers/baresip.js';
import { LOOPBACK, testUserAgent } from '../helpers/sipp.js';

const FIXTURES = path.resolve(import.meta.dirname, '../fixtures/audio');
const pcm = (name: string) => mulawToPcm16(fs.readFileSync(path.join(FIXTURES, name)));

/** The sample offset where `needle` (PCM16) is in `haystack` with every sample within `tolerance`, or -1. */
function findAudio(haystack: Buffer, needle: Buffer, tolerance: number): number {
  const h = new Int16Array(haystack.buffer.slice(haystack.byteOffset, haystack.byteOffset + (haystack.length & ~1)));
  const n = new Int16Array(needle.buffer.slice(needle.byteOffset, needle.byteOffset + (needle.length & ~1)));
  for (let at = 0; at + n.length <= h.length; at++) {
    let i = 0;
    while (i < n.length && Math.abs(h[at + i] - n[i]) <= tolerance) i++;
    if (i === n.length) return at;
  }
  return -1;
}

describe('baresip as a second real phone', () => {
  let ua: SipUserAgent;
  let phone: Baresip;
  let dir: string;
  const greeting = pcm('voicemail-greeting.ulaw-8k.raw');
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sip-wav-'));
    const microphone = path.join(dir, 'greeting.wav');
    // Twice over, so it still speaks (and sends RTP) while we do.
    fs.writeFileSync(microphone, Buffer.concat([wavHeader(2 * greeting.length, 8000, 1), greeting, greeting]));
    phone = await startBaresip(microphone);
    ua = await testUserAgent();
  });
  after(async () => {
    await ua?.stop();
    await phone?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('answers by itself, we hear its microphone exactly, and it records what we say', async () => {
    const call = await ua.invite({ host: LOOPBACK, port: phone.port, to: 'bob', from: '+15550001111' });
    const heard: Buffer[] = [];
    call.on('audio', (frame) => heard.push(frame));
    await once(call, 'answered');
    assert.equal(call.codec, 'PCMU');
    // A second of its greeting, from half a second in, arrives sample for sample.
    const second = greeting.subarray(8000, 24000);
    while (Buffer.concat(heard).indexOf(second) < 0) await once(call, 'audio');
    const question = pcm('caller-question.ulaw-8k.raw');
    const said = question.subarray(0, Math.floor(question.length / 320) * 320);
    call.sendAudio(said);
    // Hang up once all of it has been sent (the pacer's queue is empty).
    while (call.rtp.queuedMs > 0) await once(call, 'audio');
    await once(call, 'audio');
    const over = phone.callOver();
    call.hangup();
    await over;
    const recorded = phone.heard();
    // All of it but the last 200 ms (still in baresip's jitter buffer when the call ended) is in its
    // recording, in order, each sample within 2 of ours: baresip's G.711 decodes mu-law's zero as 2.
    const kept = said.subarray(0, said.length - 3200);
    assert.ok(findAudio(recorded, kept, 2) >= 0, 'what we said is in its recording');
  });
});
