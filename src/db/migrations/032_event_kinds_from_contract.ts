import type { Knex } from 'knex';

/**
 * The webhook event kinds come from the contract (the AsyncAPI document's webhook messages, listed by
 * `npm run generate`; src/webhooks/events.ts validates every payload against its message), so the
 * database no longer lists them: a new kind needs no migration. The column keeps the shape of a kind
 * (`noun.verb_phrase`, lower case) and its length.
 */
const SHAPE = `kind ~ '^[a-z]+(\\.[a-z_]+)+$' and length(kind) <= 64`;
const SPEC_KINDS = `kind in ('call.completed', 'batch.completed', 'call.status_changed', 'call.transcript')`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`alter table webhook_events drop constraint webhook_events_kind_check`);
  await knex.raw(`alter table webhook_events add constraint webhook_events_kind_check check (${SHAPE})`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`delete from webhook_events where not (${SPEC_KINDS})`);
  await knex.raw(`alter table webhook_events drop constraint webhook_events_kind_check`);
  await knex.raw(`alter table webhook_events add constraint webhook_events_kind_check check (${SPEC_KINDS})`);
}
