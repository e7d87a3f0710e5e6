/**
 * A carrier's media stream that overtakes the dial's own record (issue 34): the carrier answered and
 * opened the call's stream while the call was still `queued` (the answer to the dial request, which
 * records `initiated` and the carrier's id, not written yet, and no status report in). provider_b
 * gives the stream in the dial request, so its stream can come first; provider_a gives one only in
 * its answer to the voice webhook, which records the answer first. The order is fixed, not won: the
 * dial's answer is held until the stream has been taken or refused, and the carriers' status reports
 * are off meanwhile. A stream that does not belong to the call is still refused.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall, type Provider } from '../helpers/calls.js';
import type { SandboxCarriers } from '../../src/sandbox/carriers/server.js';
import type { DialRequest } from '../../src/carriers/index.js';

let t: TestService;

before(async () => {
  t = await startTestService(FAST_CALLS);
});

after(async () => {
  await t.close();
});

const sandbox = (): SandboxCarriers => t.service.sandbox.carriers!.server;

/** Replaces the carrier's dial request with `around` for the test's duration (the real one is `dial`). */
function holdDial(provider: Provider, around: (dial: () => ReturnType<DialRest['dial']>, request: DialRequest) => ReturnType<DialRest['dial']>): () => void {
  const rest = t.service.telephony.carriers.get(provider).rest;
  const dial = rest.dial.bind(rest);
  rest.dial = (credentials, request: DialRequest) => around(() => dial(credentials, request), request);
  return () => Reflect.deleteProperty(rest, 'dial');
}
type DialRest = ReturnType<TestService['service']['telephony']['carriers']['get']>['rest'];

/** A media stream presenting `token` for `callId` on `provider`'s endpoint; resolves with its close code. */
async function foreignStream(provider: Provider, callId: string, token: string): Promise<number> {
  const ws = new WebSocket(`${t.url.replace('http', 'ws')}/telephony/${provider}/media`);
  await new Promise((r) => ws.once('open', r));
  const closed = new Promise<number>((r) => ws.once('close', (code) => r(code)));
  const start =
    provider === 'provider_a'
      ? {
          event: 'start',
          sequenceNumber: '1',
          streamSid: 'MZforeign',
          start: {
            accountSid: 'AC1',
            streamSid: 'MZforeign',
            callSid: 'CAforeign',
            tracks: ['inbound'],
            mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
            customParameters: { call_id: callId, stream_token: token },
          },
        }
      : {
          event: 'start',
          sequence_number: '1',
          stream_id: 'foreign',
          start: {
            call_control_id: 'v3:foreign',
            client_state: Buffer.from(JSON.stringify({ call_id: callId, stream_token: token })).toString('base64'),
            media_format: { encoding: 'PCMU', sample_rate: 8000, channels: 1 },
          },
        };
  ws.send(JSON.stringify(start));
  // A stream that was taken would stay open: closed after a while so the test ends either way.
  const timer = setTimeout(() => ws.close(1000), 10_000);
  const code = await closed;
  clearTimeout(timer);
  return code;
}

for (const provider of ['provider_a', 'provider_b'] as Provider[]) {
  describe(`${provider}: a media stream arriving while its call is still queued`, () => {
    let tn: Tenant;
    let agentId: string;
    before(async () => {
      tn = await tenant(t);
      agentId = await createPhoneAgent(t, tn, provider, { first_message: 'Hello from Acme.' });
    });

    it('is taken when it is the call’s own: the conversation runs and the call completes', async () => {
      const to = sandboxNumber();
      sandbox().setScript(to, [{ waitForAgent: true }, { hangup: true }]);
      let statusWhenJudged: string | undefined;
      let callId: string | undefined;
      sandbox().setCallbacksEnabled(false);
      const restore = holdDial(provider, async (dial, request) => {
        const placed = await dial();
        // The carrier answers and streams; the service takes the stream (the agent speaks) or refuses it.
        await sandbox().waitForCall((c) => c.callSid === placed.callSid && (c.agentAudioMs > 0 || c.streamClosedBy === 'service'), 60_000);
        statusWhenJudged = (await t.service.db.knex('calls').where({ id: request.callId }).first()).status;
        sandbox().setCallbacksEnabled(true);
        return placed;
      });
      try {
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        callId = res.body.call_id as string;
        const call = await waitForCall(t, tn, callId);
        const sim = sandbox()
          .calls()
          .find((c) => c.to === to)!;
        assert.notEqual(sim.streamCloseCode, 1008, 'the stream was not refused');
        assert.ok(sim.agentAudioMs > 0, 'the person heard the agent');
        assert.equal(statusWhenJudged, 'in_progress', 'the stream answered the call');
        assert.deepEqual([call.status, call.call_sid, call.first_message_delivered], ['completed', sim.callSid, true], JSON.stringify(call));
        assert.ok(call.answered_at);
      } finally {
        sandbox().setCallbacksEnabled(true);
        restore();
      }
    });

    it('is refused (1008) when it does not belong to the call, which goes on with its own stream', async () => {
      const to = sandboxNumber();
      sandbox().setScript(to, [{ waitForAgent: true }, { hangup: true }]);
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let asked!: (callId: string) => void;
      const dialing = new Promise<string>((r) => (asked = r));
      const restore = holdDial(provider, async (dial, request) => {
        asked(request.callId);
        await released;
        return dial();
      });
      try {
        const res = await placeCall(t, tn, { agent_id: agentId, to_number: to });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        const callId = res.body.call_id as string;
        assert.equal(await dialing, callId);
        assert.equal(await foreignStream(provider, callId, 'not-the-token'), 1008, 'a wrong token is refused');
        const other = provider === 'provider_a' ? 'provider_b' : 'provider_a';
        assert.equal(await foreignStream(other, callId, 'not-the-token'), 1008, "another carrier's endpoint is refused");
        const row = await t.service.db.knex('calls').where({ id: callId }).first();
        assert.deepEqual([row.status, row.media_started_at], ['queued', null], 'the refused streams changed nothing');
        release();
        const call = await waitForCall(t, tn, callId);
        assert.deepEqual([call.status, call.first_message_delivered], ['completed', true], JSON.stringify(call));
      } finally {
        release();
        restore();
      }
    });
  });
}
