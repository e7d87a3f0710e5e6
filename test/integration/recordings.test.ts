/**
 * Call recordings through both carriers and their sandboxes (issue 22): off by default (nothing
 * written), the two channels as each side heard them (the caller's fixture speech in the left channel
 * at the media time it was sent, the agent in the right, cut where the caller barged in), the WAV
 * download with Range, the signed link (its expiry on a clock moved forward), deleting, and the
 * workspace's retention applied by its job. Every answer is checked against the contract.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, fixture, waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, getCall, placeCall, sandboxNumber, waitForCall, type Provider } from '../helpers/calls.js';
import { mulawToPcm16 } from '../../src/audio/pcm16.js';
import { assertSamplesAt, binary, decodeWav, downloadRecording, loud } from '../helpers/recordings.js';
import { RETENTION_JOB } from '../../src/recordings/service.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';

/** A clock some days ahead of the real one, moved by the tests (link expiry, retention). */
let offsetMs = 0;
const movedClock = { now: () => new Date(Date.now() + offsetMs) };

let t: TestService;
let tn: Tenant;
const sandboxOf = (s: TestService): SandboxCarriers => s.service.sandbox.carriers!.server;
const HELLO = fixture('audio/caller-hello.ulaw-8k.raw');
const LONG_GREETING = 'Hello! This is Acme Dental, calling about your appointment next week with doctor Smith at our Main Street clinic.';

before(async () => {
  t = await startTestService({ ...FAST_CALLS, RECORDING_URL_TTL_S: '600', RECORDING_FLUSH_MS: '200' }, { clock: movedClock });
  tn = await tenant(t);
});

after(async () => {
  await t.close();
});

const download = (callId: string, headers: Record<string, string> = {}) => downloadRecording(t, tn, callId, headers);

const simCall = (callSid: string) =>
  sandboxOf(t)
    .calls()
    .find((c) => c.callSid === callSid)!;

async function recordingRows(callId: string): Promise<number> {
  const rows = await t.service.db.knex('recordings').where({ conversation_id: callId });
  return rows.length;
}

describe('recording is off by default', () => {
  it('an agent without the setting: nothing is written, the record says null, the download says not_enabled', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const agent = await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey));
    assert.deepEqual(agent.body.recording, { enabled: false });
    const to = sandboxNumber('7001');
    sandboxOf(t).setScript(to, [{ waitForAgent: true }, { play: HELLO, label: 'hello' }, { hangup: true }]);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    const call = await waitForCall(t, tn, res.body.call_id);
    assert.equal(call.status, 'completed');
    assert.equal(call.recording, null);
    assert.equal(call.recording_url, null);
    assert.equal(await recordingRows(call.call_id), 0);
    const dl = await t.http.get(`/api/v1/calls/${call.call_id}/recording`).set(bearer(tn.apiKey));
    assert.equal(dl.status, 404);
    assert.equal(dl.body.error.code, 'recording_not_found');
    assert.equal(dl.body.error.reason, 'not_enabled');
  });

  it('a call may turn it off for itself: an agent that records, a call that says no, nothing written', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_b', { recording: { enabled: true } });
    const to = sandboxNumber('7002');
    sandboxOf(t).setScript(to, [{ waitForAgent: true }, { hangup: true }]);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: to, recording: { enabled: false } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const call = await waitForCall(t, tn, res.body.call_id);
    assert.equal(call.status, 'completed');
    assert.equal(call.recording, null);
    assert.equal(await recordingRows(call.call_id), 0);
  });

  it('a bad setting is refused and changes nothing', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a');
    const bad = await t.http
      .patch(`/api/v1/agents/${agentId}`)
      .set(bearer(tn.apiKey))
      .send({ recording: { enabled: 'yes' } });
    assert.equal(bad.status, 422);
    const extra = await t.http
      .patch(`/api/v1/agents/${agentId}`)
      .set(bearer(tn.apiKey))
      .send({ recording: { enabled: true, channels: 1 } });
    assert.equal(extra.status, 422);
    const agent = await t.http.get(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey));
    assert.deepEqual(agent.body.recording, { enabled: false });
  });
});

