/**
 * Migration 044 on a database with agents (a deployment upgrading): each existing agent gets version 1,
 * published, holding its configuration as the row had it; undone, the table and counters go.
 */
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { insertWorkspace, migrationDatabase, redoAll, undoFrom } from '../helpers/migrations.js';

const database = migrationDatabase();

const WS = 'ws_01JD5Z7Q8Y1C2B3A4N5M6K7P8S';
const AGENT = 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9K';

it('gives every existing agent version 1, published, and undoes cleanly', async () => {
  const knex = database.knex();
  await undoFrom(knex, '044');
  assert.equal(await knex.schema.hasTable('agent_versions'), false, 'undone: the database as it was before 044');
  await insertWorkspace(knex, WS);
  await knex('agents').insert({ id: AGENT, workspace_id: WS, name: 'Before', instruction: 'Be brief', variable_placeholders: JSON.stringify({ who: 'you' }) });

  await redoAll(knex);
  const agent = await knex('agents').where({ id: AGENT }).first('draft_version', 'published_version', 'auto_publish');
  assert.deepEqual(agent, { draft_version: 1, published_version: 1, auto_publish: true });
  const versions = await knex('agent_versions').where({ agent_id: AGENT }).select('*');
  assert.equal(versions.length, 1);
  assert.equal(versions[0].version, 1);
  assert.equal(versions[0].workspace_id, WS);
  assert.ok(versions[0].published_at instanceof Date);
  assert.equal(versions[0].config.name, 'Before');
  assert.equal(versions[0].config.instruction, 'Be brief');
  assert.deepEqual(versions[0].config.variable_placeholders, { who: 'you' });
  for (const key of ['id', 'workspace_id', 'created_at', 'updated_at', 'draft_version', 'published_version', 'auto_publish'])
    assert.ok(!(key in versions[0].config), `${key} is not configuration`);

  await undoFrom(knex, '044');
  assert.equal(await knex.schema.hasColumn('agents', 'draft_version'), false);
  await redoAll(knex);
});
