/**
 * Migrations are listed here in order (rather than discovered from the file system) so that they run
 * the same from TypeScript sources, a bundle, or tests, and a missing file fails the type check.
 */
import type { Knex } from 'knex';
import * as m001 from './001_workspaces.js';

interface Migration {
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

const migrations: Array<[string, Migration]> = [['001_workspaces', m001]];

export const migrationSource: Knex.MigrationSource<[string, Migration]> = {
  getMigrations: async () => migrations,
  getMigrationName: ([name]) => name,
  getMigration: async ([, migration]) => migration,
};
