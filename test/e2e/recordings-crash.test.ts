/**
 * A crash mid-call keeps the recording up to its last flush: the service runs as a real process
 * against sandbox carriers in this test's process, a recorded call's caller plays fixture speech,
 * the process is killed with SIGKILL once that speech has been flushed, and after a restart on the same
 * database the call ends with its recording completed, holding at least everything flushed before the
 * crash, the caller's speech in the left channel where it was sent.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import supertest from 'supertest';
import { CRASH_TIMINGS, processEnv, signupWithKey, startProcess, type ServiceProcess } from '../helpers/process.js';
import { processRig } from '../helpers/process-rig.js';
import { providerConfig, sandboxNumber } from '../helpers/calls.js';
import { fixture, waitFor, waitWhileMoving } from '../helpers/realtime.js';
import { assertSamplesAt, binary, decodeWav } from '../helpers/recordings.js';
import { mulawToPcm16 } from '../../src/audio/pcm16.js';

const rig = processRig('rec-crash');
const HELLO = fixture('audio/caller-hello.ulaw-8k.raw');

describe('a crash mid-call', () => {
  it('keeps the recording up to the last flush', async () => {
    const env = await processEnv(rig.db.url, rig.dataDir, rig.carriers, { ...CRASH_TIMINGS, RECORDING_FLUSH_MS: '500' });
    let service: ServiceProcess = await startProcess(env);
    let http = supertest(service.url);
    const { auth } = await signupWithKey(http, 'Recording crash');
    const agent = await http
      .post('/api/v1/agents')
      .set(auth)
      .send({ name: 'Receptionist', first_message: 'Hello! This is Acme Dental.', recording: { enabled: true }, ...providerConfig('provider_a') });
    assert.equal(agent.status, 201, JSON.stringify(agent.body));
    const to = sandboxNumber('8101');
    rig.carriers.setScript(to, [{ waitForAgent: true }, { play: HELLO, label: 'hello' }, { pause: 60_000 }]);
    const placed = await http.post('/api/v1/calls').set(auth).send({ agent_id: agent.body.agent_id, to_number: to });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const callId = placed.body.call_id as string;
    const sim = () => rig.carriers.calls().find((c) => c.to === to)!;
    // Live, with the caller's speech played and flushed (a second past its end): waited for while the call moves on.
    const live = await waitWhileMoving(
      async () => {
        const c = (await http.get(`/api/v1/calls/${callId}`).set(auth)).body;
        const clip = sim()?.clips.find((x) => x.label === 'hello');
        const progress = JSON.stringify({
          status: c.status,
          end_reason: c.end_reason,
          recording: c.recording ?? null,
          clipAtMs: clip?.streamMs ?? null,
          carrier: sim()?.state ?? null,
        });
        const done = c.status === 'in_progress' && clip && c.recording && c.recording.duration * 1000 > clip.streamMs + HELLO.length / 8 + 1000;
        return { done: done ? c : null, progress };
      },
      30_000,
      'a live call whose recording holds the caller speech',
    );
    assert.equal(live.recording.status, 'recording');

    assert.equal(await service.stop('SIGKILL'), null);
    service = await startProcess(env);
    http = supertest(service.url);
    try {
      const call = await waitFor(
        async () => {
          const c = (await http.get(`/api/v1/calls/${callId}`).set(auth)).body;
          return ['completed', 'failed'].includes(c.status) ? c : null;
        },
        30_000,
        'the call to end after the restart',
      );
      assert.equal(call.recording.status, 'completed', 'completed by the instance that ended the call');
      assert.ok(call.recording.size_bytes >= live.recording.size_bytes, 'nothing flushed before the crash is lost');
      const dl = await binary(http.get(`/api/v1/calls/${callId}/recording`).set(auth));
      assert.equal(dl.status, 200);
      const wav = decodeWav(dl.body as Buffer);
      const clip = sim().clips.find((x) => x.label === 'hello')!;
      assertSamplesAt(wav.left, mulawToPcm16(HELLO), clip.streamMs * 8, 'the caller speech recorded before the crash');
    } finally {
      assert.equal(await service.stop('SIGTERM'), 0, service.output().slice(-2000));
    }
  });
});
