/**
 * Batches across a crash and across instances. The service runs as real processes against sandbox
 * carriers living in this test's process (so they outlive a killed service); every fact is checked
 * at the carrier (who was dialed, how often), through the API (recipients, calls) and at a webhook
 * receiver (call.completed, batch.completed):
 * - SIGKILL mid-batch, then a restart on the same database: the batch finishes, every recipient is
 *   called once, every call ends and is reported once, and `batch.completed` is raised once;
 * - two instances on one database share the dispatch rounds and the calls' jobs: again every
 *   recipient once and one `batch.completed`.
 *
 * At-most-once windows. A call's dial is claimed right before the carrier is asked (src/calls/jobs.ts;
 * a dial job the dead instance took but never claimed is dialed by the call's deadline job), and a
 * webhook delivery claimed before it is sent is never re-sent (src/webhooks/delivery.ts): a kill
 * inside one of those windows leaves that one dial or delivery at "at most once". The test reads the
 * database right after the kill and allows zero only for what was in such a window then; everything
 * else must have happened exactly once. A kill during a call's finalisation would hold that call for
 * minutes (by design: src/calls/finaliser.ts), so the kill is placed outside one (killOutsideFinalisation).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import supertest from 'supertest';
import { CRASH_TIMINGS, processEnv, signupWithKey, startProcess, type ServiceProcess } from '../helpers/process.js';
import { createTestDatabase } from '../helpers/database.js';
import { startReceiver, type Receiver } from '../helpers/webhooks.js';
import { providerConfig } from '../helpers/calls.js';
import { sandboxNumbers } from '../helpers/batches.js';
import { operator, waitFor } from '../helpers/realtime.js';
import { ADMIN_TOKEN } from '../helpers/service.js';
import { startSandboxCarriers, type SandboxCarriers } from '../../src/sandbox/carriers/server.js';

type Http = ReturnType<typeof supertest>;
type Auth = { Authorization: string };
type Json = Record<string, any>;

const LIVE_CALL = ['queued', 'initiated', 'ringing', 'in_progress'];
const TERMINAL_CALL = new Set(['completed', 'busy', 'no_answer', 'failed', 'canceled', 'voicemail']);
const TERMINAL_RECIPIENT = new Set(['completed', 'failed', 'voicemail', 'no_answer', 'busy', 'canceled']);
/** A person answers, hears the agent's first message, stays on the line a little, then hangs up. */
const PERSON = [{ waitForAgent: true }, { pause: 3000 }, { hangup: true }] as const;

let carriers: SandboxCarriers;
const dataDirs: string[] = [];

before(async () => {
  carriers = await startSandboxCarriers({ speed: 2, ringMs: 50 });
});

after(async () => {
  await carriers.close();
  for (const d of dataDirs) fs.rmSync(d, { recursive: true, force: true });
});

/** One instance's settings; instances of one deployment share the database and the secrets key. */
async function instanceEnv(dbUrl: string, secretsKey: string): Promise<Record<string, string>> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-batch-crash-'));
  dataDirs.push(dataDir);
  return processEnv(dbUrl, dataDir, carriers, {
    ADMIN_TOKEN,
    SECRETS_KEY: secretsKey,
    ...CRASH_TIMINGS,
    BATCH_CAPACITY_RETRY_MS: '200',
    SHUTDOWN_GRACE_MS: '2000',
    // The test server's connections are shared (max_connections is 100 by default).
    DATABASE_POOL_MAX: '6',
    JOBS_CONCURRENCY: '4',
  });
}

/** A workspace with an API key, the receiver registered for every event, room for `limit` calls, and a phone agent. */
async function setUp(http: Http, receiver: Receiver, limit: number): Promise<{ auth: Auth; agentId: string }> {
  const { auth, workspaceId } = await signupWithKey(http, 'Batches');
  const hook = await http.post('/api/v1/webhooks').set(auth).send({ url: receiver.url });
  assert.equal(hook.status, 201, JSON.stringify(hook.body));
  const ws = await http.patch(`/admin/v1/workspaces/${workspaceId}`).set(operator).send({ concurrent_session_limit: limit, credit_balance_cents: 1_000_000 });
  assert.equal(ws.status, 200, JSON.stringify(ws.body));
  const agent = await http
    .post('/api/v1/agents')
    .set(auth)
    .send({
      name: 'Reminder',
      instruction: 'You remind patients of their appointment.',
      first_message: 'Hello! This is Acme Dental.',
      ...providerConfig('provider_a'),
    });
  assert.equal(agent.status, 201, JSON.stringify(agent.body));
  return { auth, agentId: agent.body.agent_id as string };
}

