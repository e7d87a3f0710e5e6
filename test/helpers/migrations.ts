/**
 * Tests of a migration on a database that already has data (a deployment upgrading): a database of
 * the test file's own, the migrations from a version on undone, a workspace as any version had it.
 */
import { after, before } from 'node:test';
import type { Knex } from 'knex';
import { createTestDatabase } from './database.js';
import { createKnex } from '../../src/db/database.js';
import { migrationSource } from '../../src/db/migrations/index.js';

/** A migrated database for this test file, dropped after it; `knex()` once `before` has run. */
export function migrationDatabase(): { knex(): Knex } {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let knex: Knex;
  before(async () => {
    db = await createTestDatabase();
    knex = createKnex(db.url);
  });
  after(async () => {
    await knex.destroy();
    await db.drop();
  });
  return { knex: () => knex };
}

/** Undoes the migrations from `version` on (later ones first), as a deployment before it had none of them. */
export async function undoFrom(knex: Knex, version: string): Promise<void> {
  while ((await knex.migrate.currentVersion({ migrationSource })) >= version) await knex.migrate.down({ migrationSource });
}

export function redoAll(knex: Knex): Promise<unknown> {
  return knex.migrate.latest({ migrationSource });
}

/** Inserts a workspace with the columns every version has. */
export function insertWorkspace(knex: Knex, id: string): Promise<unknown> {
  return knex('workspaces').insert({ id, name: 'Before', plan: 'trial', subscription_status: 'active', credit_balance_cents: 0, concurrent_session_limit: 5 });
}
