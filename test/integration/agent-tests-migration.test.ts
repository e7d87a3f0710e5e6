/**
 * Migration 049: agent tests, test runs and their cases, and the event kind shape that takes
 * `test_run.completed`; undone, the tables go, and so do the events of kinds the old shape refuses, so
 * its check can come back.
 */
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { insertWorkspace, migrationDatabase, redoAll, undoFrom } from '../helpers/migrations.js';

const database = migrationDatabase();

const WS = 'ws_01JD5Z7Q8Y1C2B3A4N5M6K7P8S';
const AGENT = 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9K';

it('keeps tests, runs and cases with their agent, takes test_run.completed, and undoes cleanly', async () => {
  const knex = database.knex();
  await insertWorkspace(knex, WS);
  await knex('agents').insert({ id: AGENT, workspace_id: WS, name: 'Tested', instruction: 'Be brief' });
  const definition = JSON.stringify({ description: null, variables: {}, expect_first_message: [], turns: [{ user: 'Hi', expect: [] }], tool_mocks: [] });
  await knex('agent_tests').insert({ id: 'tst_1', workspace_id: WS, agent_id: AGENT, name: 'One', type: 'scripted', definition });
  await assert.rejects(knex('agent_tests').insert({ id: 'tst_2', workspace_id: WS, agent_id: AGENT, name: 'One', type: 'scripted', definition }), /unique/);
  await assert.rejects(
    knex('agent_tests').insert({ id: 'tst_3', workspace_id: WS, agent_id: AGENT, name: 'Two', type: 'simulated', definition }),
    /agent_tests_type_check/,
  );
  await knex('test_runs').insert({ id: 'trun_1', workspace_id: WS, agent_id: AGENT, agent_version: 1, repeats: 1, concurrency: 1 });
  await assert.rejects(
    knex('test_runs').insert({ id: 'trun_2', workspace_id: WS, agent_id: AGENT, agent_version: 1, repeats: 11, concurrency: 1 }),
    /test_runs_repeats_check/,
  );
  await knex('test_run_cases').insert({
    id: 'tcase_1',
    run_id: 'trun_1',
    workspace_id: WS,
    test_id: 'tst_1',
    test_name: 'One',
    position: 0,
    repeat: 1,
    definition,
  });
  await knex('webhook_events').insert({ id: 'evt_1', workspace_id: WS, kind: 'test_run.completed', body: '{}' });
  await assert.rejects(knex('webhook_events').insert({ id: 'evt_2', workspace_id: WS, kind: '_run.completed', body: '{}' }), /webhook_events_kind_check/);

  // A deleted test leaves the case that ran it, without its id.
  await knex('agent_tests').where({ id: 'tst_1' }).delete();
  assert.deepEqual(await knex('test_run_cases').where({ id: 'tcase_1' }).first('test_id', 'test_name', 'status'), {
    test_id: null,
    test_name: 'One',
    status: 'pending',
  });

  await undoFrom(knex, '049');
  for (const table of ['agent_tests', 'test_runs', 'test_run_cases']) assert.equal(await knex.schema.hasTable(table), false, table);
  assert.equal(await knex('webhook_events').where({ id: 'evt_1' }).first(), undefined);
  await assert.rejects(knex('webhook_events').insert({ id: 'evt_3', workspace_id: WS, kind: 'test_run.completed', body: '{}' }), /webhook_events_kind_check/);
  await knex('webhook_events').insert({ id: 'evt_4', workspace_id: WS, kind: 'call.completed', body: '{}' });
  await redoAll(knex);
  assert.equal(await knex.schema.hasTable('test_run_cases'), true);
});
