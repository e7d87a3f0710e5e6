/**
 * Migration 022 on a database that already has usage (a deployment upgrading): records metered
 * before it get the agent of the call or web session they metered and their billed minutes (every
 * started minute of their seconds), so `GET /api/v1/usage` reports earlier months too; a record whose
 * conversation record is gone keeps no agent and still counts in the totals.
 */
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { insertWorkspace, migrationDatabase, redoAll, undoFrom } from '../helpers/migrations.js';

const database = migrationDatabase();

const WS = 'ws_01JD5Z7Q8Y1C2B3A4N5M6K7P8S';
const PHONE_AGENT = 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9K';
const WEB_AGENT = 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9M';

it('fills the agent and the billed minutes of records metered before it', async () => {
  const knex = database.knex();
  await undoFrom(knex, '022');
  assert.equal(await knex.schema.hasColumn('usage_records', 'minutes'), false, 'undone: the database as it was before 022');

  await insertWorkspace(knex, WS);
  await knex('calls').insert({
    id: 'call_01JD5Z9K3M4N5P6Q7R8S9T0V1W',
    workspace_id: WS,
    agent_id: PHONE_AGENT,
    direction: 'outbound',
    provider: 'provider_a',
    from_number: '+14155550100',
    to_number: '+14155550123',
    status: 'completed',
    deadline_at: new Date(),
  });
  const now = new Date();
  await knex('realtime_conversations').insert({
    id: 'conv_01JD5Z9K3M4N5P6Q7R8S9T0V1W',
    workspace_id: WS,
    agent_id: WEB_AGENT,
    user_id: 'visitor-1',
    source: 'voice',
    status: 'completed',
    started_at: now,
    ended_at: now,
    duration: 61,
    message_count: 0,
    interruption_count: 0,
    latency_avg_ms: 0,
    summary: '',
    sentiment: 'neutral',
    goal_met: false,
    needs_review: false,
  });
  const record = (kind: string, ref_id: string, seconds: number) => ({ workspace_id: WS, kind, ref_id, seconds, cents: 0, started_at: now });
  await knex('usage_records').insert([
    record('phone_call', 'call_01JD5Z9K3M4N5P6Q7R8S9T0V1W', 60),
    record('web_session', 'conv_01JD5Z9K3M4N5P6Q7R8S9T0V1W', 61),
    record('phone_call', 'call_01JD5Z9K3M4N5P6Q7R8S9T0V2X', 0),
    record('phone_call', 'call_01JD5Z9K3M4N5P6Q7R8S9T0V3Y', 1),
  ]);

  await redoAll(knex);
  const rows = await knex('usage_records').where({ workspace_id: WS }).orderBy('id').select('ref_id', 'agent_id', 'minutes');
  assert.deepEqual(rows, [
    { ref_id: 'call_01JD5Z9K3M4N5P6Q7R8S9T0V1W', agent_id: PHONE_AGENT, minutes: 1 },
    { ref_id: 'conv_01JD5Z9K3M4N5P6Q7R8S9T0V1W', agent_id: WEB_AGENT, minutes: 2 },
    { ref_id: 'call_01JD5Z9K3M4N5P6Q7R8S9T0V2X', agent_id: null, minutes: 0 },
    { ref_id: 'call_01JD5Z9K3M4N5P6Q7R8S9T0V3Y', agent_id: null, minutes: 1 },
  ]);
  await assert.rejects(
    knex('usage_records').insert({ ...record('phone_call', 'call_01JD5Z9K3M4N5P6Q7R8S9T0V4Z', 5) }),
    /minutes/,
    'every record written after it states its minutes',
  );
});