async function createBatch(http: Http, auth: Auth, body: Json): Promise<string> {
  const res = await http.post('/api/v1/batches').set(auth).send(body);
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.batch_id as string;
}

async function getBatch(http: Http, auth: Auth, batchId: string): Promise<Json> {
  const res = await http.get(`/api/v1/batches/${batchId}`).set(auth);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

/** Every call of the batch, all pages. */
async function batchCalls(http: Http, auth: Auth, batchId: string): Promise<Json[]> {
  const out: Json[] = [];
  let cursor: string | null = null;
  do {
    const res: { status: number; body: Json } = await http
      .get('/api/v1/calls')
      .query({ batch_id: batchId, limit: 7, ...(cursor ? { starting_after: cursor } : {}) })
      .set(auth);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    out.push(...res.body.data);
    cursor = res.body.has_more ? res.body.next_cursor : null;
  } while (cursor);
  return out;
}

function events(receiver: Receiver): Array<{ body: Json }> {
  return receiver.requests.map((r) => ({ body: JSON.parse(r.rawBody.toString()) as Json }));
}

/** Calls whose dial or call.completed delivery was in an at-most-once window when the service died. */
interface InDoubt {
  dial: Set<string>;
  delivery: Set<string>;
}

/**
 * The exactly-once facts of a finished batch: one call per recipient, one dial per number at the
 * carrier, one call.completed per call, one batch.completed, counts that add up.
 */
async function assertExactlyOnce(
  http: Http,
  auth: Auth,
  batchId: string,
  numbers: string[],
  receiver: Receiver,
  doubt: InDoubt = { dial: new Set(), delivery: new Set() },
  finishWithinMs = 45_000,
): Promise<{ batch: Json; calls: Json[]; lost: { dials: number; deliveries: number } }> {
  const batch = await waitFor(
    async () => {
      const b = await getBatch(http, auth, batchId);
      return b.completed_at ? b : null;
    },
    finishWithinMs,
    'the batch to finish',
  ).catch(async (err) => {
    const b = await getBatch(http, auth, batchId);
    const byStatus = b.recipients.reduce((acc: Json, r: Json) => ((acc[r.status] = (acc[r.status] ?? 0) + 1), acc), {});
    const calls = await batchCalls(http, auth, batchId);
    const live = calls.filter((c) => !TERMINAL_CALL.has(c.status)).map((c) => `${c.call_id}:${c.status}:${c.to_number}`);
    throw new Error(`${(err as Error).message}: batch ${b.status}, recipients ${JSON.stringify(byStatus)}, live calls ${live.join(' ')}`);
  });
  assert.equal(batch.status, 'completed');
  assert.equal(batch.total, numbers.length);
  assert.equal(batch.completed_count + batch.failed_count + batch.voicemail_count, batch.total, 'counts add up');

  // Every recipient terminal after one attempt, with one call.
  assert.equal(batch.recipients.length, numbers.length);
  assert.deepEqual(new Set(batch.recipients.map((r: Json) => r.to_number)), new Set(numbers));
  for (const r of batch.recipients) {
    assert.ok(TERMINAL_RECIPIENT.has(r.status), `recipient ${r.to_number} is ${r.status}`);
    assert.equal(r.attempts, 1, `recipient ${r.to_number} attempted once`);
    assert.equal(r.call_ids.length, 1, `recipient ${r.to_number} has one call`);
    assert.equal(r.call_id, r.call_ids[0]);
  }

  // The service placed exactly one call per recipient, each terminal.
  const calls = await batchCalls(http, auth, batchId);
  assert.equal(calls.length, numbers.length, 'one call per recipient');
  assert.equal(new Set(calls.map((c) => c.call_id)).size, calls.length);
  assert.deepEqual(new Set(calls.map((c) => c.call_id)), new Set(batch.recipients.map((r: Json) => r.call_id)));
  assert.deepEqual(new Set(calls.map((c) => c.to_number)), new Set(numbers));
  for (const c of calls) {
    assert.equal(c.batch_id, batchId);
    assert.ok(TERMINAL_CALL.has(c.status), `call ${c.call_id} is ${c.status}`);
  }

  // The carrier was asked once per number (and the service knows that call by its sid).
  const lost = { dials: 0, deliveries: 0 };
  const byCall = new Map(calls.map((c) => [c.call_id as string, c]));
  for (const c of calls) {
    const dials = carriers.calls().filter((d) => d.direction === 'outbound' && d.to === c.to_number);
    if (doubt.dial.has(c.call_id)) {
      assert.ok(dials.length <= 1, `${c.to_number} dialed ${dials.length} times`);
      if (dials.length === 0) {
        lost.dials++;
        assert.equal(c.status, 'failed', 'a dial lost with the crash ends the call failed');
      }
    } else {
      assert.equal(dials.length, 1, `${c.to_number} dialed ${dials.length} times`);
      assert.equal(dials[0].callSid, c.call_sid, `the service knows ${c.to_number}'s call by its sid`);
    }
  }

  // One call.completed per call (at most one for a delivery cut by the crash), one batch.completed.
  const expected = calls.filter((c) => !doubt.delivery.has(c.call_id)).map((c) => c.call_id as string);
  await waitFor(
    async () => {
      const got = new Set(
        events(receiver)
          .filter((e) => e.body.event === 'call.completed')
          .map((e) => e.body.conversation_id),
      );
      return expected.every((id) => got.has(id)) && events(receiver).some((e) => e.body.event === 'batch.completed' && e.body.batch_id === batchId);
    },
    15_000,
    'every call.completed and the batch.completed',
  );
  await new Promise((r) => setTimeout(r, 1000));
  const received = events(receiver);
  const callEvents = received.filter((e) => e.body.event === 'call.completed' && byCall.has(e.body.conversation_id));
  for (const c of calls) {
    const mine = callEvents.filter((e) => e.body.conversation_id === c.call_id);
    if (doubt.delivery.has(c.call_id)) {
      assert.ok(mine.length <= 1, `call ${c.call_id}: ${mine.length} call.completed`);
      lost.deliveries += 1 - mine.length;
    } else assert.equal(mine.length, 1, `call ${c.call_id}: ${mine.length} call.completed`);
    if (mine.length) assert.equal(mine[0].body.status, c.status, 'the event states the call as the API does');
  }
  const batchEvents = received.filter((e) => e.body.event === 'batch.completed' && e.body.batch_id === batchId);
  assert.equal(batchEvents.length, 1, 'exactly one batch.completed');
  const done = batchEvents[0].body;
  assert.equal(done.status, 'completed');
  assert.equal(done.total, numbers.length);
  assert.deepEqual(
    { completed: done.completed_count, failed: done.failed_count, voicemail: done.voicemail_count },
    { completed: batch.completed_count, failed: batch.failed_count, voicemail: batch.voicemail_count },
    'batch.completed states the final counts',
  );
  return { batch, calls, lost };
}

/** What the database held at the moment the service died. */
async function snapshot(client: pg.Client, batchId: string) {
  type CallAtKill = {
    id: string;
    status: string;
    call_sid: string | null;
    dial_attempted_at: Date | null;
    media_ended_at: Date | null;
    finalising_at: Date | null;
  };
  const calls = (await client.query('select id, status, call_sid, dial_attempted_at, media_ended_at, finalising_at from calls where batch_id = $1', [batchId]))
    .rows as CallAtKill[];
  const recipients = (await client.query('select status from batch_recipients where batch_id = $1', [batchId])).rows as Array<{ status: string }>;
  const sending = (await client.query(`select call_id from webhook_deliveries where kind = 'call.completed' and state = 'sending'`)).rows.map(
    (r) => r.call_id as string,
  );
  const live = calls.filter((c) => LIVE_CALL.includes(c.status));
  const doubt: InDoubt = {
    // Claimed and no sid recorded: the request may have been in flight, the carrier may or may not have it.
    // A dial job the dead instance took but never claimed is not in doubt: the call's deadline job dials it.
    dial: new Set(live.filter((c) => c.dial_attempted_at && !c.call_sid).map((c) => c.id)),
    delivery: new Set(sending),
  };
  // A finalisation the dead instance had claimed is taken over only once the claim is stale (2 min, src/calls/finaliser.ts).
  const orphanedClaims = live.filter((c) => c.finalising_at).map((c) => c.id);
  return { calls, recipients, live, doubt, orphanedClaims };
}

/**
 * SIGKILL at a moment no call's finalisation is under way: a finalisation claimed by an instance that
 * dies is taken over only once the claim is stale (2 min, src/calls/finaliser.ts), which would hold
 * the batch that long. The process is frozen (SIGSTOP), the database looked at, and the process killed
 * if no claim is open, else let go on for a moment; killing a frozen process is a crash at that moment.
 */
async function killOutsideFinalisation(service: ServiceProcess, client: pg.Client, batchId: string): Promise<void> {
  for (let i = 0; ; i++) {
    service.child.kill('SIGSTOP');
    await new Promise((r) => setTimeout(r, 100)); // what it had sent to the database lands
    if ((await progress(client, batchId)).finalising === 0 || i === 20) break;
    service.child.kill('SIGCONT');
    await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
  }
  assert.equal(await service.stop('SIGKILL'), null);
}

/** The batch's progress as the database has it, and whether a call's finalisation is under way. */
async function progress(client: pg.Client, batchId: string) {
  const { rows } = await client.query(
    `select count(*) filter (where status in ('completed', 'busy', 'no_answer', 'failed', 'canceled', 'voicemail'))::int as ended,
            count(*) filter (where status = 'in_progress')::int as talking,
            count(*) filter (where status in ('queued', 'initiated', 'ringing', 'in_progress') and finalising_at is not null)::int as finalising,
            (select count(*)::int from batch_recipients where batch_id = $1 and status in ('pending', 'scheduled')) as waiting
       from calls where batch_id = $1`,
    [batchId],
  );
  return rows[0] as { ended: number; talking: number; finalising: number; waiting: number };
}

describe('batches: crash and instances', () => {
  it('a batch SIGKILLed mid-run and restarted finishes with every recipient called once and one batch.completed', async () => {
    const db = await createTestDatabase();
    const receiver = await startReceiver();
    const secretsKey = randomBytes(32).toString('hex');
    const env = await instanceEnv(db.url, secretsKey);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    let service: ServiceProcess = await startProcess(env);
    try {
      let http = supertest(service.url);
      const { auth, agentId } = await setUp(http, receiver, 10);
      const people = sandboxNumbers('7001', 20, 100);
      const busy = sandboxNumbers('0002', 10, 100);
      for (const to of people) carriers.setScript(to, [...PERSON]);
      const numbers = people.flatMap((p, i) => (i < busy.length ? [p, busy[i]] : [p])); // people and busy mixed
      const batchId = await createBatch(http, auth, {
        agent_id: agentId,
        name: 'Reminders across a crash',
        recipients: numbers.map((to_number) => ({ to_number })),
        concurrency: 5,
        webhook_url: receiver.url,
      });

      // Killed once some calls are over, others are on the line and more recipients wait.
      await waitFor(
        async () => {
          const p = await progress(client, batchId);
          return p.ended >= 8 && p.talking >= 2 && p.waiting >= 1;
        },
        30_000,
        'a batch half way',
      );
      await killOutsideFinalisation(service, client, batchId);
      const atKill = await snapshot(client, batchId);
      const endedAtKill = atKill.calls.filter((c) => TERMINAL_CALL.has(c.status)).length;
      const waitingAtKill = atKill.recipients.filter((r) => r.status === 'pending' || r.status === 'scheduled').length;
      console.log(
        `at the kill: ${endedAtKill} calls ended, ${atKill.live.length} live (${atKill.live.map((c) => c.status).join(',')}), ${waitingAtKill} recipients waiting;`,
        `dials in doubt ${atKill.doubt.dial.size}, deliveries in doubt ${atKill.doubt.delivery.size}, finalisations orphaned ${atKill.orphanedClaims.length}`,
      );
      assert.ok(endedAtKill >= 1 && atKill.live.length >= 1 && waitingAtKill >= 1, 'the kill came mid-batch');

      service = await startProcess(env);
      http = supertest(service.url);
      // Had the kill still come mid-finalisation (the freeze gave up), that call would end only once its claim is stale.
      const { calls, lost } = await assertExactlyOnce(http, auth, batchId, numbers, receiver, atKill.doubt, atKill.orphanedClaims.length ? 200_000 : 45_000);
      console.log(`lost with the crash: ${lost.dials} dials, ${lost.deliveries} call.completed deliveries`);

      // The calls live at the kill ended after the restart (their deadline, or the carrier's report to the new process).
      for (const live of atKill.live) {
        const c = calls.find((x) => x.call_id === live.id)!;
        assert.ok(TERMINAL_CALL.has(c.status), `call live at the kill is ${c.status}`);
        assert.equal(
          events(receiver).filter((e) => e.body.event === 'call.completed' && e.body.conversation_id === live.id).length,
          1,
          'a call live at the kill is reported once',
        );
        if (live.status === 'in_progress' && !live.media_ended_at) {
          assert.deepEqual([c.status, c.end_reason], ['failed', 'service_error'], 'a call on the line whose media died with the service');
        }
      }
      const statuses = calls.reduce<Record<string, number>>(
        (acc, c) => ((acc[`${c.status}/${c.end_reason}`] = (acc[`${c.status}/${c.end_reason}`] ?? 0) + 1), acc),
        {},
      );
      console.log('final call outcomes:', JSON.stringify(statuses));
      const batch = await getBatch(http, auth, batchId);
      assert.ok(batch.failed_count >= busy.length, 'every busy number counts as failed');
      assert.ok(batch.completed_count >= 1, 'people reached before or after the crash completed');
    } finally {
      const code = await service.stop('SIGTERM');
      await client.end();
      await receiver.close();
      await db.drop();
      assert.equal(code, 0, service.output().slice(-3000));
    }
  });

  it('two instances on one database run a batch with every recipient called once and one batch.completed', async () => {
    const db = await createTestDatabase();
    const receiver = await startReceiver();
    const secretsKey = randomBytes(32).toString('hex');
    const services: ServiceProcess[] = [];
    try {
      services.push(await startProcess(await instanceEnv(db.url, secretsKey)));
      services.push(await startProcess(await instanceEnv(db.url, secretsKey)));
      const [a, b] = services.map((s) => supertest(s.url));
      const { auth, agentId } = await setUp(a, receiver, 20);
      const people = sandboxNumbers('7002', 28, 200);
      const busy = sandboxNumbers('0002', 12, 300);
      for (const to of people) carriers.setScript(to, [...PERSON]);
      const numbers = [...people, ...busy];
      const batchId = await createBatch(a, auth, {
        agent_id: agentId,
        name: 'Reminders on two instances',
        recipients: numbers.map((to_number) => ({ to_number })),
        concurrency: 10,
        webhook_url: receiver.url,
      });

      // Read through the other instance.
      const { batch, calls } = await assertExactlyOnce(b, auth, batchId, numbers, receiver);
      const outcomes = calls.map((c) => `${c.to_number}:${c.status}/${c.end_reason}`).sort();
      assert.equal(batch.completed_count, people.length, `every person reached: ${outcomes.join(' ')}`);
      assert.equal(batch.failed_count, busy.length, 'every busy number failed');
      assert.equal(batch.voicemail_count, 0);

      // Both instances took jobs: dispatch rounds ('batch calls queued') and dials ('call dialed').
      const count = (s: ServiceProcess, msg: string) =>
        s
          .output()
          .split('\n')
          .filter((l) => l.includes(`"msg":"${msg}"`)).length;
      const work = services.map((s) => ({ rounds: count(s, 'batch calls queued'), dialed: count(s, 'call dialed'), finalised: count(s, 'call finalised') }));
      console.log('work per instance:', JSON.stringify(work));
      assert.equal(work[0].dialed + work[1].dialed, numbers.length, 'the two instances dialed each call once between them');
      assert.ok(
        work.every((w) => w.dialed > 0 && w.rounds > 0),
        'both instances ran dispatch rounds and dials',
      );
    } finally {
      const codes = await Promise.all(services.map((s) => s.stop('SIGTERM')));
      await receiver.close();
      await db.drop();
      codes.forEach((code, i) => assert.equal(code, 0, services[i].output().slice(-3000)));
    }
  });
});
