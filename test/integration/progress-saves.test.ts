/**
 * Progress saves of live conversations (src/conversation/progress-saves.ts): every conversation that
 * changed in a tick is written by one statement, only while a call is live, in statements of bounded
 * size (the event loop free between them); `settle` drops what is pending and waits for a write
 * under way that holds its conversation, and only for that; a web session's change made before its row exists is saved once it does.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import type { Knex } from 'knex';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent } from '../helpers/calls.js';
import { CallStore } from '../../src/calls/store.js';
import { ProgressSaves, type ProgressColumns, type ProgressJson } from '../../src/conversation/progress-saves.js';
import { LiveSessions } from '../../src/realtime/live-sessions.js';

const silent = pino({ level: 'silent' });
const TICK_MS = 40;

const progress = (text: string, turns = 1): ProgressColumns => ({
  transcript: Array.from({ length: turns }, (_, i) => ({ role: 'user' as const, text: `${text} ${i}`, timestamp: 1_795_000_000 })),
  transcript_truncated: false,
  interruption_count: turns,
  latencies_ms: [120],
  tool_calls: [],
  first_message_delivered: true,
});

describe('progress saves of live conversations', () => {
  let t: TestService;
  let tn: Tenant;
  let agentId: string;
  let knex: Knex;
  let store: CallStore;
  /** The progress statements sent since the last reset. */
  let statements = 0;
  let n = 0;

  /** A call row in `status`, as the call service would have written it. */
  async function call(status: string): Promise<string> {
    const id = `call_progress_${++n}_${Date.now()}`;
    await knex('calls').insert({
      id,
      workspace_id: tn.workspaceId,
      agent_id: agentId,
      direction: 'outbound',
      provider: 'provider_a',
      from_number: '+15005550006',
      to_number: '+15005550100',
      instruction: 'Say hello.',
      deadline_at: new Date(Date.now() + 60_000),
      status,
    });
    return id;
  }
  const transcriptOf = async (id: string) => ((await knex('calls').where({ id }).first('transcript')) as { transcript: Array<{ text: string }> }).transcript;

  before(async () => {
    t = await startTestService(FAST_CALLS);
    tn = await tenant(t);
    agentId = await createPhoneAgent(t, tn, 'provider_a');
    knex = t.service.db.knex;
    store = new CallStore(knex);
    knex.on('query', (q: { sql: string }) => {
      if (q.sql.includes('jsonb_to_recordset')) statements++;
    });
  });
  after(async () => {
    await t?.close();
  });

  it('writes every call that changed in a tick in one statement, the latest change of each, and only calls still live', async () => {
    const saves = new ProgressSaves((s) => store.saveProgress(s), TICK_MS, silent);
    const live = [await call('in_progress'), await call('ringing'), await call('in_progress')];
    const ended = await call('completed');
    statements = 0;
    for (const round of [1, 2, 3]) for (const id of [...live, ended]) saves.changed(id, () => progress(`${id} round ${round}`, round));
    await waitFor(async () => ((await transcriptOf(live[2])).length === 3 ? true : null), 5000, 'the tick');
    await saves.settle(live[0]);
    assert.equal(statements, 1, 'one statement for the four conversations');
    for (const id of live)
      assert.deepEqual(
        (await transcriptOf(id)).map((turn) => turn.text),
        [0, 1, 2].map((i) => `${id} round 3 ${i}`),
      );
    assert.deepEqual(await transcriptOf(ended), [], 'an ended call keeps its final record');
    saves.stop();
  });

  it('settle drops a change not yet written and waits for a write under way that holds its conversation, not for others', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let writes = 0;
    const saves = new ProgressSaves(
      async (s) => {
        writes++;
        await gate;
        await store.saveProgress(s);
      },
      TICK_MS,
      silent,
    );
    const [pending, underWay] = [await call('in_progress'), await call('in_progress')];

    saves.changed(pending, () => progress('never'));
    await saves.settle(pending);
    saves.changed(underWay, () => progress('slow'));
    await waitFor(async () => (writes === 1 ? true : null), 5000, 'the write to start');
    let settled = false;
    const settling = saves.settle(underWay).then(() => (settled = true));
    // Conversations the held write does not hold end at once: one never changed, one changed since the
    // tick took its conversations (settled before the next tick takes it).
    const [quiet, since] = [await call('in_progress'), await call('in_progress')];
    const promptly = (settle: Promise<void>, what: string) =>
      Promise.race([settle, new Promise((_, reject) => setTimeout(() => reject(new Error(`${what} waited for the held write`)), 5000))]);
    await promptly(saves.settle(quiet), 'settle of a conversation never changed');
    saves.changed(since, () => progress('after the tick'));
    await promptly(saves.settle(since), 'settle of a conversation changed after the tick');
    await new Promise((r) => setTimeout(r, 3 * TICK_MS));
    assert.equal(settled, false, 'settle waits for the write under way');
    release();
    await settling;
    assert.deepEqual(
      (await transcriptOf(underWay)).map((turn) => turn.text),
      ['slow 0'],
      'written before settle resolved',
    );
    assert.deepEqual(await transcriptOf(pending), [], 'the settled change was dropped');
    assert.deepEqual(await transcriptOf(since), [], 'so was the change made after the tick');
    assert.equal(writes, 1);
    saves.stop();
  });

  it('skips a conversation with nothing to save, and splits a tick too large for one statement', async () => {
    const batches: number[] = [];
    const saves = new ProgressSaves(
      async (s: ProgressJson[]) => {
        batches.push(s.length);
        await store.saveProgress(s);
      },
      TICK_MS,
      silent,
    );
    const ids = [await call('in_progress'), await call('in_progress'), await call('in_progress'), await call('in_progress')];
    const nothing = await call('in_progress');
    statements = 0;
    // Four transcripts of about 400 kB each: more than one statement's share (1 MB) together.
    for (const id of ids) saves.changed(id, () => progress(`${id} ${'x'.repeat(4000)}`, 100));
    saves.changed(nothing, () => null);
    await waitFor(async () => ((await transcriptOf(ids[3])).length === 100 ? true : null), 10_000, 'the tick');
    await saves.settle(ids[0]);
    assert.equal(
      batches.reduce((a, b) => a + b, 0),
      4,
      'the four saves, the one with nothing left out',
    );
    assert.ok(batches.length >= 2 && batches.length <= 4, `written in ${batches.length} statements`);
    assert.equal(statements, batches.length, 'one statement for each');
    for (const id of ids) assert.equal((await transcriptOf(id)).length, 100);
    assert.deepEqual(await transcriptOf(nothing), []);
    saves.stop();
  });

  it('a web session: a change before its row exists is saved once it does; none after it settles', async () => {
    const sessions = new LiveSessions(knex, silent, TICK_MS);
    const id = `conv_progress_${Date.now()}`;
    sessions.open({
      id,
      workspace_id: tn.workspaceId,
      agent_id: agentId,
      agent_version: 1,
      user_id: 'user_1',
      source: 'text',
      instruction: 'Say hello.',
      first_message: null,
      variables: {},
      analysis: null,
      analysis_model: null,
      redaction: null,
      started_at: new Date(),
      recording_enabled: false,
    });
    const outcome = (text: string) => ({
      transcript: [{ role: 'user' as const, text, timestamp: 1_795_000_000 }],
      transcriptTruncated: false,
      interruptionCount: 0,
      latenciesMs: [],
      toolCalls: [],
      firstMessageDelivered: false,
    });
    // Changed at once, before the insert has had a chance to finish.
    sessions.changed(id, () => outcome('early'));
    const saved = async () =>
      ((await knex('realtime_live_sessions').where({ id }).first('transcript')) as { transcript: Array<{ text: string }> } | undefined)?.transcript;
    await waitFor(async () => ((await saved())?.[0]?.text === 'early' ? true : null), 5000, 'the early change');
    await sessions.settle(id);
    sessions.changed(id, () => outcome('too late'));
    await new Promise((r) => setTimeout(r, 600));
    assert.equal((await saved())?.[0]?.text, 'early');
    sessions.forget(id);
    sessions.stop();
  });
});
