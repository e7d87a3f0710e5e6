/** Recording test steps: downloading a WAV through the API and reading its two channels back. */
import assert from 'node:assert/strict';
import type { TestService } from './service.js';
import type { Tenant } from './fixtures.js';
import { bearer } from './realtime.js';

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
