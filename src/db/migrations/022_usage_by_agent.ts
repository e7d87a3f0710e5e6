/**
 * Usage by agent and in billed minutes (issue 23, `GET /api/v1/usage`): each usage record names the
 * agent whose conversation it metered and the minutes it was billed (every started metering minute,
 * as the charge counted them), so the developer's usage read needs no other domain's tables and
 * agrees with what the credit was charged. Records written before this are filled from the calls and
 * web-session records they meter (`agent_id` stays null where that record is gone) and their minutes
 * from their seconds at 60-second minutes (production's).
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('usage_records', (t) => {
    t.text('agent_id');
    t.integer('minutes');
  });
  await knex.raw(`update usage_records u set agent_id = c.agent_id from calls c where u.kind = 'phone_call' and c.id = u.ref_id`);
  await knex.raw(`update usage_records u set agent_id = r.agent_id from realtime_conversations r where u.kind = 'web_session' and r.id = u.ref_id`);
  await knex.raw(`update usage_records set minutes = ceil(seconds / 60.0)::int`);
  await knex.raw(`alter table usage_records alter column minutes set not null`);
  await knex.raw(`alter table usage_records add constraint usage_records_minutes_check check (minutes >= 0)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('usage_records', (t) => {
    t.dropColumn('agent_id');
    t.dropColumn('minutes');
  });
}
