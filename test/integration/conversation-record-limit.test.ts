/**
 * A conversation record always saves: a session that sends text past the record's size limit keeps
 * running, and its record (and call.completed) keep the entries that fit, say `transcript_truncated`,
 * and are billed and reported like any other. Also at the default limit (512 KiB) with the largest
 * text frames the WebSocket takes.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant } from '../helpers/fixtures.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { bearer, connect, createAgent, mintSession, waitFor } from '../helpers/realtime.js';

// The session's typed-message budget (burst 10, then 1 a second) is lifted: this test is about the record, not the budget.
const FAST = { VOICE_SANDBOX_SPEED: '50', VOICE_SANDBOX_MS_PER_CHAR: '0', REALTIME_TEXT_BURST: '1000' };
const b64 = (s: string) => Buffer.from(s).toString('base64');

let receiver: Receiver;
before(async () => {
  receiver = await startReceiver();
});
after(async () => {
  await receiver.close();
});

async function runSession(t: TestService, messages: string[]): Promise<{ sessionId: string; workspaceId: string; apiKey: string }> {
  const tn = await tenant(t);
  assert.equal(
    (
      await t.http
        .post('/api/v1/webhooks')
        .set(bearer(tn.apiKey))
        .send({ url: receiver.url, events: ['call.completed'] })
    ).status,
    201,
  );
  const agentId = await createAgent(t, tn);
  const c = connect((await mintSession(t, tn, agentId, 'text')).ws_url);
  const sessionId = String((await c.next('session_started')).session_id);
  await c.next('turn_complete');
  for (const text of messages) {
    c.sendFrame('text/plain', b64(text));
    await c.next('turn_complete', 10_000);
  }
  // Still answering after the limit: the conversation goes on.
  c.sendFrame('text/plain', b64('Are you still there?'));
  assert.ok((await c.next('text', 10_000)).text);
  await c.next('turn_complete', 10_000);
  await c.close();
  return { sessionId, workspaceId: tn.workspaceId, apiKey: tn.apiKey };
}

function bytesOf(entries: unknown[]): number {
  return entries.reduce<number>((n, e) => n + Buffer.byteLength(JSON.stringify(e)), 0);
}

describe('conversation record size limit', () => {
  it('keeps what fits, says transcript_truncated, and still records, bills and reports the session', async () => {
    const t = await startTestService({ ...FAST, CONVERSATION_RECORD_MAX_BYTES: '4096' });
    try {
      const messages = Array.from({ length: 12 }, (_, i) => `Message ${i}: ${'x'.repeat(600)}`);
      const { sessionId, workspaceId, apiKey } = await runSession(t, messages);
      const record = await waitFor(
        async () => {
          const res = await t.http.get(`/api/v1/realtime/conversations/${sessionId}`).set(bearer(apiKey));
          return res.status === 200 ? res.body : null;
        },
        8000,
        'the record',
      );
      assert.equal(record.transcript_truncated, true);
      assert.equal(record.status, 'completed');
      assert.ok(record.transcript.length < messages.length * 2, `kept ${record.transcript.length} entries`);
      assert.ok(record.transcript.length > 0);
      assert.equal(record.message_count, record.transcript.length);
      assert.ok(bytesOf(record.transcript) <= 4096, 'within the limit');
      assert.ok(!record.transcript.some((e: { text: string }) => e.text === 'Are you still there?'), 'nothing after the limit');
      const event = await waitFor(async () => receiver.requests.find((r) => r.rawBody.toString().includes(sessionId)), 8000, 'call.completed');
      const body = JSON.parse(event.rawBody.toString());
      assert.equal(body.transcript_truncated, true);
      assert.deepEqual(body.transcript, record.transcript);
      const usage = await t.service.db.knex('usage_records').where({ workspace_id: workspaceId, ref_id: sessionId });
      assert.equal(usage.length, 1, 'the session is metered');
    } finally {
      await t.close();
    }
  });

  it('at the default limit: 48 text frames of 15 KiB (720 KiB) give a saved, truncated record under 512 KiB', async () => {
    const t = await startTestService(FAST);
    try {
      const messages = Array.from({ length: 48 }, (_, i) => `${i} ${'y'.repeat(15 * 1024)}`);
      const { sessionId } = await runSession(t, messages);
      const row = await waitFor(() => t.service.realtime.store.getConversation(sessionId), 8000, 'the record');
      assert.equal(row.transcript_truncated, true);
      assert.ok(bytesOf(row.transcript) <= 512 * 1024);
      assert.ok(bytesOf(row.transcript) > 400 * 1024, 'keeps what fits');
    } finally {
      await t.close();
    }
  });

  it('a short conversation is not truncated', async () => {
    const t = await startTestService(FAST);
    try {
      const { sessionId } = await runSession(t, ['What are your opening hours?']);
      const row = await waitFor(() => t.service.realtime.store.getConversation(sessionId), 8000, 'the record');
      assert.equal(row.transcript_truncated, false);
    } finally {
      await t.close();
    }
  });
});
