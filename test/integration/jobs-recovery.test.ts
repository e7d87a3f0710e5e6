/**
 * The job runner survives a job whose completion cannot be written: graphile-worker then shuts its
 * pool down. The instance neither exits (taking its live calls with it) nor goes
 * on taking no jobs: a new runner starts, the stopped worker's job goes back to the queue, and calls
 * placed before and after are dialed once each and finish.
 */
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { setWorkspace, waitFor } from '../helpers/realtime.js';
import { FAST_CALLS, createPhoneAgent, placeCall, sandboxNumber, waitForCall } from '../helpers/calls.js';

let t: TestService;
let tn: Tenant;

before(async () => {
  t = await startTestService({ ...FAST_CALLS, JOBS_RESTART_DELAY_MS: '50' });
  tn = await tenant(t);
  await setWorkspace(t, tn.workspaceId, { concurrent_session_limit: 5, credit_balance_cents: 100_000 });
});

after(async () => {
  await t.close();
});

it("a job's completion that fails stops one runner, and a new one takes over: every call is dialed once and finishes", async () => {
  const knex = t.service.db.knex;
  // The next write of a job's completion fails, once (a sequence counts, since the failed statement's
  // own writes roll back).
  await knex.raw(`
    create sequence failed_completions;
    create function fail_one_completion() returns trigger language plpgsql as $$
    begin
      if nextval('failed_completions') = 1 then raise exception 'injected: the database refused the completion'; end if;
      return old;
    end $$;
    create trigger fail_one_completion before delete on graphile_worker._private_jobs for each row execute function fail_one_completion();
  `);
  const agentId = await createPhoneAgent(t, tn, 'provider_a');
  const first = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber() });
  assert.equal(first.status, 201, JSON.stringify(first.body));
  await waitFor(async () => t.logs.some((l) => l.includes('job runner started again')), 30_000, 'the runner started again');
  assert.ok(
    t.logs.some((l) => l.includes('injected: the database refused the completion')),
    'the failed completion was logged',
  );

  const second = await placeCall(t, tn, { agent_id: agentId, to_number: sandboxNumber() });
  assert.equal(second.status, 201, JSON.stringify(second.body));
  for (const id of [first.body.call_id, second.body.call_id]) {
    const call = await waitForCall(t, tn, id, undefined, 30_000);
    assert.equal(call.status, 'completed', id);
  }
  const dials = t.service.sandbox.carriers!.server.calls();
  for (const to of [first, second].map((r) => r.body.to_number as string)) {
    assert.equal(dials.filter((d) => d.to === to).length, 1, `${to} dialed once`);
  }
  const { rows: stuck } = await knex.raw(
    `select count(*)::int as n from graphile_worker._private_jobs where locked_by is not null and locked_at < now() - interval '10 seconds'`,
  );
  assert.equal(stuck[0].n, 0, 'no job left locked to a stopped worker');
});
