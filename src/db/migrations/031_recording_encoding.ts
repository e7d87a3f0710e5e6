import type { Knex } from 'knex';

/**
 * How a recording's chunks hold its samples. `pcm16` (every recording before this, and web sessions):
 * the WAV's own PCM16. `mulaw`: a phone call's audio as the carrier carried it, G.711 mu-law, one byte
 * a sample, half the bytes of PCM16 to write and keep; decoded to PCM16 when served, exactly (the call's
 * PCM16 was decoded from these bytes). `bytes`, `offset` and `size` stay in the served PCM16's bytes, so
 * sizes, durations, the cap and Range do not depend on the encoding.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`alter table recordings add column encoding text not null default 'pcm16' check (encoding in ('pcm16', 'mulaw'))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table recordings drop column encoding');
}