for (const provider of ['provider_a', 'provider_b'] as Provider[]) {
  describe(`${provider}: a recorded call`, () => {
    it("the caller's fixture speech is in the left channel at the time it was sent, the agent's audio in the right", async () => {
      const agentId = await createPhoneAgent(t, tn, provider, { recording: { enabled: true } });
      const to = sandboxNumber('7003');
      sandboxOf(t).setScript(to, [{ waitForAgent: true }, { play: HELLO, label: 'hello' }, { waitForAgent: true }, { hangup: true }]);
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
      const call = await waitForCall(t, tn, res.body.call_id);
      assert.equal(call.status, 'completed');
      assert.equal(call.recording.status, 'completed');
      assert.equal(call.recording.format, 'wav');
      assert.equal(call.recording.channels, 2);
      assert.equal(call.recording.sample_rate, 8000);
      const dl = await download(call.call_id);
      assert.equal(dl.status, 200);
      assert.equal(dl.headers['content-type'], 'audio/wav');
      assert.equal(dl.headers['accept-ranges'], 'bytes');
      assert.equal(Number(dl.headers['content-length']), call.recording.size_bytes);
      const wav = decodeWav(dl.body as Buffer);
      assert.equal(wav.sampleRate, 8000);
      assert.equal(wav.channels, 2);
      assert.ok(Math.abs(wav.left.length / 8000 - call.recording.duration) < 0.01);

      const sim = simCall(call.call_sid);
      const clip = sim.clips.find((c) => c.label === 'hello');
      assert.ok(clip, 'the sandbox played the fixture');
      const at = clip.streamMs * 8;
      const expected = mulawToPcm16(HELLO);
      const samples = expected.length / 2;
      assertSamplesAt(wav.left, expected, at, 'the caller fixture in the left channel');
      assert.equal(loud(wav.left, 0, at), 0, 'nothing on the caller channel before the caller spoke');
      // The agent's first message played before the caller spoke, and it answered after.
      assert.ok(loud(wav.right, 0, at) > 8000 * 0.5, 'the first message is in the right channel');
      assert.ok(loud(wav.right, at + samples, wav.right.length) > 0, 'the answer is in the right channel');
      // As heard: the agent audio recorded is what the carrier played, within a few frames.
      const agentMs = (loud(wav.right, 0, wav.right.length) / 8000) * 1000;
      assert.ok(agentMs <= sim.agentPlayedMs + 100, `recorded ${agentMs} ms of agent audio, the callee heard ${sim.agentPlayedMs} ms`);
      assert.ok(agentMs >= sim.agentPlayedMs * 0.8, `recorded ${agentMs} ms of agent audio, the callee heard ${sim.agentPlayedMs} ms`);
    });

    it('barge-in: the agent audio stops in the right channel where the caller spoke over it', async () => {
      const agentId = await createPhoneAgent(t, tn, provider, { first_message: LONG_GREETING, recording: { enabled: true } });
      const to = sandboxNumber('7004');
      sandboxOf(t).setScript(to, [{ sayWhileAgentSpeaks: 'Sorry to interrupt, when do you open?' }, { waitForAgent: true }, { hangup: true }]);
      const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
      const call = await waitForCall(t, tn, res.body.call_id);
      assert.equal(call.status, 'completed');
      assert.ok(call.interruption_count >= 1);
      const sim = simCall(call.call_sid);
      assert.ok(sim.clearsAtMs.length >= 1, 'the carrier buffer was cleared');
      const wav = decodeWav((await download(call.call_id)).body as Buffer);
      const cut = sim.clearsAtMs[0] * 8;
      // Speaking before the cut; silent from just after it for a while (the agent's answer comes later).
      const started = wav.right.findIndex((v) => Math.abs(v) > 64);
      assert.ok(started >= 0 && started < cut, `the agent was speaking before the barge-in (started at ${started / 8} ms, cut at ${cut / 8} ms)`);
      assert.ok(loud(wav.right, started, cut) > (cut - started) / 2, 'and went on until it');
      assert.equal(loud(wav.right, cut + 8 * 100, cut + 8 * 400), 0, 'the agent audio is cut where the caller barged in');
      assert.ok(loud(wav.left, cut - 8 * 1000, cut) > 0, 'the caller was speaking');
      // Less agent audio recorded than the service sent: the rest of the greeting was never heard.
      const agentMs = (loud(wav.right, 0, wav.right.length) / 8000) * 1000;
      assert.ok(agentMs < sim.agentAudioMs - 500, `recorded ${agentMs} ms, sent ${sim.agentAudioMs} ms`);
    });
  });
}

