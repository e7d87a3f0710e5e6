/**
 * The S3-compatible recording storage against a local S3 server the test starts (s3rver): a recorded
 * call's (and a recorded web voice session's) chunks are objects in the bucket, the download (whole
 * and by Range) reads them back in order with the caller's (the user's) fixture speech where it was
 * sent, and deleting the recording removes its objects.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer, connect, createAgent, fixture, mintSession, waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';
import {
  assertSamplesAt,
  decodeWav,
  downloadRecording,
  downloadSessionRecording,
  fence,
  heldClock,
  loud,
  sendPcm,
  sessionRecord,
} from '../helpers/recordings.js';
import { startLocalS3, type LocalS3 } from '../helpers/s3.js';
import { mulawToPcm16 } from '../../src/audio/pcm16.js';

let s3: LocalS3;
let t: TestService;
let tn: Tenant;
let client: S3Client;
const HELLO = fixture('audio/caller-hello.ulaw-8k.raw');
const WEB_HELLO = fixture('audio/caller-hello.pcm16le-16k.raw');
const rec = heldClock();

before(async () => {
  s3 = await startLocalS3();
  t = await startTestService({ ...FAST_CALLS, ...s3.env, RECORDING_FLUSH_MS: '250' }, { recordingClock: rec.clock });
  tn = await tenant(t);
  client = new S3Client({
    region: 'us-east-1',
    endpoint: s3.endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: s3.env.RECORDING_S3_ACCESS_KEY_ID, secretAccessKey: s3.env.RECORDING_S3_SECRET_ACCESS_KEY },
  });
});

after(async () => {
  client?.destroy();
  await t?.close();
  await s3?.close();
});

async function objectsOf(prefix: string): Promise<string[]> {
  const res = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix }));
  return (res.Contents ?? []).map((o) => o.Key!).sort();
}

describe('recordings in S3-compatible storage', () => {
  it('a recorded call is stored as objects, read back in order, by Range too, and deleted with its recording', async () => {
    const agentId = await createPhoneAgent(t, tn, 'provider_b', { recording: { enabled: true } });
    const to = sandboxNumber('7101');
    const sandbox = t.service.sandbox.carriers!.server;
    sandbox.setScript(to, [{ waitForAgent: true }, { play: HELLO, label: 'hello' }, { waitForAgent: true }, { hangup: true }]);
    const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
    const call = await waitForCall(t, tn, res.body.call_id);
    assert.equal(call.status, 'completed');
    assert.equal(call.recording.status, 'completed');

    const [row] = await t.service.db.knex('recordings').where({ conversation_id: call.call_id });
    assert.equal(row.storage, 's3');
    const prefix = `recordings/${row.workspace_id}/${row.id}/`;
    const keys = await objectsOf(prefix);
    assert.equal(keys.length, row.chunks, 'one object per chunk');
    assert.ok(keys.length > 1, 'written as the call went, not at the end');
    const inline = await t.service.db.knex('recording_chunks').where({ recording_id: row.id }).whereNotNull('data');
    assert.equal(inline.length, 0, 'no audio in the database');

    const whole = await downloadRecording(t, tn, call.call_id);
    assert.equal(whole.status, 200);
    assert.equal(Number(whole.headers['content-length']), call.recording.size_bytes);
    const wav = decodeWav(whole.body as Buffer);
    const clip = sandbox
      .calls()
      .find((c) => c.callSid === call.call_sid)!
      .clips.find((c) => c.label === 'hello')!;
    assertSamplesAt(wav.left, mulawToPcm16(HELLO), clip.streamMs * 8, 'the caller fixture in the left channel');
    assert.ok(loud(wav.right, 0, clip.streamMs * 8) > 4000, 'the agent in the right channel');

    // A range across chunk boundaries.
    const part = await downloadRecording(t, tn, call.call_id, { Range: 'bytes=30000-70043' });
    assert.equal(part.status, 206);
    assert.deepEqual(part.body, (whole.body as Buffer).subarray(30000, 70044));

    const del = await t.http.delete(`/api/v1/calls/${call.call_id}/recording`).set(bearer(tn.apiKey));
    assert.equal(del.status, 200);
    assert.deepEqual(await objectsOf(prefix), [], 'its objects are gone');
    const gone = await t.http.get(`/api/v1/calls/${call.call_id}/recording`).set(bearer(tn.apiKey));
    assert.equal(gone.status, 404);
    assert.equal(gone.body.error.reason, 'deleted');
  });

  it('a recorded web voice session is stored the same way: objects in order, the user speech where it was sent, deleted with it', async () => {
    const agentId = await createAgent(t, tn, { recording: { enabled: true } });
    rec.hold();
    let sessionId: string;
    try {
      const c = connect((await mintSession(t, tn, agentId, 'voice')).ws_url);
      sessionId = String((await c.next('session_started')).session_id);
      await c.next('turn_complete');
      rec.move(500);
      sendPcm(c, WEB_HELLO);
      await fence(c);
      rec.move(WEB_HELLO.length / 32 + 1000);
      // Flushed as it goes (the rest, the last quarter second, when it ends).
      const chunks = () =>
        t.service.db.knex('recording_chunks').join('recordings', 'recordings.id', 'recording_chunks.recording_id').where({ conversation_id: sessionId });
      await waitFor(async () => (await chunks()).length > 0, 5000, 'a chunk written while the session goes on');
      await c.close();
      // The clock is held until the session has been finalised (its recording ends by it).
      await sessionRecord(t, tn, sessionId);
    } finally {
      rec.release();
    }
    const body = await sessionRecord(t, tn, sessionId);
    assert.equal(body.recording.status, 'completed');
    const [row] = await t.service.db.knex('recordings').where({ conversation_id: sessionId });
    assert.equal(row.storage, 's3');
    assert.equal(row.kind, 'web_session');
    const prefix = `recordings/${row.workspace_id}/${row.id}/`;
    assert.ok(row.chunks >= 2, 'written as the session went, not at the end');
    assert.equal((await objectsOf(prefix)).length, row.chunks, 'one object per chunk');

    const whole = await downloadSessionRecording(t, tn, sessionId);
    assert.equal(whole.status, 200);
    assert.equal(Number(whole.headers['content-length']), body.recording.size_bytes);
    const wav = decodeWav(whole.body as Buffer);
    assert.equal(wav.sampleRate, 16000);
    assertSamplesAt(wav.left, WEB_HELLO, 500 * 16, 'the user fixture in the left channel');
    assert.ok(loud(wav.right, 0, 500 * 16) > 0, 'the agent in the right channel');
    const part = await downloadSessionRecording(t, tn, sessionId, { Range: 'bytes=60000-140043' });
    assert.equal(part.status, 206);
    assert.deepEqual(part.body, (whole.body as Buffer).subarray(60000, 140044));

    const del = await t.http.delete(`/api/v1/realtime/conversations/${sessionId}/recording`).set(bearer(tn.apiKey));
    assert.equal(del.status, 200);
    assert.deepEqual(await objectsOf(prefix), [], 'its objects are gone');
  });
});
