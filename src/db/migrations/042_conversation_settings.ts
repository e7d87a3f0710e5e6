/**
 * Conversation settings per agent (issue 34): the agent's `conversation` (turn detection,
 * interruptions, idle ladder, maximum duration); the settings each call runs with, copied as it is
 * created (the agent's with the call's or batch's override); a batch's and a web-session token's
 * override. Live events gain `idle` (a reminder said, the idle hang-up).
 */
import type { Knex } from 'knex';

const TYPES = ['status', 'transcript', 'tool_call', 'tool_result', 'interrupted', 'transfer', 'dtmf', 'end'];

export async function up(knex: Knex): Promise<void> {
  for (const table of ['agents', 'calls', 'batches', 'realtime_tokens']) {
    await knex.schema.alterTable(table, (t) => t.jsonb('conversation'));
  }
  await knex.raw(`alter table conversation_events drop constraint conversation_events_type_check`);
  await knex.raw(
    `alter table conversation_events add constraint conversation_events_type_check check (type in (${[...TYPES, 'idle'].map((t) => `'${t}'`).join(', ')}))`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex('conversation_events').where({ type: 'idle' }).delete();
  await knex.raw(`alter table conversation_events drop constraint conversation_events_type_check`);
  await knex.raw(`alter table conversation_events add constraint conversation_events_type_check check (type in (${TYPES.map((t) => `'${t}'`).join(', ')}))`);
  for (const table of ['realtime_tokens', 'batches', 'calls', 'agents']) {
    await knex.schema.alterTable(table, (t) => t.dropColumn('conversation'));
  }
}
