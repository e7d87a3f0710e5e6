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
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { batchCalls, createBatch, waitForBatch } from '../helpers/batches.js';

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
      // Kept as the carrier carried it: mu-law, one byte a sample, half the PCM16 served.
      const [row] = await t.service.db.knex('recordings').where({ conversation_id: call.call_id });
      assert.equal(row.encoding, 'mulaw');
      const [{ stored }] = await t.service.db
        .knex('recording_chunks')
        .where({ recording_id: row.id })
        .sum({ stored: t.service.db.knex.raw('octet_length(data)') });
      assert.equal(Number(stored) * 2, Number(row.bytes));
      assert.equal(Number(row.bytes) + 44, call.recording.size_bytes);
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
      assert.ok(loud(wav.right, cut - 8 * 300, cut) > 0, 'and was speaking when the caller cut in');
      assert.equal(loud(wav.right, cut + 8 * 100, cut + 8 * 400), 0, 'the agent audio is cut where the caller barged in');
      assert.ok(loud(wav.left, cut - 8 * 1000, cut) > 0, 'the caller was speaking');
      // Less agent audio recorded than the service sent: the rest of the greeting was never heard.
      const agentMs = (loud(wav.right, 0, wav.right.length) / 8000) * 1000;
      assert.ok(agentMs < sim.agentAudioMs, `recorded ${agentMs} ms, sent ${sim.agentAudioMs} ms`);
      assert.ok(agentMs <= sim.agentPlayedMs + 100, `recorded ${agentMs} ms, the callee heard ${sim.agentPlayedMs} ms`);
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

  it('HEAD: the status and headers of the GET, Range and the signed link included, and no body', async () => {
    const path = `/api/v1/calls/${callId}/recording`;
    const signed = new URL((await getCall(t, tn, callId)).recording_url);
    const cases: Array<[string, Record<string, string>]> = [
      [path, {}],
      [path, { Range: 'bytes=1000-5999' }],
      [path, { Range: `bytes=${size}-` }],
      [`${signed.pathname}${signed.search}`, { Range: 'bytes=0-3' }],
    ];
    const same = ['content-type', 'content-length', 'content-range', 'accept-ranges', 'etag', 'cache-control', 'content-disposition'];
    for (const [url, headers] of cases) {
      const auth = url === path ? bearer(tn.apiKey) : {};
      const get = await binary(t.http.get(url).set(auth).set(headers));
      const head = await t.http.head(url).set(auth).set(headers);
      assert.equal(head.status, get.status, `${url} ${JSON.stringify(headers)}`);
      for (const name of same) assert.equal(head.headers[name], get.headers[name], `${name} of ${url} ${JSON.stringify(headers)}`);
      assert.match(head.headers['x-request-id'], /^req_/);
      assert.equal(head.text ?? '', '', 'no body');
    }
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
    const beyond = await t.http.get(path).set('Range', `bytes=${size}-`);
    assert.equal(beyond.status, 416);
    assert.equal(beyond.headers['content-range'], `bytes */${size}`);
    assert.equal(beyond.body.error.code, 'range_not_satisfiable');
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
    assert.deepEqual(read.body, { retention_days: 30, retention_days_default: true, transcript_retention_days: null, updated_at: null });
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
    const link = new URL(call.recording_url);
    const byLink = await t.http.get(`${link.pathname}${link.search}`);
    assert.equal(byLink.status, 404, 'the signed link of a deleted recording');
    assert.equal(byLink.body.error.code, 'recording_not_found');
    assert.equal(byLink.body.error.reason, 'deleted');
    const again = await t.http.delete(`/api/v1/calls/${call.call_id}/recording`).set(bearer(tn.apiKey));
    assert.equal(again.status, 404);
  });
});

