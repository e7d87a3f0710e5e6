import type { Knex } from 'knex';

/**
 * Issue 23: several transfer destinations per agent (`[{name, phone_number, description}]`, the model
 * choosing one by name), and the per-caller setup of inbound calls: the agent's `inbound_setup`
 * (`{url}`), and on the call what came of it and, when the answer handed the call to another agent,
 * the agent whose number and carrier account still carry it (`number_agent_id`; null: `agent_id`).
 * `json`, not `jsonb`, so lists and objects keep the order the tenant wrote them in.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('agents', (t) => {
    t.json('transfer_destinations').notNullable().defaultTo('[]');
    t.json('inbound_setup');
  });
  await knex.schema.alterTable('calls', (t) => {
    t.text('number_agent_id');
    t.json('inbound_setup');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('calls', (t) => {
    t.dropColumn('number_agent_id');
    t.dropColumn('inbound_setup');
  });
  await knex.schema.alterTable('agents', (t) => {
    t.dropColumn('transfer_destinations');
    t.dropColumn('inbound_setup');
  });
}
