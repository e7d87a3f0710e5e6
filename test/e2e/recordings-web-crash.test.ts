/**
 * A crash mid web session keeps its recording up to the last flush: the service runs as a real
 * process, a recorded voice session's user sends fixture speech, the process is killed with SIGKILL
 * once that speech has been flushed (its recording read back while the session is live), and after a
 * restart on the same database the orphaned session is finalised with its recording completed: what
 * was stored before the crash is its unchanged start, the user's speech in the left channel where it
 * was before, and its `call.completed` carrying it.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import supertest from 'supertest';
import { processEnv, signupWithKey, startProcess, type ServiceProcess } from '../helpers/process.js';
import { processRig } from '../helpers/process-rig.js';
import { connect, fixture, waitFor } from '../helpers/realtime.js';
import { assertSamplesAt, binary, decodeWav, fence, findSamples, sendPcm } from '../helpers/recordings.js';

const rig = processRig('web-rec-crash');
const HELLO = fixture('audio/caller-hello.pcm16le-16k.raw');

describe('a crash mid web session', () => {
  it('keeps the recording up to the last flush', async () => {
    const env = await processEnv(rig.db.url, rig.dataDir, rig.carriers, {
      REALTIME_LEASE_HEARTBEAT_MS: '200',
      REALTIME_LEASE_EXPIRY_MS: '1500',
      VOICE_SANDBOX_SPEED: '20',
      VOICE_SANDBOX_MS_PER_CHAR: '0',
      RECORDING_FLUSH_MS: '500',
      // The fixture is sent at once (audio beyond the budget is dropped before it is recorded).
      REALTIME_AUDIO_BURST_MS: '60000',
    });
    let service: ServiceProcess = await startProcess(env);
    let http = supertest(service.url);
    const { auth } = await signupWithKey(http, 'Web recording crash');
    const hook = await http
      .post('/api/v1/webhooks')
      .set(auth)
      .send({ url: rig.receiver.url, events: ['call.completed'] });
    assert.equal(hook.status, 201, JSON.stringify(hook.body));
    const agent = await http
      .post('/api/v1/agents')
      .set(auth)
      .send({ name: 'Helper', instruction: 'You help visitors of Acme Dental.', first_message: 'Hello!', recording: { enabled: true } });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    const minted = await http.post('/api/v1/realtime/sessions').set(auth).send({ agent_id: agent.body.agent_id, user_id: 'visitor-rec', source: 'voice' });
    assert.equal(minted.status, 201, JSON.stringify(minted.body));
    const c = connect(minted.body.ws_url);
    const sessionId = String((await c.next('session_started')).session_id);
    sendPcm(c, HELLO);
    await fence(c);
    const path = `/api/v1/realtime/conversations/${sessionId}/recording`;
    // Live, with the user's speech flushed and a second after it.
    const before = await waitFor(
      async () => {
        const res = await binary(http.get(path).set(auth));
        if (res.status !== 200) return null;
        const wav = decodeWav(res.body as Buffer);
        const at = findSamples(wav.left, HELLO);
        return at >= 0 && wav.left.length >= at + HELLO.length / 2 + 16_000 ? { body: res.body as Buffer, at } : null;
      },
      30_000,
      "a live session's recording holding the user's speech",
    );

    assert.equal(await service.stop('SIGKILL'), null);
    c.ws.terminate();
    service = await startProcess(env);
    http = supertest(service.url);
    try {
      const record = await waitFor(
        async () => {
          const res = await http.get(`/api/v1/realtime/conversations/${sessionId}`).set(auth);
          return res.status === 200 ? res.body : null;
        },
        30_000,
        'the session to be finalised after the restart',
      );
      assert.equal(record.end_reason, 'instance_lost');
      assert.equal(record.recording.status, 'completed', 'completed by the instance that finalised the session');
      const after = (await binary(http.get(path).set(auth))).body as Buffer;
      assert.ok(after.length >= before.body.length, 'nothing flushed before the crash is lost');
      assert.deepEqual(after.subarray(44, before.body.length), before.body.subarray(44), 'what was stored is the unchanged start');
      assertSamplesAt(decodeWav(after).left, HELLO, before.at, 'the user speech recorded before the crash');
      await waitFor(async () => rig.completedFor(sessionId).length > 0 || null, 10_000, 'call.completed');
      const [event] = rig.completedFor(sessionId);
      assert.deepEqual(event.recording, record.recording, 'call.completed carries the completed recording');
    } finally {
      assert.equal(await service.stop('SIGTERM'), 0, service.output().slice(-2000));
    }
  });
});