describe('call.completed, batches, the voicemail path, a call in progress and the size cap', () => {
  let receiver: Receiver;
  let capped: TestService;
  let cappedTenant: Tenant;

  before(async () => {
    receiver = await startReceiver();
    capped = await startTestService({ ...FAST_CALLS, RECORDING_MAX_BYTES: '32000' });
    cappedTenant = await tenant(capped);
  });

  after(async () => {
    await receiver.close();
    await capped.close();
  });

  const eventFor = async (callId: string) =>
    waitFor(
      async () => receiver.requests.map((q) => JSON.parse(q.rawBody.toString()) as Record<string, any>).find((e) => e.conversation_id === callId) ?? null,
      10_000,
      `call.completed of ${callId}`,
    );

  it('call.completed carries the metadata and a link the receiver fetches without a key; an unrecorded call has neither field', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a', { recording: { enabled: true } });
    const to = sandboxNumber('7007');
    sandboxOf(t).setScript(to, [{ waitForAgent: true }, { play: HELLO, label: 'hello' }, { hangup: true }]);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: to, webhook_url: receiver.url });
    const call = await waitForCall(t, tn, res.body.call_id);
    const event = await eventFor(call.call_id);
    assert.deepEqual(event.recording, call.recording);
    assert.equal(event.recording.status, 'completed');
    assert.ok(event.recording.duration > 1);
    const fetched = await fetch(event.recording_url);
    assert.equal(fetched.status, 200);
    assert.equal(fetched.headers.get('content-type'), 'audio/wav');
    assert.deepEqual(Buffer.from(await fetched.arrayBuffer()), (await download(call.call_id)).body);

    const plainAgent = await createPhoneAgent(t, tn, 'provider_a');
    const plainTo = sandboxNumber('7008');
    sandboxOf(t).setScript(plainTo, [{ waitForAgent: true }, { hangup: true }]);
    const plain = await placeCall(t, tn, { agent_id: plainAgent, to_number: plainTo, webhook_url: receiver.url });
    await waitForCall(t, tn, plain.body.call_id);
    const plainEvent = await eventFor(plain.body.call_id);
    assert.equal('recording' in plainEvent, false);
    assert.equal('recording_url' in plainEvent, false);
  });

  it("a batch may turn recording on or off for its calls, whatever the agent's setting", async () => {
    const off = await createPhoneAgent(t, tn, 'provider_b');
    const on = await createPhoneAgent(t, tn, 'provider_b', { recording: { enabled: true } });
    const run = async (agentId: string, recording: { enabled: boolean }, suffix: string) => {
      const to = sandboxNumber(suffix);
      sandboxOf(t).setScript(to, [{ waitForAgent: true }, { hangup: true }]);
      const res = await createBatch(t, tn, { agent_id: agentId, name: `rec ${suffix}`, recipients: [{ to_number: to }], recording });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      await waitForBatch(t, tn, res.body.batch_id);
      const [call] = await batchCalls(t, tn, res.body.batch_id);
      return getCall(t, tn, call.call_id);
    };
    const recorded = await run(off, { enabled: true }, '7009');
    assert.equal(recorded.recording?.status, 'completed');
    const unrecorded = await run(on, { enabled: false }, '7010');
    assert.equal(unrecorded.recording, null);
    assert.equal(await recordingRows(unrecorded.call_id), 0);
  });

  it("the voicemail path: the machine's greeting in the left channel, the agent's message after the beep in the right", async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_a', {
      recording: { enabled: true },
      voicemail_config: { enabled: true, message: 'Hi, please call Acme Dental back.' },
    });
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber('0001') });
    const call = await waitForCall(t, tn, res.body.call_id);
    assert.equal(call.status, 'voicemail');
    const sim = simCall(call.call_sid);
    assert.ok(sim.agentAudioAfterBeepMs > 0, 'the machine recorded the message');
    const clip = sim.clips.find((c) => c.label === 'voicemail-greeting');
    assert.ok(clip);
    const wav = decodeWav((await download(call.call_id)).body as Buffer);
    const greeting = mulawToPcm16(fixture('audio/voicemail-greeting.ulaw-8k.raw'));
    // The machine starts its greeting as it answers, before the media stream is up: the recording
    // starts with the stream, inside the greeting, on a frame boundary.
    const first = Buffer.from(wav.left.buffer, wav.left.byteOffset, 320);
    let skipped = -1;
    for (let k = 0; k + 320 <= greeting.length; k += 320) {
      if (greeting.subarray(k, k + 320).equals(first)) {
        skipped = k;
        break;
      }
    }
    assert.ok(skipped >= 0 && clip.streamMs === 0, 'the recording starts inside the greeting');
    assertSamplesAt(wav.left, greeting.subarray(skipped), 0, 'the rest of the voicemail greeting in the left channel');
    const afterBeep = (greeting.length - skipped) / 2 + 4000;
    assert.ok(loud(wav.right, afterBeep, wav.right.length) > 8000 * 0.5, 'the message is in the right channel after the beep');
  });

  it('a call in progress: its recording grows while it talks, can be downloaded so far, and cannot be deleted yet', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_b', { recording: { enabled: true } });
    const to = sandboxNumber('7011');
    sandboxOf(t).setScript(to, [{ waitForAgent: true }, { pause: 8000 }, { hangup: true }]);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    const live = await waitFor(
      async () => {
        const c = await getCall(t, tn, res.body.call_id);
        return c.status === 'in_progress' && c.recording?.duration > 0.5 ? c : null;
      },
      15_000,
      'a live recording',
    );
    assert.equal(live.recording.status, 'recording');
    const sofar = await download(live.call_id);
    assert.equal(sofar.status, 200);
    assert.ok(decodeWav(sofar.body as Buffer).left.length >= 4000);
    const del = await t.http.delete(`/api/v1/calls/${live.call_id}/recording`).set(bearer(tn.apiKey));
    assert.equal(del.status, 409);
    assert.equal(del.body.error.code, 'recording_in_progress');
    const done = await waitForCall(t, tn, live.call_id);
    assert.equal(done.recording.status, 'completed');
    assert.ok(done.recording.duration > live.recording.duration);
  });

  it('the size cap: a recording stops at RECORDING_MAX_BYTES and says truncated', async () => {
    const agentId = await createPhoneAgent(capped, cappedTenant, 'provider_a', { recording: { enabled: true } });
    const to = sandboxNumber('7012');
    capped.service.sandbox.carriers!.server.setScript(to, [{ waitForAgent: true }, { play: HELLO, label: 'hello' }, { hangup: true }]);
    const res = await placeCall(capped, cappedTenant, { agent_id: agentId, to_number: to });
    const call = await waitForCall(capped, cappedTenant, res.body.call_id);
    assert.equal(call.recording.truncated, true);
    assert.equal(call.recording.size_bytes, 44 + 32000);
    assert.equal(call.recording.duration, 1);
    const dl = await downloadRecording(capped, cappedTenant, call.call_id);
    assert.equal((dl.body as Buffer).length, 44 + 32000);
  });
});
