/**
 * A query compiled once (src/db/compiled-query.ts) answers what the same knex builder answers, for
 * each call's values, keeps the builder's own constants (a `first()`'s limit), runs as one named
 * prepared statement, and refuses at compile time a value the query never binds. Against a real
 * PostgreSQL table.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Knex } from 'knex';
import { createKnex } from '../../src/db/database.js';
import { compiledQuery } from '../../src/db/compiled-query.js';
import { createTestDatabase } from '../helpers/database.js';

let db: { url: string; drop(): Promise<void> };
let knex: Knex;

before(async () => {
  db = await createTestDatabase();
  knex = createKnex(db.url);
  await knex.schema.createTable('things', (t) => {
    t.text('id').primary();
    t.text('owner').notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
  });
  await knex('things').insert([
    { id: 'a', owner: 'ann', expires_at: new Date('2030-01-01T00:00:00Z') },
    { id: 'b', owner: 'ann', expires_at: new Date('2020-01-01T00:00:00Z') },
    { id: 'c', owner: 'bob', expires_at: new Date('2030-01-01T00:00:00Z') },
    { id: 'd', owner: "o'brien?", expires_at: new Date('2030-01-01T00:00:00Z') },
  ]);
});
after(async () => {
  await knex?.destroy();
  await db?.drop();
});

describe('compiledQuery', () => {
  it("answers the builder's rows for each call's values, its limit kept", async () => {
    const build = (owner: string, now: Date | string) => knex('things').where({ owner }).where('expires_at', '>', now).orderBy('id').select('id', 'expires_at');
    const live = compiledQuery<[owner: string, now: Date], { id: string; expires_at: Date }>(knex, (owner, now) => build(owner, now), 2);
    const first = compiledQuery<[owner: string], { id: string }>(knex, (owner) => knex('things').where({ owner }).orderBy('id').first('id'), 1);
    for (const [owner, now] of [
      ['ann', new Date('2025-01-01T00:00:00Z')],
      ['ann', new Date('2010-01-01T00:00:00Z')],
      ['bob', new Date('2031-01-01T00:00:00Z')],
      ["o'brien?", new Date('2025-01-01T00:00:00Z')],
      ['nobody', new Date('2025-01-01T00:00:00Z')],
    ] as const) {
      assert.deepEqual(await live(owner, now), await build(owner, now), `${owner} at ${now.toISOString()}`);
    }
    assert.deepEqual(await first('ann'), [{ id: 'a' }], 'one row: the limit of first() is a constant of the compiled query');
  });

  it('runs as a named statement, prepared once on the connection', async () => {
    const one = createKnex(db.url, { min: 0, max: 1 });
    try {
      const byOwner = compiledQuery<[owner: string], { id: string }>(one, (owner) => one('things').where({ owner }).orderBy('id').select('id'), 1);
      assert.deepEqual(await byOwner('bob'), [{ id: 'c' }]);
      assert.deepEqual(await byOwner('ann'), [{ id: 'a' }, { id: 'b' }]);
      const { rows } = await one.raw(`select name, statement from pg_prepared_statements where name like 'compiled\\_%'`);
      assert.equal(rows.length, 1, 'one statement for both calls');
      assert.match(rows[0].statement, /from "things" where "owner" = \$1/);
    } finally {
      await one.destroy();
    }
  });

  it('refuses a value the query does not bind', () => {
    assert.throws(() => compiledQuery<[owner: string, unused: string], unknown>(knex, (owner) => knex('things').where({ owner }), 2), /value 1 is not bound/);
  });
});
