/** Recording test steps: downloading a WAV through the API and reading its two channels back. */
import assert from 'node:assert/strict';
import type { TestService } from './service.js';
import type { Tenant } from './fixtures.js';
import { bearer, waitFor, type Client } from './realtime.js';
import type { Clock } from '../../src/lib/clock.js';

export interface Wav {
  sampleRate: number;
  channels: number;
  left: Int16Array;
  right: Int16Array;
}

export function decodeWav(buf: Buffer): Wav {
  assert.equal(buf.toString('ascii', 0, 4), 'RIFF');
  assert.equal(buf.toString('ascii', 8, 12), 'WAVE');
  assert.equal(buf.readUInt16LE(20), 1, 'PCM');
  assert.equal(buf.readUInt16LE(34), 16, '16-bit');
  const channels = buf.readUInt16LE(22);
  const dataBytes = buf.readUInt32LE(40);
  assert.equal(buf.length, 44 + dataBytes, 'the header states the data size');
  const frames = dataBytes / (2 * channels);
  const left = new Int16Array(frames);
  const right = new Int16Array(frames);
  for (let i = 0; i < frames; i++) {
    left[i] = buf.readInt16LE(44 + i * 4);
    right[i] = buf.readInt16LE(44 + i * 4 + 2);
  }
  return { sampleRate: buf.readUInt32LE(24), channels, left, right };
}

/** A supertest request whose body is collected as bytes (audio/wav). */
export const binary = (req: ReturnType<TestService['http']['get']>) =>
  req.buffer(true).parse((res, cb) => {
    const parts: Buffer[] = [];
    res.on('data', (c: Buffer) => parts.push(c));
    res.on('end', () => cb(null, Buffer.concat(parts)));
  });

export function downloadRecording(t: TestService, tn: Tenant, callId: string, headers: Record<string, string> = {}) {
  return binary(t.http.get(`/api/v1/calls/${callId}/recording`).set(bearer(tn.apiKey)).set(headers));
}

export function downloadSessionRecording(t: TestService, tn: Tenant, conversationId: string, headers: Record<string, string> = {}) {
  return binary(t.http.get(`/api/v1/realtime/conversations/${conversationId}/recording`).set(bearer(tn.apiKey)).set(headers));
}

/** A web session's record once it has been finalised (the API's body). */
export function sessionRecord(t: TestService, tn: Tenant, conversationId: string): Promise<Record<string, any>> {
  return waitFor(
    async () => {
      const res = await t.http.get(`/api/v1/realtime/conversations/${conversationId}`).set(bearer(tn.apiKey));
      return res.status === 200 ? (res.body as Record<string, any>) : null;
    },
    15_000,
    `the record of ${conversationId}`,
  );
}

/**
 * The clock web sessions' recordings place audio by: real time until `hold()`, then still until the
 * test moves it, so where audio lands in a recording is exact (its milliseconds since the session
 * started, at 16 samples each).
 */
export function heldClock(): { clock: Clock; hold(): void; move(ms: number): void; release(): void } {
  let held: number | null = null;
  return {
    clock: { now: () => new Date(held ?? Date.now()) },
    hold: () => {
      held = Date.now();
    },
    move: (ms) => {
      assert.ok(held !== null, 'the clock is held');
      held += ms;
    },
    release: () => {
      held = null;
    },
  };
}

/**
 * Resolves once the server has handled every frame sent before it: an unreadable frame is answered
 * with its `error` as it is handled, in order.
 */
export async function fence(c: Client): Promise<void> {
  c.ws.send('{fence');
  const err = await c.next('error');
  assert.equal(err.code, 'invalid_json');
}

/** Sends PCM16 16 kHz in 20 ms frames, as the client library does. */
export function sendPcm(c: Client, pcm: Buffer): void {
  for (let i = 0; i < pcm.length; i += 640) c.sendFrame('audio/pcm', pcm.subarray(i, i + 640));
}

/** Non-silent samples in [from, to). */
export function loud(samples: Int16Array, from: number, to: number): number {
  let n = 0;
  for (let i = Math.max(0, from); i < Math.min(to, samples.length); i++) if (Math.abs(samples[i]) > 64) n++;
  return n;
}

/** Asserts that `pcm` (PCM16 LE mono) is in `channel` exactly, from sample `at`. */
export function assertSamplesAt(channel: Int16Array, pcm: Buffer, at: number, what: string): void {
  const samples = pcm.length / 2;
  assert.ok(channel.length >= at + samples, `the whole of ${what} is in the recording`);
  for (let i = 0; i < samples; i++) {
    if (channel[at + i] !== pcm.readInt16LE(i * 2)) assert.fail(`${what} differs at sample ${i} (offset ${at})`);
  }
}

/**
 * Where `pcm` (PCM16 LE mono) starts in `channel`, found by its first loud stretch (for a recording
 * made on the real clock, where the moment audio arrived is not known to the sample); -1 when absent.
 */
export function findSamples(channel: Int16Array, pcm: Buffer): number {
  const samples = new Int16Array(pcm.length / 2);
  for (let i = 0; i < samples.length; i++) samples[i] = pcm.readInt16LE(i * 2);
  const k = samples.findIndex((v) => Math.abs(v) > 1000);
  if (k < 0) return -1;
  const window = samples.subarray(k, k + 320);
  for (let i = k; i + window.length <= channel.length; i++) {
    let j = 0;
    while (j < window.length && channel[i + j] === window[j]) j++;
    if (j === window.length) return i - k;
  }
  return -1;
}
