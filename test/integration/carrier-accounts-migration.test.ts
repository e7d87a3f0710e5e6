/**
 * Migration 041 on a database with agents (a deployment upgrading): each agent's provider_a and
 * provider_b columns move into `carrier_accounts` (sealed values as they were, so they still open in
 * their agent's field), the numbers answered inbound into `agent_inbound_numbers`, whose key keeps
 * one agent per number at a provider; undone, the columns come back as they were.
 */
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { insertWorkspace, migrationDatabase, redoAll, undoFrom } from '../helpers/migrations.js';
import { isUniqueViolation } from '../../src/lib/db-errors.js';

const database = migrationDatabase();

const WS = 'ws_01JD5Z7Q8Y1C2B3A4N5M6K7P8S';
const BOTH = 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9K';
const NONE = 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9M';
const OTHER = 'agt_01JD5Z8A1B2C3D4E5F6G7H8J9N';
const A_CONFIG = { account_sid: 'AC1', auth_token: 'v2.sealed.token' };
const B_CONFIG = { api_key: 'v2.sealed.key', connection_id: 'conn1' };

it('moves the accounts into carrier_accounts and the inbound numbers into their table, and back', async () => {
  const knex = database.knex();
  await undoFrom(knex, '041');
  assert.equal(await knex.schema.hasColumn('agents', 'carrier_accounts'), false, 'undone: the database as it was before 041');

  await insertWorkspace(knex, WS);
  await knex('agents').insert([
    {
      id: BOTH,
      workspace_id: WS,
      name: 'Both',
      provider_a_config: JSON.stringify(A_CONFIG),
      provider_a_phone_number: '+14155550100',
      provider_a_inbound_enabled: true,
      provider_b_config: JSON.stringify(B_CONFIG),
    },
    { id: NONE, workspace_id: WS, name: 'None' },
    { id: OTHER, workspace_id: WS, name: 'Other', provider_a_phone_number: '+14155550100' },
  ]);

  await redoAll(knex);
  const accounts = async (id: string) => (await knex('agents').where({ id }).first('carrier_accounts')).carrier_accounts;
  assert.deepEqual(await accounts(BOTH), {
    provider_a: { config: A_CONFIG, phone_number: '+14155550100', inbound_enabled: true },
    provider_b: { config: B_CONFIG, inbound_enabled: false },
  });
  assert.deepEqual(await accounts(NONE), {});
  assert.deepEqual(await accounts(OTHER), { provider_a: { phone_number: '+14155550100', inbound_enabled: false } });
  assert.deepEqual(await knex('agent_inbound_numbers').select('provider', 'phone_number', 'agent_id'), [
    { provider: 'provider_a', phone_number: '+14155550100', agent_id: BOTH },
  ]);

  // A second agent cannot answer the number at the same provider; at another provider it may.
  const enable = (id: string, provider: string) =>
    knex('agents')
      .where({ id })
      .update({
        carrier_accounts: knex.raw(`jsonb_set(carrier_accounts, array[?::text], ?::jsonb)`, [
          provider,
          JSON.stringify({ phone_number: '+14155550100', inbound_enabled: true }),
        ]),
      });
  await assert.rejects(enable(OTHER, 'provider_a'), (err: unknown) => isUniqueViolation(err, 'agent_inbound_numbers_pkey'));
  await enable(OTHER, 'provider_b');
  assert.equal(
    await knex('agent_inbound_numbers')
      .where({ agent_id: OTHER })
      .first('provider')
      .then((r) => r?.provider),
    'provider_b',
  );

  await undoFrom(knex, '041');
  const both = await knex('agents').where({ id: BOTH }).first();
  assert.deepEqual(
    [both.provider_a_config, both.provider_a_phone_number, both.provider_a_inbound_enabled, both.provider_b_config, both.provider_b_phone_number],
    [A_CONFIG, '+14155550100', true, B_CONFIG, null],
  );
  const other = await knex('agents').where({ id: OTHER }).first();
  assert.deepEqual([other.provider_b_phone_number, other.provider_b_inbound_enabled], ['+14155550100', true]);
  assert.equal(await knex.schema.hasTable('agent_inbound_numbers'), false);
  await redoAll(knex);
});