describe('download, links, deleting and retention', () => {
  let callId: string;
  let size: number;

  before(async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { recording: { enabled: true } });
    const to = sandboxNumber('7005');
    sandboxOf(t).setScript(to, [{ waitForAgent: true }, { play: HELLO, label: 'hello' }, { hangup: true }]);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    const call = await waitForCall(t, tn, res.body.call_id);
    callId = call.call_id;
    size = call.recording.size_bytes;
  });

  it('Range: 206 with the part asked for, suffix and open ranges, 416 beyond the end', async () => {
    const whole = (await download(callId)).body as Buffer;
    const head = await download(callId, { Range: 'bytes=0-43' });
    assert.equal(head.status, 206);
    assert.equal(head.headers['content-range'], `bytes 0-43/${size}`);
    assert.deepEqual(head.body, whole.subarray(0, 44));
    const mid = await download(callId, { Range: 'bytes=1000-5999' });
    assert.equal(mid.status, 206);
    assert.equal(mid.headers['content-length'], '5000');
    assert.deepEqual(mid.body, whole.subarray(1000, 6000));
    const tail = await download(callId, { Range: 'bytes=-100' });
    assert.equal(tail.status, 206);
    assert.deepEqual(tail.body, whole.subarray(size - 100));
    const open = await download(callId, { Range: `bytes=${size - 10}-` });
    assert.equal(open.status, 206);
    assert.deepEqual(open.body, whole.subarray(size - 10));
    const beyond = await t.http.get(`/api/v1/calls/${callId}/recording`).set(bearer(tn.apiKey)).set('Range', `bytes=${size}-`);
    assert.equal(beyond.status, 416);
    assert.equal(beyond.headers['content-range'], `bytes */${size}`);
    assert.equal(beyond.body.error.code, 'range_not_satisfiable');
  });

  it('another workspace cannot download it', async () => {
    const other = await tenant(t);
    const res = await t.http.get(`/api/v1/calls/${callId}/recording`).set(bearer(other.apiKey));
    assert.equal(res.status, 403);
  });

  it('the signed link works without a key until it expires; an altered one never', async () => {
    const call = await getCall(t, tn, callId);
    const url = new URL(call.recording_url);
    const path = `${url.pathname}${url.search}`;
    const ok = await binary(t.http.get(path));
    assert.equal(ok.status, 200);
    assert.deepEqual(ok.body, (await download(callId)).body);
    const part = await binary(t.http.get(path).set('Range', 'bytes=0-3'));
    assert.equal(part.status, 206);
    assert.equal((part.body as Buffer).toString('ascii'), 'RIFF');
    const sig = url.searchParams.get('signature')!;
    const forged = path.replace(sig, `${sig.slice(0, -1)}${sig.endsWith('0') ? '1' : '0'}`);
    const bad = await t.http.get(forged);
    assert.equal(bad.status, 403);
    assert.equal(bad.body.error.code, 'invalid_signature');
    const later = path.replace(/expires=\d+/, `expires=${Number(url.searchParams.get('expires')) + 3600}`);
    assert.equal((await t.http.get(later)).body.error.code, 'invalid_signature', 'the expiry is signed');
    offsetMs += 601_000;
    try {
      const expired = await t.http.get(path);
      assert.equal(expired.status, 403);
      assert.equal(expired.body.error.code, 'recording_url_expired');
    } finally {
      offsetMs -= 601_000;
    }
  });

  it('recording settings: default retention, a change, a bad value refused without change', async () => {
    const read = await t.http.get('/api/v1/workspace/recording-settings').set(bearer(tn.apiKey));
    assert.equal(read.status, 200);
    assert.deepEqual(read.body, { retention_days: 30, retention_days_default: true, updated_at: null });
    for (const bad of [{ retention_days: 0 }, { retention_days: 4000 }, { retention_days: 'week' }, { keep: 3 }]) {
      const res = await t.http.patch('/api/v1/workspace/recording-settings').set(bearer(tn.apiKey)).send(bad);
      assert.equal(res.status, 422, JSON.stringify(bad));
    }
    assert.equal((await t.http.get('/api/v1/workspace/recording-settings').set(bearer(tn.apiKey))).body.retention_days_default, true);
    const set = await t.http.patch('/api/v1/workspace/recording-settings').set(bearer(tn.apiKey)).send({ retention_days: 2 });
    assert.equal(set.status, 200);
    assert.equal(set.body.retention_days, 2);
    assert.equal(set.body.retention_days_default, false);
  });

  it('retention: the job removes a recording past the workspace retention, and the download says expired', async () => {
    const removedOthers = await t.service.recordings.sweep();
    assert.equal(removedOthers, 0, 'nothing is expired yet');
    offsetMs += 3 * 86_400_000;
    try {
      // Due now on the database's clock (the queue's), run with the service's clock moved past the retention.
      await t.service.jobs.add(RETENTION_JOB, {}, { runAt: new Date() });
      await waitFor(async () => ((await recordingRows(callId)) && (await getCall(t, tn, callId)).recording === null ? true : null), 20_000, 'retention job');
      const res = await t.http.get(`/api/v1/calls/${callId}/recording`).set(bearer(tn.apiKey));
      assert.equal(res.status, 404);
      assert.equal(res.body.error.reason, 'expired');
      const chunks = await t.service.db
        .knex('recording_chunks')
        .join('recordings', 'recordings.id', 'recording_chunks.recording_id')
        .where({ conversation_id: callId });
      assert.equal(chunks.length, 0, 'its audio is gone');
    } finally {
      offsetMs -= 3 * 86_400_000;
    }
  });

  it('delete: the audio is removed, the download then says deleted, a second delete is 404', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_b', { recording: { enabled: true } });
    const to = sandboxNumber('7006');
    sandboxOf(t).setScript(to, [{ waitForAgent: true }, { hangup: true }]);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    const call = await waitForCall(t, tn, res.body.call_id);
    assert.ok(call.recording);
    const del = await t.http.delete(`/api/v1/calls/${call.call_id}/recording`).set(bearer(tn.apiKey));
    assert.equal(del.status, 200);
    assert.deepEqual(del.body, { call_id: call.call_id, deleted: true });
    assert.equal((await getCall(t, tn, call.call_id)).recording, null);
    const dl = await t.http.get(`/api/v1/calls/${call.call_id}/recording`).set(bearer(tn.apiKey));
    assert.equal(dl.status, 404);
    assert.equal(dl.body.error.reason, 'deleted');
    const again = await t.http.delete(`/api/v1/calls/${call.call_id}/recording`).set(bearer(tn.apiKey));
    assert.equal(again.status, 404);
  });
});
